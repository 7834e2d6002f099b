package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/bench"
	"github.com/codesession/codesession/transports/claudecode"
)

// benchCmd runs benchmark suites and prints their tables (or JSON). It
// fails (exit 1) only when a correctness check fails or a suite cannot
// run; a slow machine never fails it.
type benchCmd struct {
	suites []string
	opts   bench.Options
	json   bool
	// cpuProfile, when set, is where a CPU profile of the whole run goes
	// (what the runtime's own goroutines spend beside the CLIs it drives).
	cpuProfile string
	// turnsProfile, when set, is where a CPU profile of the sessions
	// suite's turns phase alone goes (no setup, starts or read-back), or of
	// the native suite's last rung's turns
	turnsProfile string
	// turnsTrace, when set, is where an execution trace of the same
	// turns phase goes (what the goroutines wait on, and how long)
	turnsTrace string
	// tune, when set (tests), adjusts the options after the flags.
	tune func(*bench.Options)
}

type benchFlags struct {
	sessions, turns, nativeTurns, events, subscribers, slow int
	rounds                                                  int
	rate                                                    float64
	concurrency                                             []int
	curve                                                   []int
	json, keep, quiet, inProcess                            bool
	home, cpuProfile, turnsProfile, turnsTrace              string
}

func (f *benchFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("bench")
	fs.IntVar(&f.sessions, "sessions", bench.DefaultSessions, "sessions: how many concurrent sessions")
	fs.IntVar(&f.turns, "turns", bench.DefaultTurns, "sessions: turns per session")
	fs.IntVar(&f.nativeTurns, "native-turns", bench.DefaultNativeTurns, "native: turns per session (more samples a run; the conversation, and the model server's share of a turn, grows with them)")
	fs.IntVar(&f.events, "events", bench.DefaultEvents, fmt.Sprintf("sessions: backend events per turn (at least %d)", bench.MinEvents))
	fs.IntVar(&f.subscribers, "subscribers", bench.DefaultSubscribers, "feed: SSE subscribers that keep up")
	fs.IntVar(&f.slow, "slow-subscribers", bench.DefaultSlowSubscribers, "feed: deliberately slow subscribers (0: none)")
	fs.IntVar(&f.rounds, "rounds", bench.DefaultFirstTurnRounds, "firstturn: rounds of each figure (more rounds steady the ratios)")
	fs.Float64Var(&f.rate, "rate", bench.DefaultRate, "feed: target events per second")
	fs.IntSliceVar(&f.concurrency, "concurrency", bench.DefaultConcurrency, "native: the ladder of concurrent sessions")
	fs.IntSliceVar(&f.curve, "curve", nil, "feed: also measure both fan-outs at each of these subscriber counts (e.g. 100,500,1000,2000)")
	fs.BoolVar(&f.inProcess, "subscribers-in-process", false, "feed: run the subscribers in this process beside the server, not in a child process")
	fs.BoolVar(&f.json, "json", false, "print the report as one JSON object")
	fs.StringVar(&f.home, "home", "", "where the suites make their scratch stores and repositories (default: the system's temporary directory)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	fs.StringVar(&f.turnsProfile, "turns-profile", "", "sessions: write a CPU profile of the turns phase alone to this file; native: of the last rung's turns (not with --cpuprofile)")
	fs.StringVar(&f.turnsTrace, "turns-trace", "", "sessions: write a Go execution trace of the turns phase to this file; native: of the last rung's turns (go tool trace reads it: what the goroutines wait on)")
	fs.BoolVar(&f.keep, "keep", false, "keep the scratch directories")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines on stderr")
	return fs
}

func benchCommand() command {
	return command{
		name:    "bench",
		summary: "run the benchmark suites: figures next to same-run baselines, and correctness checks",
		usage:   "bench [sessions|store|routing|feed|native|hooks ...] [--sessions N] [--turns K] [--events M] [--subscribers S] [--rounds R] [--json] [--home DIR] [--cpuprofile FILE | --turns-profile FILE]",
		flags:   func() *pflag.FlagSet { return (&benchFlags{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseBenchFlags(args) },
	}
}

func parseBenchFlags(args []string) (*benchCmd, error) {
	var f benchFlags
	fs := f.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	c := &benchCmd{json: f.json, suites: fs.Args(), cpuProfile: f.cpuProfile, turnsProfile: f.turnsProfile, turnsTrace: f.turnsTrace}
	if c.cpuProfile != "" && c.turnsProfile != "" {
		return nil, &usageError{cmd: "bench", err: errors.New("--cpuprofile and --turns-profile cannot both be set: the runtime takes one CPU profile at a time")}
	}
	if len(c.suites) == 0 {
		c.suites = bench.Suites()
	}
	for _, s := range c.suites {
		if !bench.Known(s) {
			return nil, usagef("bench", "unknown suite %q (want some of: %v)", s, bench.Suites())
		}
	}
	for name, v := range map[string]int{"sessions": f.sessions, "turns": f.turns, "native-turns": f.nativeTurns, "events": f.events, "subscribers": f.subscribers, "rounds": f.rounds} {
		if v <= 0 {
			return nil, usagef("bench", "--%s must be at least 1, got %d", name, v)
		}
	}
	if f.slow < 0 {
		return nil, usagef("bench", "--slow-subscribers must not be negative, got %d", f.slow)
	}
	if f.rate <= 0 {
		return nil, usagef("bench", "--rate must be above 0, got %v", f.rate)
	}
	slow := f.slow
	if slow == 0 {
		slow = -1 // bench.Options: negative is none
	}
	c.opts = bench.Options{Sessions: f.sessions, Turns: f.turns, NativeTurns: f.nativeTurns, Events: f.events, Subscribers: f.subscribers,
		SlowSubscribers: slow, Rate: f.rate, Concurrency: f.concurrency, FeedCurve: f.curve, SubscribersInProcess: f.inProcess, Home: f.home, Keep: f.keep, FirstTurnRounds: f.rounds}
	if f.quiet {
		c.tune = func(o *bench.Options) { o.Progress = nil }
	}
	if err := c.opts.Validate(); err != nil {
		return nil, &usageError{cmd: "bench", err: err}
	}
	return c, nil
}

func (c *benchCmd) exec(ctx context.Context, s *streams) error {
	o := c.opts
	o.Progress = s.stderr
	o.ClaudeBin = s.getenv(claudecode.EnvBinary)
	if c.tune != nil {
		c.tune(&o)
	}
	if c.cpuProfile != "" {
		stopProfile, err := startCPUProfile(c.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	if c.turnsProfile != "" {
		f, err := os.Create(c.turnsProfile)
		if err != nil {
			return fmt.Errorf("turns profile: %w", err)
		}
		defer f.Close()
		o.TurnsProfile = f
	}
	if c.turnsTrace != "" {
		f, err := os.Create(c.turnsTrace)
		if err != nil {
			return fmt.Errorf("turns trace: %w", err)
		}
		defer f.Close()
		o.TurnsTrace = f
	}
	started := time.Now()
	var results []*bench.Result
	for _, name := range c.suites {
		r, err := bench.Run(ctx, name, o)
		if err != nil {
			return fmt.Errorf("suite %s could not run: %w", name, err)
		}
		results = append(results, r)
	}
	rep := bench.NewReport(started, results)
	if c.turnsProfile != "" {
		// the sessions or native suite takes it; say so when nothing was written
		// rather than leave an empty file to puzzle pprof
		if fi, err := os.Stat(c.turnsProfile); err == nil && fi.Size() == 0 {
			defer fmt.Fprintf(s.stderr, "turns profile: nothing written to %s (it needs the sessions or native suite, and no other CPU profile running)\n", c.turnsProfile)
		}
	}
	var err error
	if c.json {
		err = rep.WriteJSON(s.stdout)
	} else {
		err = rep.WriteText(s.stdout)
	}
	if err != nil {
		return err
	}
	if !rep.Passed {
		var fails []string
		for _, r := range results {
			fails = append(fails, r.Failures()...)
		}
		return &failedError{reason: fmt.Sprintf("a correctness check failed: %v", fails)}
	}
	return nil
}

// startCPUProfile starts writing a CPU profile to path; the returned func
// stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
