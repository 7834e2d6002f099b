package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
	"github.com/codesession/codesession/transports/warmpool"
)

// Defaults of the options.
const (
	DefaultOutputCap    = 64 << 10
	DefaultLineCap      = 16 << 20
	DefaultStartTimeout = 5 * time.Minute
	DefaultProbeTimeout = 30 * time.Second
	// DefaultInterruptGrace is how long a cancelled turn gets to end by
	// itself before the process is killed and the turn closed interrupted.
	DefaultInterruptGrace = 15 * time.Second
	minLineCap            = 1 << 10
)

// Transport is one ACP backend: an Agent driven by the client. It is safe
// for concurrent use; each Open starts an independent process.
type Transport struct {
	agent        Agent
	binary       string
	outputCap    int
	lineCap      int
	startTimeout time.Duration
	grace        time.Duration
	env          []string
	wire         func(dir string, line []byte)
	launched     sync.Map // session id → the argv its process started with (launch.go)

	*warmpool.Slot[warmKey, *warmProc] // the warm pool (pool.go)
}

var _ transports.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*Transport)

// WithBinary runs this executable.
func WithBinary(path string) Option { return func(t *Transport) { t.binary = path } }

// WithOutputCap caps each tool result's output at n bytes (reported with
// Truncated and OriginalBytes when it fires).
func WithOutputCap(n int) Option {
	return func(t *Transport) { subprocess.Positive(&t.outputCap, n) }
}

// WithLineCap caps one line of the agent's stdout at n bytes (at least
// 1 KiB): a longer line is dropped and reported as an EvError.
func WithLineCap(n int) Option {
	return func(t *Transport) { t.lineCap = max(n, minLineCap) }
}

// WithStartTimeout bounds the process start, initialize and session/new
// (or session/load) in Open.
func WithStartTimeout(d time.Duration) Option {
	return func(t *Transport) { subprocess.Positive(&t.startTimeout, d) }
}

// WithInterruptGrace sets how long a cancelled turn may take to end.
func WithInterruptGrace(d time.Duration) Option {
	return func(t *Transport) { subprocess.Positive(&t.grace, d) }
}

// WithEnv adds KEY=VALUE entries to every session's environment, below
// SessionSpec.Env.
func WithEnv(kv ...string) Option { return func(t *Transport) { t.env = append(t.env, kv...) } }

// WithWireTap calls f with every line the client writes (dir ">>") and
// every line of the agent's stdout (dir "<<") of every session, from the
// session's goroutines: what the CLI actually received and said, for
// tests. f must not block.
func WithWireTap(f func(dir string, line []byte)) Option { return func(t *Transport) { t.wire = f } }

// New returns the transport driving agent.
func New(agent Agent, opts ...Option) *Transport {
	t := &Transport{agent: agent, outputCap: DefaultOutputCap, lineCap: DefaultLineCap,
		startTimeout: DefaultStartTimeout, grace: DefaultInterruptGrace}
	t.Slot = newWarmSlot()
	for _, o := range opts {
		o(t)
	}
	return t
}

// Descriptor returns the agent's capability descriptor.
func (t *Transport) Descriptor() transports.Descriptor { return t.agent.Descriptor }

// Binary returns the executable the transport would run with the given
// extra environment (the agent's EnvBinary in env wins over the process's
// own), or an error saying why there is none.
func (t *Transport) Binary(env []string) (string, error) {
	if t.binary != "" {
		if _, err := os.Stat(t.binary); err != nil {
			return "", fmt.Errorf("the %s CLI is not at %s (%s)", t.agent.Descriptor.ID, t.binary, t.agent.Install)
		}
	}
	cli := subprocess.CLI{Name: t.agent.Descriptor.ID, Command: t.agent.Command, EnvVar: t.agent.EnvBinary, Install: t.agent.Install}
	return cli.Find(t.binary, env)
}

// Probe reads the version of the npm package the binary belongs to (a
// node CLI's --version takes seconds on a loaded machine, and the
// listing's probe gets ten); a binary outside its package is asked
// `--version` with a throwaway HOME, bounded by ctx and
// DefaultProbeTimeout.
func (t *Transport) Probe(ctx context.Context) messages.Availability {
	bin, err := t.Binary(nil)
	if err != nil {
		return subprocess.VersionProbe{}.Availability(ctx, "", err)
	}
	if v, ok := t.packageVersion(bin); ok {
		return messages.Availability{CheckedAt: time.Now(), Binary: bin, Version: v, Available: true}
	}
	home, err := os.MkdirTemp("", "codesession-probe-")
	if err != nil {
		return messages.Availability{CheckedAt: time.Now(), Binary: bin, Reason: "cannot make a scratch HOME for the probe: " + err.Error()}
	}
	defer os.RemoveAll(home)
	probe := subprocess.VersionProbe{Timeout: DefaultProbeTimeout, Env: t.buildEnv(os.Environ(), transports.SessionSpec{Home: home}, nil),
		Parse: t.agent.ParseVersion}
	return probe.Availability(ctx, bin, nil)
}

