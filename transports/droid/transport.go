package droid

import (
	"cmp"
	"context"
	"os"
	"slices"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
	"github.com/codesession/codesession/transports/warmpool"
)

// Defaults of the options.
const (
	DefaultOutputCap      = cli.DefaultOutputCap
	DefaultLineCap        = cli.DefaultLineCap
	DefaultControlTimeout = 30 * time.Second
	DefaultStartTimeout   = 2 * time.Minute
	DefaultProbeTimeout   = time.Minute // a backstop: droid --version took 13-21 s on a loaded 2-core machine; callers bound it tighter
)

// DefaultInterruptDeadlines: after droid.interrupt_session the turn gets
// Grace to end; then the process group gets SIGINT, SIGTERM after
// AfterINT, and SIGKILL after AfterTERM.
var DefaultInterruptDeadlines = cli.InterruptDeadlines{Grace: 10 * time.Second, AfterINT: 3 * time.Second, AfterTERM: 3 * time.Second}

// Transport is the droid backend on the CLI kit (transports/cli). It is
// safe for concurrent use; each Open starts an independent process.
type Transport struct {
	cli.Base
	*warmpool.Slot[warmKey, *warmProc] // the warm pool (pool.go)
}

// Option configures a Transport: the kit's options, of which droid takes
// WithBinary, WithEnv, WithOutputCap, WithLineCap, WithControlTimeout
// (each request after the handshake: settings, interrupt),
// WithStartTimeout (initialize or load), WithInterruptDeadlines and
// WithWarmPool.
type Option = cli.Option

// The options droid takes, as the kit defines them.
var (
	WithBinary, WithEnv, WithWarmPool    = cli.WithBinary, cli.WithEnv, cli.WithWarmPool
	WithOutputCap, WithLineCap           = cli.WithOutputCap, cli.WithLineCap
	WithControlTimeout, WithStartTimeout = cli.WithControlTimeout, cli.WithStartTimeout
	WithInterruptDeadlines               = cli.WithInterruptDeadlines
)

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
	spec, pr, err := t.Cfg.Prepare(spec, sink)
	if err != nil {
		return nil, err
	}
	if spec.AllowedTools != nil {
		return nil, messages.FieldError(messages.OpStart, "allowedTools",
			"droid has no per-tool allow-list (its autonomy level is the boundary); start without allowedTools")
	}
	if p := spec.Provision; p != nil && p.Home != "" {
		// the plan's HOME (its .factory/mcp.json and skills), with the
		// user's own ~/.factory linked in (actors/curation laid it out)
		user := cmp.Or(subprocess.EnvValue(spec.Env, "HOME"), subprocess.EnvValue(t.Cfg.Env, "HOME"), spec.Home, os.Getenv("HOME"))
		if err := transports.OverlayHome(p.Home, user, ".factory"); err != nil {
			return nil, messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot lay out the session's provisioned HOME")
		}
		spec.Home, spec.Env = p.Home, append(slices.Clone(spec.Env), "HOME="+p.Home) // the last HOME wins
	}
	if err := cli.MakeHome(spec); err != nil {
		return nil, err
	}
	warm, refill, ok := t.adoptWarm(ctx, spec, sink, pr.Bin, pr.Workspace)
	if ok {
		warm.s.RefillAfterFirstTurn(refill)
		return warm.s, nil
	}
	s := newSession(t, spec, sink, pr.Bin, cmp.Or(spec.ResumeExternalID, transports.NewUUID()), pr.Workspace)
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	s.RefillAfterFirstTurn(refill)
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

// New returns the droid transport.
func New(opts ...Option) *Transport {
	t := &Transport{Slot: newWarmSlot()}
	t.Base = cli.NewBase(cli.Config{
		CLI:       subprocess.CLI{Name: "droid", Command: "droid", EnvVar: EnvBinary, Install: "npm install droid@" + PinnedVersion},
		OutputCap: DefaultOutputCap, LineCap: DefaultLineCap, ControlTimeout: DefaultControlTimeout,
		StartTimeout: DefaultStartTimeout, Deadlines: DefaultInterruptDeadlines, Policy: envPolicy,
		// it needs no login (a bring-your-own-key model needs none at all)
		Probe: subprocess.VersionProbe{Timeout: DefaultProbeTimeout, Parse: subprocess.FirstField},
	}, descriptor, t.Slot, opts)
	return t
}
