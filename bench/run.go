package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
)

// Suite names, in the order `codesession bench` runs them.
const (
	SuiteSessions = "sessions"
	SuiteStore    = "store"
	SuiteRouting  = "routing"
	SuiteFeed     = "feed"
	SuiteNative   = "native"
	SuiteHooks    = "hooks"
)

// Suites lists every suite, in run order.
func Suites() []string {
	return []string{SuiteSessions, SuiteStore, SuiteRouting, SuiteFeed, SuiteNative, SuiteHooks, SuiteCluster}
}

// Defaults of Options.
const (
	DefaultSessions        = 1000
	DefaultTurns           = 3
	DefaultEvents          = 20
	DefaultSubscribers     = 1000
	DefaultRate            = 100
	DefaultFeedEvents      = 1500
	DefaultSlowSubscribers = 2
	DefaultNativeTurns     = 20
	DefaultDiffFiles       = 10_000
	DefaultStoreSessions   = 100
	DefaultStoreAppends    = 200
	DefaultRoutingReads    = 2000

	// MinEvents is the fewest backend events a scripted turn can have:
	// a tool call that asks (tool_use, clarification, tool_result), a
	// text (three deltas and the whole text) and turn_end.
	MinEvents = 8
)

// DefaultConcurrency is the native suite's default ladder.
var DefaultConcurrency = []int{1, 4, 16, 64}

