package droid

import (
	"cmp"
	"context"
	"os"
	"slices"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/gate"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
	"github.com/codesession/codesession/transports/warmpool"
)

// EnvBinary names the droid executable when no WithBinary option is given
// (CI sets it to the pinned install); else `droid` is looked up on PATH.
const EnvBinary = "CODESESSION_DROID_BIN"

// Defaults of the options.
const (
	DefaultOutputCap      = 64 << 10
	DefaultLineCap        = 16 << 20
	DefaultControlTimeout = 30 * time.Second
	DefaultStartTimeout   = 2 * time.Minute
	DefaultProbeTimeout   = time.Minute // a backstop: droid --version took 13-21 s on a loaded 2-core machine; callers bound it tighter
)

// DefaultInterruptDeadlines: after droid.interrupt_session the turn gets
// Grace to end; then the process group gets SIGINT, SIGTERM after
// AfterINT, and SIGKILL after AfterTERM.
var DefaultInterruptDeadlines = InterruptDeadlines{Grace: 10 * time.Second, AfterINT: 3 * time.Second, AfterTERM: 3 * time.Second}

// InterruptDeadlines are the escalation steps of an interrupt.
type InterruptDeadlines struct {
	Grace, AfterINT, AfterTERM time.Duration
}

// Transport is the droid backend. It is safe for concurrent use; each
// Open starts an independent process.
type Transport struct {
	binary                             string
	outputCap                          int
	lineCap                            int
	controlTimeout                     time.Duration
	startTimeout                       time.Duration
	deadlines                          InterruptDeadlines
	env                                []string
	*warmpool.Slot[warmKey, *warmProc] // the warm pool (pool.go)
}

var (
	_ transports.Transport  = (*Transport)(nil)
	_ transports.WarmPooler = (*Transport)(nil)
)

// Option configures a Transport.
type Option func(*Transport)

// WithBinary runs this droid executable.
func WithBinary(path string) Option { return func(t *Transport) { t.binary = path } }

// WithOutputCap caps each tool result's output at n bytes.
func WithOutputCap(n int) Option {
	return func(t *Transport) { subprocess.Positive(&t.outputCap, n) }
}

// WithLineCap caps one stdout line at n bytes: a longer line is dropped
// and reported as an EvError.
func WithLineCap(n int) Option {
	return func(t *Transport) { subprocess.Positive(&t.lineCap, n) }
}

// WithControlTimeout bounds each request of the host after the handshake
// (settings, interrupt).
func WithControlTimeout(d time.Duration) Option {
	return func(t *Transport) { subprocess.Positive(&t.controlTimeout, d) }
}

// WithStartTimeout bounds the handshake in Open (initialize or load).
func WithStartTimeout(d time.Duration) Option {
	return func(t *Transport) { subprocess.Positive(&t.startTimeout, d) }
}

// WithInterruptDeadlines sets the interrupt escalation steps.
func WithInterruptDeadlines(d InterruptDeadlines) Option {
	return func(t *Transport) { t.deadlines = d }
}

// WithEnv adds KEY=VALUE entries to every session's environment, below
// SessionSpec.Env.
func WithEnv(kv ...string) Option { return func(t *Transport) { t.env = append(t.env, kv...) } }

// New returns the droid transport.
func New(opts ...Option) *Transport {
	t := &Transport{outputCap: DefaultOutputCap, lineCap: DefaultLineCap, controlTimeout: DefaultControlTimeout,
		startTimeout: DefaultStartTimeout, deadlines: DefaultInterruptDeadlines}
	t.Slot = newWarmSlot()
	for _, o := range opts {
		o(t)
	}
	return t
}

// Descriptor returns the capability descriptor.
func (t *Transport) Descriptor() transports.Descriptor { return descriptor() }

// Binary returns the droid executable the transport would run with the
// given extra environment, or an error saying why there is none.
func (t *Transport) Binary(env []string) (string, error) { return cli.Find(t.binary, env) }

var cli = subprocess.CLI{Name: "droid", Command: "droid", EnvVar: EnvBinary, Install: "npm install droid@" + PinnedVersion}

// Probe runs `droid --version`, bounded by ctx and DefaultProbeTimeout. It
// needs no login (a bring-your-own-key model needs none at all).
func (t *Transport) Probe(ctx context.Context) messages.Availability {
	bin, err := t.Binary(nil)
	return subprocess.VersionProbe{Timeout: DefaultProbeTimeout, Parse: subprocess.FirstField}.Availability(ctx, bin, err)
}

