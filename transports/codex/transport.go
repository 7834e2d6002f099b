package codex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
	"github.com/codesession/codesession/transports/warmpool"
)

// EnvBinary names the codex executable when no WithBinary option is given
// (CI sets it to the pinned install); else `codex` is looked up on PATH.
const EnvBinary = "CODESESSION_CODEX_BIN"

// Environment a session's spec (or WithEnv) may carry to point Codex at a
// model server: the Responses base URL (e.g. modelmock's URL plus "/v1")
// and the key sent as its bearer token. Without a base URL Codex uses its
// built-in OpenAI provider.
const (
	EnvBaseURL = "OPENAI_BASE_URL"
	EnvAPIKey  = "OPENAI_API_KEY"
)

// Defaults of the options.
const (
	DefaultOutputCap      = cli.DefaultOutputCap
	DefaultLineCap        = cli.DefaultLineCap
	DefaultControlTimeout = time.Minute
	DefaultStartTimeout   = 2 * time.Minute
	DefaultProbeTimeout   = 10 * time.Second
)

// DefaultInterruptDeadlines: after turn/interrupt the turn gets Grace to
// end; then the process group gets SIGINT, SIGTERM after AfterINT, and
// SIGKILL after AfterTERM (the next turn starts a new app-server on the
// thread).
var DefaultInterruptDeadlines = cli.InterruptDeadlines{Grace: 10 * time.Second, AfterINT: time.Second, AfterTERM: time.Second}

// Transport is the codex backend on the CLI kit (transports/cli). It is
// safe for concurrent use; each Open starts an independent app-server.
type Transport struct {
	cli.Base
	*warmpool.Slot[warmKey, *warmProc]          // the warm pool (pool.go)
	homeRoot                           string   // WithHomeRoot
	swept                              sync.Map // the folders of pooled CODEX_HOMEs swept once (sweepWarmHomes)
}

var _ transports.Transport = (*Transport)(nil)

// Option configures a Transport: the kit's options codex takes, and
// WithHomeRoot.
type Option func(*Transport)

// kitOption is the kit's option o as codex's.
func kitOption[A any](o func(A) cli.Option) func(A) Option {
	return func(a A) Option { return func(t *Transport) { o(a)(&t.Cfg) } }
}

// The kit's options (transports/cli): WithControlTimeout bounds each
// request after the handshake (turn/start, turn/steer, turn/interrupt),
// WithStartTimeout the handshake (initialize, thread/start or
// thread/resume).
var (
	WithBinary             = kitOption(cli.WithBinary)
	WithOutputCap          = kitOption(cli.WithOutputCap)
	WithLineCap            = kitOption(cli.WithLineCap)
	WithControlTimeout     = kitOption(cli.WithControlTimeout)
	WithStartTimeout       = kitOption(cli.WithStartTimeout)
	WithInterruptDeadlines = kitOption(cli.WithInterruptDeadlines)
)

// WithEnv adds KEY=VALUE entries to every session's environment, below
// SessionSpec.Env.
func WithEnv(kv ...string) Option { return func(t *Transport) { cli.WithEnv(kv...)(&t.Cfg) } }

// WithWarmPool keeps n initialized app-servers per key ready for the next
// start (0, the default of New, disables the pool). The runtime sets it
// from its config (warmPool).
func WithWarmPool(n int) Option { return func(t *Transport) { t.SetWarmPool(n) } }

// WithHomeRoot keeps the per-session CODEX_HOME folders of sessions opened
// without SessionSpec.Home under dir (default: the user cache folder's
// codesession/codex-homes).
func WithHomeRoot(dir string) Option { return func(t *Transport) { t.homeRoot = dir } }

// New returns the codex transport.
func New(opts ...Option) *Transport {
	t := &Transport{Slot: newWarmSlot()}
	t.Base = cli.NewBase(cli.Config{
		CLI:       subprocess.CLI{Name: "codex", Command: "codex", EnvVar: EnvBinary, Install: "npm install @openai/codex@" + PinnedVersion},
		OutputCap: DefaultOutputCap, LineCap: DefaultLineCap, ControlTimeout: DefaultControlTimeout,
		StartTimeout: DefaultStartTimeout, Deadlines: DefaultInterruptDeadlines, Policy: envPolicy,
		// "codex-cli 0.169.0"; no credentials check: Codex reports those
		// at the first turn
		Probe: subprocess.VersionProbe{Timeout: DefaultProbeTimeout, Parse: subprocess.LastField},
	}, descriptor, t.Slot, nil)
	for _, o := range opts {
		o(t)
	}
	return t
}

