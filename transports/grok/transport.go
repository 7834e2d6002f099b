package grok

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
)

// EnvBinary names the grok executable when no WithBinary option is given;
// else `grok` is looked up on PATH.
const EnvBinary = "CODESESSION_GROK_BIN"

// Defaults of the options.
const (
	DefaultLineCap      = 16 << 20
	DefaultOutputCap    = 32 << 20 // a turn's whole stdout
	DefaultProbeTimeout = 15 * time.Second
)

// DefaultInterruptDeadlines: an interrupt sends SIGINT to the turn's
// process group at once, SIGTERM after AfterINT and SIGKILL after
// AfterTERM.
var DefaultInterruptDeadlines = InterruptDeadlines{AfterINT: 3 * time.Second, AfterTERM: 3 * time.Second}

// InterruptDeadlines are the escalation steps of an interrupt.
type InterruptDeadlines struct {
	AfterINT, AfterTERM time.Duration
}

// Transport is the grok backend. It is safe for concurrent use.
type Transport struct {
	binary    string
	lineCap   int
	outputCap int
	deadlines InterruptDeadlines
	env       []string
}

var _ transports.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*Transport)

// WithBinary runs this grok executable.
func WithBinary(path string) Option { return func(t *Transport) { t.binary = path } }

// WithLineCap caps one stdout line at n bytes: a longer line is dropped
// and reported as an EvError.
func WithLineCap(n int) Option {
	return func(t *Transport) { subprocess.Positive(&t.lineCap, n) }
}

// WithOutputCap caps a turn's whole stdout at n bytes.
func WithOutputCap(n int) Option {
	return func(t *Transport) { subprocess.Positive(&t.outputCap, n) }
}

// WithInterruptDeadlines sets the interrupt escalation steps.
func WithInterruptDeadlines(d InterruptDeadlines) Option {
	return func(t *Transport) { t.deadlines = d }
}

// WithEnv adds KEY=VALUE entries to every turn's environment, below
// SessionSpec.Env.
func WithEnv(kv ...string) Option { return func(t *Transport) { t.env = append(t.env, kv...) } }

// New returns the grok transport.
func New(opts ...Option) *Transport {
	t := &Transport{lineCap: DefaultLineCap, outputCap: DefaultOutputCap, deadlines: DefaultInterruptDeadlines}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Descriptor returns the capability descriptor.
func (t *Transport) Descriptor() transports.Descriptor { return descriptor() }

// Binary returns the grok executable, or an error saying why there is none.
func (t *Transport) Binary(env []string) (string, error) { return cli.Find(t.binary, env) }

var cli = subprocess.CLI{Name: "grok", Command: "grok", EnvVar: EnvBinary,
	Install: "x.ai's installer: curl -fsSL https://x.ai/cli/install.sh | bash"}

// Probe runs `grok --version` (it needs no login, seed 003).
func (t *Transport) Probe(ctx context.Context) messages.Availability {
	bin, err := t.Binary(nil)
	probe := subprocess.VersionProbe{Timeout: DefaultProbeTimeout, Env: buildEnv(os.Environ(), transports.SessionSpec{}, t.env), Parse: parseVersion}
	return probe.Availability(ctx, bin, err)
}

// parseVersion reads "grok 0.2.93 (f00f96316d)": the first word that
// starts with a digit, else the first word.
func parseVersion(out string) string {
	f := strings.Fields(out)
	for _, w := range f {
		if w[0] >= '0' && w[0] <= '9' {
			return w
		}
	}
	return subprocess.FirstField(out)
}

// Open checks the spec and the binary and emits EvStarted (turn 0) with
// the session's UUID; no process runs until the first turn. It fails with
// a *messages.Error: invalid for a bad spec (an explicit AllowedTools
// included: --tools crashes grok's session creation), unsupported when the
// CLI is missing.
func (t *Transport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	spec, err := transports.CheckSpec(spec, sink)
	if err != nil {
		return nil, err
	}
	if err := t.CheckEnv(spec); err != nil {
		return nil, err
	}
	if spec.AllowedTools != nil {
		return nil, messages.FieldError(messages.OpStart, "allowedTools",
			"grok cannot honour allowedTools: its --tools flag crashes session creation (grok %s); start without allowedTools", DocumentedVersion)
	}
	if spec.Cwd != "" {
		if fi, err := os.Stat(spec.Cwd); err != nil || !fi.IsDir() {
			return nil, messages.FieldError(messages.OpStart, "cwd", "%q is not a directory", spec.Cwd)
		}
	}
	bin, err := t.Binary(spec.Env)
	if err != nil {
		return nil, messages.Wrap(messages.CodeUnsupported, messages.OpStart, err, err.Error())
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		return nil, messages.Errorf(messages.CodeUnsupported, messages.OpStart, "the grok executable %s is not there", bin)
	}
	if spec.Home != "" {
		if err := os.MkdirAll(spec.Home, 0o700); err != nil {
			return nil, messages.Wrap(messages.CodeInvalid, messages.OpStart, err, "cannot create the session's HOME "+spec.Home)
		}
	}
	ext, created := spec.ResumeExternalID, spec.ResumeExternalID != ""
	if ext == "" {
		ext = transports.NewUUID()
	}
	s := &session{t: t, spec: spec, sink: sink, bin: bin, ext: ext, created: created, posture: spec.Posture}
	sink(0, messages.Event{Type: messages.EvStarted, ExternalSessionID: ext, Model: spec.Model})
	return s, nil
}

// BuildArgs is a turn's argv after the binary: the session pinned with -s
// on its first turn and --resume after; --tools is never passed.
func BuildArgs(spec transports.SessionSpec, posture messages.Posture, ext string, resume bool, input string) []string {
	args := []string{"-p", input, "--output-format", "json", "--permission-mode", PermissionMode(posture)}
	if spec.Model != "" {
		args = append(args, "-m", spec.Model)
	}
	if e := ReasoningEffort(spec.Effort); e != "" {
		args = append(args, "--reasoning-effort", e)
	}
	if resume {
		args = append(args, "--resume", ext)
	} else {
		args = append(args, "-s", ext)
	}
	return args
}

// documentedEnv are grok's own variables (XAI_API_KEY, its settings),
// taken from the daemon's environment.
var documentedEnv = []string{"XAI_*", "GROK_*"}

// envPolicy is the grok environment policy of a session.
func envPolicy(spec transports.SessionSpec) proc.EnvPolicy {
	return proc.EnvPolicy{Backend: ID, Documented: documentedEnv, Pass: spec.PassEnv}
}

// CheckEnv refuses a start when founder credentials are in the daemon's
// environment and not named for this backend (proc.EnvPolicy.Check).
func (t *Transport) CheckEnv(spec transports.SessionSpec) error {
	return transports.CredentialRefusal(envPolicy(spec).Check(os.Environ(), append(append([]string{}, t.env...), spec.Env...)))
}

// buildEnv is a turn's environment (proc.EnvPolicy.Environ): the
// allowlist of base and grok's documented variables, HOME, then the extra
// entries, which win.
func buildEnv(base []string, spec transports.SessionSpec, extra []string) []string {
	return envPolicy(spec).Environ(base, spec.Home, extra, spec.Env)
}