// Open starts one droid process for the session, completes the handshake
// (droid.initialize_session with a fresh UUID, or droid.load_session of
// SessionSpec.ResumeExternalID), applies posture and effort with
// droid.update_session_settings and emits EvStarted (turn 0). With a warm
// pool (WithWarmPool, SetWarmPool) it adopts a pooled process of the same
// key instead of booting one (see pool.go). It fails
// with a *messages.Error: invalid for a bad spec (an explicit
// AllowedTools included: droid has no per-tool allow-list), unsupported
// when the CLI is missing, internal or timeout when droid exits or does
// not answer.
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
			"droid has no per-tool allow-list (its autonomy level is the boundary); start without allowedTools")
	}
	var ws *gate.Workspace
	if spec.Cwd != "" {
		w, err := gate.NewWorkspace(spec.Cwd)
		if err != nil {
			return nil, messages.FieldError(messages.OpStart, "cwd", "%v", err)
		}
		ws = &w
	}
	bin, err := t.Binary(spec.Env)
	if err != nil {
		return nil, messages.Wrap(messages.CodeUnsupported, messages.OpStart, err, err.Error())
	}
	if p := spec.Provision; p != nil && p.Home != "" {
		// the plan's HOME (its .factory/mcp.json and skills), with the
		// user's own ~/.factory linked in (actors/curation laid it out)
		user := cmp.Or(subprocess.EnvValue(spec.Env, "HOME"), subprocess.EnvValue(t.env, "HOME"), spec.Home, os.Getenv("HOME"))
		if err := transports.OverlayHome(p.Home, user, ".factory"); err != nil {
			return nil, messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot lay out the session's provisioned HOME")
		}
		spec.Home, spec.Env = p.Home, append(slices.Clone(spec.Env), "HOME="+p.Home) // the last HOME wins
	}
	if spec.Home != "" {
		if err := os.MkdirAll(spec.Home, 0o700); err != nil {
			return nil, messages.Wrap(messages.CodeInvalid, messages.OpStart, err, "cannot create the session's HOME "+spec.Home)
		}
	}
	warm, refill, ok := t.adoptWarm(ctx, spec, sink, bin, ws)
	if ok {
		refillAfterFirstTurn(warm, refill)
		return warm, nil
	}
	ext := spec.ResumeExternalID
	if ext == "" {
		ext = transports.NewUUID()
	}
	s := newSession(t, spec, sink, bin, ext, ws)
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	refillAfterFirstTurn(s, refill)
	return s, nil
}

// LaunchArgv is the argv a new session's process starts with (the launch
// manifest records it); its settings go over JSON-RPC, not flags.
func (t *Transport) LaunchArgv(spec transports.SessionSpec) []string {
	bin, err := t.Binary(spec.Env)
	if err != nil {
		bin = "droid"
	}
	return append([]string{bin}, buildArgs()...)
}

// buildArgs is the argv after the binary. Model, autonomy and effort are
// session settings over JSON-RPC, not flags (droid's --help: "CLI flags do
// not configure JSON-RPC sessions").
func buildArgs() []string {
	return []string{"exec", "--input-format", "stream-jsonrpc", "--output-format", "stream-jsonrpc"}
}

// documentedEnv are droid's own variables (FACTORY_API_KEY and its
// settings), taken from the daemon's environment.
var documentedEnv = []string{"FACTORY_*", "DROID_*"}

// envPolicy is the droid environment policy of a session.
func envPolicy(spec transports.SessionSpec) prockit.EnvPolicy {
	return prockit.EnvPolicy{Backend: ID, Documented: documentedEnv, Pass: spec.PassEnv}
}

// CheckEnv refuses a start when founder credentials are in the daemon's
// environment and not named for this backend (proc.EnvPolicy.Check).
func (t *Transport) CheckEnv(spec transports.SessionSpec) error {
	return transports.CredentialRefusal(envPolicy(spec).Check(os.Environ(), append(append([]string{}, t.env...), spec.Env...)))
}

// buildEnv is the process environment (proc.EnvPolicy.Environ): the
// allowlist of base and droid's documented variables; HOME; then the
// transport's and the session's extra entries, which win.
func buildEnv(base []string, spec transports.SessionSpec, extra []string) []string {
	return envPolicy(spec).Environ(base, spec.Home, extra, spec.Env)
}