// Open starts the agent's process for the session, completes initialize
// and session/new (or session/load for SessionSpec.ResumeExternalID, where
// the agent offers it), selects the posture's mode, and emits EvStarted
// (turn 0) with the agent's session id. With a warm pool it adopts a
// pooled session of the same key instead (the posture's mode selected
// where it differs), and the pool refills after the first turn. It fails
// with a *messages.Error: invalid for a bad spec, unsupported for a
// missing CLI or an ability the agent lacks, internal (with the end of its
// stderr) when the agent exits or does not answer.
func (t *Transport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	spec, err := transports.CheckSpec(spec, sink)
	if err != nil {
		return nil, err
	}
	if err := t.CheckEnv(spec); err != nil {
		return nil, err
	}
	if spec.AllowedTools != nil && !t.agent.Descriptor.HonorsAllowed {
		return nil, messages.FieldError(messages.OpStart, "allowedTools",
			"backend %s cannot honour allowedTools: its posture is the boundary", t.agent.Descriptor.ID)
	}
	if spec.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, messages.FieldError(messages.OpStart, "cwd", "no working directory given and none known")
		}
		spec.Cwd = wd
	}
	if fi, err := os.Stat(spec.Cwd); err != nil || !fi.IsDir() {
		return nil, messages.FieldError(messages.OpStart, "cwd", "%q is not a directory", spec.Cwd)
	}
	bin, err := t.Binary(spec.Env)
	if err != nil {
		return nil, messages.Wrap(messages.CodeUnsupported, messages.OpStart, err, err.Error())
	}
	if spec.Home != "" {
		if err := os.MkdirAll(spec.Home, 0o700); err != nil {
			return nil, messages.Wrap(messages.CodeInvalid, messages.OpStart, err, "cannot create the session's HOME "+spec.Home)
		}
	}
	warm, refill, ok := t.adoptWarm(ctx, spec, sink, bin)
	if ok {
		t.launchedAs(spec.SessionID, warm)
		refillAfterFirstTurn(warm, refill)
		return warm, nil
	}
	s, err := newSession(t, spec, sink, bin)
	if err != nil {
		return nil, err
	}
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	t.launchedAs(spec.SessionID, s)
	refillAfterFirstTurn(s, refill)
	return s, nil
}

// envPolicy is the agent's environment policy of a session: the proc
// allowlist and the agent's documented variables (Agent.Documented, less
// Agent.Scrub). Vendors' credentials and base URLs are never taken from
// the daemon's environment: a session gets the ones its spec names.
func (t *Transport) envPolicy(spec transports.SessionSpec) prockit.EnvPolicy {
	return prockit.EnvPolicy{Backend: t.agent.Descriptor.ID, Documented: t.agent.Documented, Pass: spec.PassEnv, Scrub: t.agent.Scrub}
}

// CheckEnv refuses a start when founder credentials are in the daemon's
// environment and not named for this backend (proc.EnvPolicy.Check).
func (t *Transport) CheckEnv(spec transports.SessionSpec) error {
	return transports.CredentialRefusal(t.envPolicy(spec).Check(os.Environ(), append(append([]string{}, t.env...), spec.Env...)))
}

// buildEnv is a process environment (proc.EnvPolicy.Environ): the
// allowlist of base and the agent's documented variables; HOME; then
// extra (the agent's and the transport's), then the session's, which win.
func (t *Transport) buildEnv(base []string, spec transports.SessionSpec, extra []string) []string {
	return t.envPolicy(spec).Environ(base, spec.Home, extra, spec.Env)
}

// packageVersion finds the agent's package.json in the directories above
// the binary's real path and returns its version, if the binary is an
// executable file of that package.
func (t *Transport) packageVersion(bin string) (string, bool) {
	if t.agent.Package == "" {
		return "", false
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return "", false
	}
	if fi, err := os.Stat(real); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", false
	}
	dir := filepath.Dir(real)
	for i := 0; i < 4; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err == nil {
			var pkg struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			}
			if json.Unmarshal(b, &pkg) == nil && pkg.Name == t.agent.Package && pkg.Version != "" {
				return pkg.Version, true
			}
		}
		dir = filepath.Dir(dir)
	}
	return "", false
}