// Options size the suites; zero values take the defaults.
type Options struct {
	// Sessions is how many sessions the sessions suite runs at once.
	Sessions int
	// Turns is how many turns each of them runs.
	Turns int
	// Events is how many events the scripted backend emits per turn (at
	// least MinEvents).
	Events int

	// Subscribers is how many SSE subscribers keep up with the feed;
	// SlowSubscribers more never read until the feed is over (negative:
	// none). Rate is the target events per second and FeedEvents how many
	// are published.
	Subscribers     int
	SlowSubscribers int
	Rate            float64
	FeedEvents      int
	// FeedCurve, when set, has the feed suite measure both fan-outs again
	// at each of these subscriber counts (none slow, a third of the
	// events): latency as subscribers grow.
	FeedCurve []int
	// SubscribersInProcess runs the feed's subscribers as goroutines of
	// this process, beside the server, instead of in a child process (the
	// default): their reads then queue behind the server's writes in one
	// Go scheduler.
	SubscribersInProcess bool

	// StoreSessions session logs each take StoreAppends appends in the
	// store suite.
	StoreSessions int
	StoreAppends  int

	// RoutingReads is how many buffered read-turns the routing suite times.
	RoutingReads int

	// Concurrency is the native suite's ladder of concurrent sessions;
	// NativeTurns the turns each session runs.
	Concurrency []int
	NativeTurns int

	// DiffFiles is the size of the repository the diff capture hook
	// generates.
	DiffFiles int
	// FirstTurnRounds is how many times the firstturn suite measures each
	// figure on each side (DefaultFirstTurnRounds when 0).
	FirstTurnRounds int
	// ClaudeBin is the pinned claude binary for the claude-code hook
	// (`codesession bench` passes $CODESESSION_CLAUDE_BIN); empty skips
	// the hook.
	ClaudeBin string

	// Home is where the suites put their stores and scratch directories,
	// each in a directory of its own that is removed afterwards (default:
	// the system's temporary directory).
	Home string
	// Keep leaves the scratch directories in place.
	Keep bool

	// Store opens the store of a suite's runtime in dir (default
	// filestore.Open). The log checks read the logs back through a second
	// store opened the same way, after the runtime closed the first.
	Store func(dir string) (store.Store, error)
	// WrapHandler, when set, wraps the control plane's handler in the feed
	// suite (a proxy, or a fault to show that the feed's checks fail).
	WrapHandler func(http.Handler) http.Handler

	// TurnsProfile, when set, receives a CPU profile of the sessions
	// suite's turns phase alone (every session live, until the last stop),
	// so a before/after profile holds no setup, start or read-back; in
	// the native suite, of its last rung's turns (no bare baseline, no
	// read-back). A writer takes one profile: the first suite run that
	// takes it (pprof writes one profile per start and stop).
	TurnsProfile io.Writer
	// TurnsTrace, when set, receives a Go execution trace of the same
	// turns (go tool trace reads it): where the goroutines block and for
	// how long, which a CPU profile cannot say. As with TurnsProfile, a
	// writer takes one trace: the first suite run that takes it.
	TurnsTrace io.Writer

	// Progress receives a line per phase (nil: none).
	Progress io.Writer
	// Logger is the runtimes' logger (default: warnings and errors to
	// Progress, or nothing).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Sessions, DefaultSessions)
	def(&o.Turns, DefaultTurns)
	def(&o.Events, DefaultEvents)
	def(&o.Subscribers, DefaultSubscribers)
	def(&o.FeedEvents, DefaultFeedEvents)
	def(&o.StoreSessions, DefaultStoreSessions)
	def(&o.StoreAppends, DefaultStoreAppends)
	def(&o.RoutingReads, DefaultRoutingReads)
	def(&o.NativeTurns, DefaultNativeTurns)
	def(&o.DiffFiles, DefaultDiffFiles)
	switch {
	case o.SlowSubscribers == 0:
		o.SlowSubscribers = DefaultSlowSubscribers
	case o.SlowSubscribers < 0:
		o.SlowSubscribers = 0
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Store == nil {
		o.Store = func(dir string) (store.Store, error) { return filestore.Open(dir) }
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(o.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return o
}

// Validate reports options no suite can run with.
func (o Options) Validate() error {
	var bad []string
	if o.Events > 0 && o.Events < MinEvents {
		bad = append(bad, fmt.Sprintf("events: %d is fewer than the %d a scripted turn needs", o.Events, MinEvents))
	}
	for _, c := range o.FeedCurve {
		if c <= 0 {
			bad = append(bad, fmt.Sprintf("curve: %d is not a positive number of subscribers", c))
		}
	}
	for _, c := range o.Concurrency {
		if c <= 0 {
			bad = append(bad, fmt.Sprintf("concurrency: %d is not a positive number of sessions", c))
		}
	}
	if o.Sessions < 0 || o.Turns < 0 || o.Subscribers < 0 || o.FeedEvents < 0 || o.Rate < 0 {
		bad = append(bad, "sizes must not be negative")
	}
	if len(bad) > 0 {
		return fmt.Errorf("bench: %s", strings.Join(bad, "; "))
	}
	return nil
}

// suiteFuncs maps a suite name to its runner.
var suiteFuncs = map[string]func(ctx context.Context, o Options, dir string) (*Result, error){
	SuiteSessions: runSessions,
	SuiteStore:    runStore,
	SuiteRouting:  runRouting,
	SuiteFeed:     runFeed,
	SuiteNative:   runNative,
	SuiteHooks:    runHooks,
	SuiteCluster:  runCluster,
}

// Known reports whether name is a suite.
func Known(name string) bool {
	_, ok := suiteFuncs[name]
	return ok
}

// Run runs one suite. A correctness failure is in the result (Passed is
// false), not the error; the error means the suite could not run at all
// (a scratch directory that cannot be made, a cancelled context).
func Run(ctx context.Context, name string, o Options) (*Result, error) {
	f, ok := suiteFuncs[name]
	if !ok {
		return nil, fmt.Errorf("bench: unknown suite %q (want one of %s)", name, strings.Join(Suites(), ", "))
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if o.Home != "" {
		if err := os.MkdirAll(o.Home, 0o700); err != nil {
			return nil, fmt.Errorf("bench: home: %w", err)
		}
	}
	dir, err := os.MkdirTemp(o.Home, "codesession-bench-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("bench: scratch directory: %w", err)
	}
	if !o.Keep {
		defer os.RemoveAll(dir)
	}
	start := time.Now()
	res, err := f(ctx, o, dir)
	if res != nil {
		res.ElapsedSeconds = time.Since(start).Seconds()
		if o.Keep {
			res.note("scratch kept in %s", dir)
		}
	}
	return res, err
}

// progress writes a line per phase to o.Progress.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	suite string
	t0    time.Time
}

func newProgress(o Options, suite string) *progress {
	return &progress{w: o.Progress, suite: suite, t0: time.Now()}
}

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "bench %s [%6.1fs] %s\n", p.suite, time.Since(p.t0).Seconds(), fmt.Sprintf(format, args...))
}
