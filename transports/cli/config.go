package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/gate"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
)

// Defaults every kit backend has taken so far.
const (
	DefaultOutputCap = 64 << 10 // a tool result's output
	DefaultLineCap   = 16 << 20 // one stdout line
)

// InterruptDeadlines are the escalation steps of an interrupt: after the
// interrupt request the turn gets Grace to end; then the process group
// gets SIGINT, SIGTERM after AfterINT, and SIGKILL after AfterTERM.
type InterruptDeadlines struct {
	Grace, AfterINT, AfterTERM time.Duration
}

// Config is what every kit transport is configured with: the backend sets
// the defaults and its fixed parts (CLI, Policy, HostDefaults, the probe),
// the Options the rest.
type Config struct {
	// CLI names the executable and how to install it.
	CLI subprocess.CLI
	// Binary is an explicit executable (WithBinary).
	Binary string
	// OutputCap caps each tool result's output (reported with Truncated
	// and OriginalBytes when it fires).
	OutputCap int
	// LineCap caps one stdout line: a longer one is dropped and reported
	// as an EvError; the stream goes on.
	LineCap int
	// ControlTimeout bounds each request of the host after the handshake.
	ControlTimeout time.Duration
	// StartTimeout bounds the handshake.
	StartTimeout time.Duration
	// Settle is the delay after which a core's Settle asks are answered.
	Settle time.Duration
	// Deadlines are the interrupt's escalation steps.
	Deadlines InterruptDeadlines
	// Env are extra KEY=VALUE entries of every session, below
	// SessionSpec.Env.
	Env []string
	// Booting holds a slot per CLI between spawn and the end of its
	// handshake (nil: no bound).
	Booting chan struct{}
	// Trace sees, after the sink returned, every event a stdout line
	// caused, with the time the line was read (tests, benchmarks).
	Trace func(readAt time.Time, ev messages.Event)
	// Policy is the backend's environment policy of a session.
	Policy func(spec transports.SessionSpec) prockit.EnvPolicy
	// HostDefaults are entries every process gets, below Env.
	HostDefaults []string
	// Probe asks the CLI for its version (its Env is built by Probe).
	Probe subprocess.VersionProbe

	warmPool int
	warmSet  bool
}

// Option configures a kit transport.
type Option func(*Config)

// WithBinary runs this executable.
func WithBinary(path string) Option { return func(c *Config) { c.Binary = path } }

// WithOutputCap caps each tool result's output at n bytes.
func WithOutputCap(n int) Option { return func(c *Config) { subprocess.Positive(&c.OutputCap, n) } }

// WithLineCap caps one stdout line at n bytes.
func WithLineCap(n int) Option { return func(c *Config) { subprocess.Positive(&c.LineCap, n) } }

// WithControlTimeout bounds each request of the host after the handshake.
func WithControlTimeout(d time.Duration) Option {
	return func(c *Config) { subprocess.Positive(&c.ControlTimeout, d) }
}

// WithStartTimeout bounds the handshake in Open.
func WithStartTimeout(d time.Duration) Option {
	return func(c *Config) { subprocess.Positive(&c.StartTimeout, d) }
}

// WithInterruptDeadlines sets the interrupt escalation steps.
func WithInterruptDeadlines(d InterruptDeadlines) Option { return func(c *Config) { c.Deadlines = d } }

// WithEnv adds KEY=VALUE entries to every session's environment, below
// SessionSpec.Env.
func WithEnv(kv ...string) Option { return func(c *Config) { c.Env = append(c.Env, kv...) } }

// WithMaxBooting bounds how many CLIs are in their handshake at once;
// Open waits for a slot, bounded by its context only.
func WithMaxBooting(n int) Option {
	return func(c *Config) {
		if n > 0 {
			c.Booting = make(chan struct{}, n)
		}
	}
}