// LaunchArgv is the argv a new session's process starts with (the launch
// manifest records it): the app-server, configured by its session's
// CODEX_HOME config.toml, not by flags.
func (t *Transport) LaunchArgv(spec transports.SessionSpec) []string {
	bin, err := t.Binary(spec.Env)
	if err != nil {
		bin = "codex"
	}
	return []string{bin, "app-server"}
}

// Open writes the session's CODEX_HOME (unless the spec's environment
// names one), starts `codex app-server` (or adopts a warm pool's
// initialized one, see pool.go), completes initialize and thread/start
// (thread/resume with SessionSpec.ResumeExternalID), and
// emits EvStarted (turn 0) with the thread id as the external session id.
// Errors are *messages.Error: invalid for a bad spec, unsupported when the
// CLI is missing, internal or timeout (with the end of its stderr) when it
// fails.
func (t *Transport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	spec, pr, err := t.Cfg.Prepare(spec, sink)
	if err != nil {
		return nil, err
	}
	if spec.AllowedTools != nil {
		return nil, messages.FieldError(messages.OpStart, "allowedTools", "codex cannot honour allowedTools: its sandbox and approval policy are the only boundary")
	}
	spec = t.confineHome(spec)
	if err := cli.MakeHome(spec); err != nil {
		return nil, err
	}
	s, refill, warm := t.adoptWarm(ctx, spec, sink, pr)
	if !warm {
		if s, err = t.openCold(ctx, spec, sink, pr); err != nil {
			return nil, err
		}
	}
	s.RefillAfterFirstTurn(refill)
	return s, nil
}

// openCold opens a session on an app-server of its own.
func (t *Transport) openCold(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, pr cli.Prepared) (*Session, error) {
	home, fresh, err := t.prepareHome(spec)
	if err != nil {
		return nil, err
	}
	s := newSession(t, spec, sink, pr.Bin, home, pr.Workspace)
	s.freshHome = fresh
	if err := s.start(ctx); err != nil {
		s.Discard()
		return nil, err
	}
	s.Begin()
	return s, nil
}

// prepareHome decides the session's CODEX_HOME and writes its config.toml,
// and returns it, and the CODEX_HOME again when this call made it under
// the home root (else ""): the session removes that one
// when it closes without ever having had a thread (a failed Open leaves
// nothing behind). A CODEX_HOME with a thread stays: resuming the session
// (thread/resume) and attaching to it (`codex resume`) read the thread
// from it.
func (t *Transport) prepareHome(spec transports.SessionSpec) (home, fresh string, err error) {
	home, own := t.codexHome(spec)
	if !own && spec.Home == "" {
		if _, err := os.Stat(home); errors.Is(err, fs.ErrNotExist) {
			fresh = home
		}
	}
	if !own {
		if err := writeConfig(home, spec, t.Cfg.Env); err != nil {
			_ = removeFresh(fresh)
			return "", "", err
		}
	}
	return home, fresh, nil
}

// DefaultHomeRoot is where sessions' own CODEX_HOME folders go unless
// WithHomeRoot says otherwise: the user cache folder's
// codesession/codex-homes, one folder per session id (prune removes those
// of the sessions it removes).
func DefaultHomeRoot() string {
	c, err := os.UserCacheDir()
	if err != nil {
		c = os.TempDir()
	}
	return filepath.Join(c, "codesession", "codex-homes")
}