// WithWarmPool keeps n initialized processes per key ready for the next
// start (0, the default, disables the pool). The runtime sets it from its
// config (warmPool).
func WithWarmPool(n int) Option { return func(c *Config) { c.warmPool, c.warmSet = n, true } }

// Apply runs opts on c and returns the warm pool size they set, if any.
func (c *Config) Apply(opts []Option) (warm int, set bool) {
	for _, o := range opts {
		o(c)
	}
	return c.warmPool, c.warmSet
}

// Find returns the executable the transport would run with the given extra
// environment, or an error saying why there is none.
func (c *Config) Find(env []string) (string, error) { return c.CLI.Find(c.Binary, env) }

// Environ is a session's process environment: the policy's allowlist of
// base, HOME, the host defaults, then Env and the session's entries, which
// win.
func (c *Config) Environ(base []string, spec transports.SessionSpec) []string {
	return c.Policy(spec).Environ(base, spec.Home, c.HostDefaults, c.Env, spec.Env)
}

// CheckEnv refuses a start when founder credentials are in the daemon's
// environment and not named for this backend (proc.EnvPolicy.Check).
func (c *Config) CheckEnv(spec transports.SessionSpec) error {
	return transports.CredentialRefusal(c.Policy(spec).Check(os.Environ(), append(append([]string{}, c.Env...), spec.Env...)))
}

// Availability runs the version probe with the environment a session gets,
// bounded by ctx and the probe's timeout.
func (c *Config) Availability(ctx context.Context) messages.Availability {
	bin, err := c.Find(nil)
	p := c.Probe
	p.Env = c.Environ(os.Environ(), transports.SessionSpec{})
	return p.Availability(ctx, bin, err)
}

// Prepared is what Prepare found: the executable and the workspace gate.
type Prepared struct {
	Bin string
	// Workspace is the gate of SessionSpec.Cwd (nil when the spec has none).
	Workspace *gate.Workspace
}

// Prepare makes the checks and the preparations every Open makes: the
// spec (transports.CheckSpec), the environment policy, cwd as a
// workspace, the executable, and HOME created. It returns spec with its
// posture defaulted.
func (c *Config) Prepare(spec transports.SessionSpec, sink transports.Sink) (transports.SessionSpec, Prepared, error) {
	var pr Prepared
	spec, err := transports.CheckSpec(spec, sink)
	if err != nil {
		return spec, pr, err
	}
	if err := c.CheckEnv(spec); err != nil {
		return spec, pr, err
	}
	if spec.Cwd != "" {
		w, err := gate.NewWorkspace(spec.Cwd)
		if err != nil {
			return spec, pr, messages.FieldError(messages.OpStart, "cwd", "%v", err)
		}
		pr.Workspace = &w
	}
	if pr.Bin, err = c.Find(spec.Env); err != nil {
		return spec, pr, messages.Wrap(messages.CodeUnsupported, messages.OpStart, err, err.Error())
	}
	return spec, pr, nil
}

// MakeHome creates the session's HOME when it names one.
func MakeHome(spec transports.SessionSpec) error {
	if spec.Home == "" {
		return nil
	}
	if err := os.MkdirAll(spec.Home, 0o700); err != nil {
		return messages.Wrap(messages.CodeInvalid, messages.OpStart, err, "cannot create the session's HOME "+spec.Home)
	}
	return nil
}

// Boot waits for a boot slot (bounded by ctx) and returns its release.
func (c *Config) Boot(ctx context.Context) (release func(), err error) {
	if c.Booting == nil {
		return func() {}, nil
	}
	select {
	case c.Booting <- struct{}{}:
		return func() { <-c.Booting }, nil
	case <-ctx.Done():
		return nil, &messages.Error{Code: messages.CodeTimeout, Op: messages.OpStart, Retryable: true, Err: ctx.Err(),
			Message: fmt.Sprintf("%d %s processes were still starting when the caller's deadline passed", cap(c.Booting), c.CLI.Name)}
	}
}