// codexHome is where a session's CODEX_HOME is: the user's own (own) when
// the environment names one, else <SessionSpec.Home>/.codex, else a
// folder named after the session id under the home root (a made-up name
// for a spec without an id).
func (t *Transport) codexHome(spec transports.SessionSpec) (home string, own bool) {
	if home := subprocess.EnvValue(append(append([]string(nil), t.Cfg.Env...), spec.Env...), "CODEX_HOME"); home != "" {
		return home, true
	}
	if spec.Home != "" {
		return filepath.Join(spec.Home, ".codex"), false
	}
	root := t.homeRoot
	if root == "" {
		root = DefaultHomeRoot()
	}
	id := spec.SessionID
	if id == "" {
		id = "session-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return filepath.Join(root, filepath.Base(id)), false
}

// AttachEnv is what `codex resume` needs besides HOME to find the
// session's thread: its CODEX_HOME (the user's own when the environment
// names one, else the session's folder, as Open decides it). Without it
// codex answers "no rollout found for thread id".
func (t *Transport) AttachEnv(spec transports.SessionSpec) []string {
	home, _ := t.codexHome(spec)
	return []string{"CODEX_HOME=" + home}
}

// confineHome lets the session's processes write their CODEX_HOME: the
// user's own, or the folder the per-session homes are made in (a warm
// process's home is renamed into it when a session adopts it).
func (t *Transport) confineHome(spec transports.SessionSpec) transports.SessionSpec {
	home, own := t.codexHome(spec)
	if !own {
		home = filepath.Dir(home)
		_ = os.MkdirAll(home, 0o700) // Landlock rules need the folder to exist
	}
	spec.Confine = spec.Confine.WithWritable(home)
	return spec
}

// removeFresh removes a CODEX_HOME prepareHome made ("" is none).
func removeFresh(home string) error {
	if home == "" {
		return nil
	}
	return os.RemoveAll(home)
}

// configTOML is the session's config.toml: the
// model provider (a Responses endpoint when baseURL is set), model,
// effort, sandbox and approval policy, and trust for the working directory.
func configTOML(spec transports.SessionSpec, baseURL string) string {
	pc, _ := PostureOf(spec.Posture)
	var b strings.Builder
	kv := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, strconv.Quote(v)) }
	b.WriteString("# written by codesession for one session; edits are overwritten when it starts again\n")
	if spec.Model != "" {
		kv("model", spec.Model)
	}
	if e, ok := effortMap[spec.Effort]; ok {
		kv("model_reasoning_effort", e)
	}
	// the approval policy rides on thread/start and turn/start only: this
	// Codex refuses some values in config.toml that it accepts there
	kv("sandbox_mode", pc.Sandbox)
	if baseURL != "" {
		kv("model_provider", "codesession")
		b.WriteString("\n[model_providers.codesession]\n")
		kv("name", "codesession ("+baseURL+")")
		kv("base_url", baseURL)
		kv("wire_api", "responses")
		kv("env_key", EnvAPIKey)
		if loopback(baseURL) {
			// a scripted local server: a retry only repeats the script
			b.WriteString("request_max_retries = 0\nstream_max_retries = 0\n")
		}
	}
	if spec.Cwd != "" {
		fmt.Fprintf(&b, "\n[projects.%s]\n", strconv.Quote(spec.Cwd))
		kv("trust_level", "trusted")
	}
	return b.String()
}

func loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "127.0.0.1" || h == "localhost" || h == "::1"
}

// documentedEnv are Codex's own variables (its OpenAI endpoint and key,
// its settings and logging), taken from the daemon's environment; every
// other variable but the proc allowlist stays out.
var documentedEnv = []string{"OPENAI_*", "CODEX_*", "RUST_LOG"}

// envPolicy is the codex environment policy of a session. CODEX_HOME of
// the daemon never passes: the runtime sets it per session.
func envPolicy(spec transports.SessionSpec) prockit.EnvPolicy {
	return prockit.EnvPolicy{Backend: ID, Documented: documentedEnv, Pass: spec.PassEnv, Scrub: []string{"CODEX_HOME"}}
}

// environ is the process environment of a session whose CODEX_HOME is
// codexHome (proc.EnvPolicy.Environ): the allowlist of the daemon's and
// codex's documented variables; HOME when the spec sets one; CODEX_HOME;
// then the transport's and the session's extra entries, which win.
func (t *Transport) environ(spec transports.SessionSpec, codexHome string) []string {
	c := t.Cfg
	c.HostDefaults = []string{"CODEX_HOME=" + codexHome}
	return c.Environ(os.Environ(), spec)
}
