package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/messages"
)

// runCmd starts a session from a brief in the embedded runtime, drives it
// (answering clarifications, sending queued guidance after each completed
// turn) and stops it with the inferred verdict.
type runCmd struct {
	cfg     configFlags
	start   messages.Start // Brief, Backend, Cwd (default: the current directory), postures, Model, Effort, MaxRounds
	json    bool
	answer  answerPolicy
	guides  []string
	timeout time.Duration // per read-turn
}

// runFlags are run's flags before they are checked.
type runFlags struct {
	cfg                         configFlags
	env                         []string
	backend, cwd, model, effort string
	posture, maxPosture         string
	maxRounds                   int
	maxCostUSD                  float64
	network                     string
	json                        bool
	answer                      string
	guides                      []string
	timeout                     time.Duration
	isolate                     string
	exclusive                   bool
}

func (f *runFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("run")
	fs.StringVar(&f.backend, "backend", "", "backend id (default: the config's defaultBackend); see 'codesession backends'")
	fs.StringVar(&f.cwd, "cwd", "", "the session's working directory (default: the current directory)")
	fs.StringVar(&f.posture, "posture", "", "initial posture: plan, default, acceptEdits or full (default: the config's)")
	fs.StringVar(&f.maxPosture, "max-posture", "", "posture ceiling for the session (default: the config's)")
	fs.StringVar(&f.model, "model", "", "the agent's model (a concrete name, or cheap, standard or frontier)")
	fs.StringVar(&f.effort, "effort", "", "reasoning effort: low, medium, high or max")
	fs.IntVar(&f.maxRounds, "max-rounds", 0, "at most this many turns (default: the config's defaultMaxRounds)")
	addBudgetFlag(fs, &f.maxCostUSD)
	addNetworkFlag(fs, &f.network)
	addIsolationFlags(fs, &f.isolate, &f.exclusive)
	addEnv(fs, &f.env)
	f.cfg.addHome(fs)
	fs.BoolVar(&f.json, "json", false, "print one JSON object per line: each read-turn result, then the stopped line")
	fs.StringVar(&f.answer, "answer", string(answerDeny), "answer permission questions: allow (once), deny, or ask at the terminal")
	fs.StringArrayVar(&f.guides, "guide", nil, "guidance for a follow-up turn, sent after each completed turn in order (repeatable)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "how long to wait for each read-turn result")
	f.cfg.addConfig(fs)
	f.cfg.addVerbose(fs)
	return fs
}

func runCommand() command {
	return command{
		name:    "run",
		summary: "start a session from a brief, drive it to the end and stop it with a verdict",
		usage:   "run [flags] BRIEF",
		flags:   func() *pflag.FlagSet { return (&runFlags{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseRunFlags(args) },
	}
}

// parseRunFlags checks run's command line; it touches nothing else.
func parseRunFlags(args []string) (*runCmd, error) {
	const cmd = "run"
	var f runFlags
	fs := f.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 0:
		return nil, usagef(cmd, "missing BRIEF: say what the agent should do, e.g. codesession run \"add a test for Greet\"")
	case 1:
	default:
		return nil, usagef(cmd, "want one BRIEF argument, got %d: quote the brief", fs.NArg())
	}
	c := &runCmd{cfg: f.cfg, json: f.json, guides: f.guides, timeout: f.timeout}
	c.start = messages.Start{Brief: fs.Arg(0), Backend: f.backend, Cwd: f.cwd, Model: f.model, MaxRounds: f.maxRounds, MaxCostUSD: f.maxCostUSD,
		Isolate: f.isolate, Exclusive: f.exclusive, Network: f.network}
	if err := checkIsolate(cmd, f.isolate); err != nil {
		return nil, err
	}
	if err := checkNetwork(cmd, f.network); err != nil {
		return nil, err
	}
	if strings.TrimSpace(c.start.Brief) == "" {
		return nil, usagef(cmd, "the BRIEF is empty")
	}
	var err error
	if f.posture != "" {
		if c.start.InitialPosture, err = messages.ParsePosture(f.posture); err != nil {
			return nil, usagef(cmd, "--posture: %v", err)
		}
	}
	if f.maxPosture != "" {
		if c.start.MaxPosture, err = messages.ParsePosture(f.maxPosture); err != nil {
			return nil, usagef(cmd, "--max-posture: %v", err)
		}
	}
	if f.effort != "" {
		c.start.Effort = messages.Effort(f.effort)
		if !c.start.Effort.Valid() {
			return nil, usagef(cmd, "--effort: unknown effort %q (want low, medium, high or max)", f.effort)
		}
	}
	if f.maxRounds < 0 {
		return nil, usagef(cmd, "--max-rounds must not be negative")
	}
	if f.maxCostUSD < 0 || math.IsNaN(f.maxCostUSD) || math.IsInf(f.maxCostUSD, 0) {
		return nil, usagef(cmd, "--max-cost-usd must be a finite, non-negative amount")
	}
	if f.timeout <= 0 {
		return nil, usagef(cmd, "--timeout must be positive")
	}
	var ok bool
	if c.answer, ok = parseAnswerPolicy(f.answer); !ok {
		return nil, usagef(cmd, "--answer: want allow, deny or ask, got %q", f.answer)
	}
	for i, g := range f.guides {
		if strings.TrimSpace(g) == "" {
			return nil, usagef(cmd, "--guide #%d is empty", i+1)
		}
	}
	if c.cfg.env, err = parseEnv(cmd, f.env); err != nil {
		return nil, err
	}
	if err := c.start.Validate(); err != nil {
		return nil, &usageError{cmd: cmd, err: err}
	}
	return c, nil
}

func (c *runCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "run"
	cfg, err := c.cfg.load(cmd, s.getenv)
	if err != nil {
		return err
	}
	log := c.cfg.cliLogger(cfg, s.stderr)
	op := c.start
	if op.Cwd, err = workDir(cmd, op.Cwd); err != nil {
		return err
	}
	cfg.WarmPool = 0 // one session per process: a warm pool would boot a CLI only to kill it
	var live *liveText
	opts := []actors.Option{actors.WithLogger(log)}
	if !c.json {
		live = newLiveText(s.stdout)
		defer live.close()
		opts = append(opts, actors.WithEventListener(live.listen))
	}
	rt, err := actors.New(cfg, opts...)
	if err != nil {
		return fmt.Errorf("start the runtime: %w", err)
	}
	defer closeRuntime(ctx, s, rt)
	_, err = runSession(ctx, s, rt, cmd, op, sessionOpts{live: live, json: c.json, policy: c.answer, guides: c.guides, readTimeout: c.timeout})
	return err
}

// workDir resolves a session's working directory (default: the current
// one) to an absolute path and checks that it is a directory.
func workDir(cmd, dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("the current directory: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", usagef(cmd, "--cwd %q: %v", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", usagef(cmd, "--cwd %q: %v", dir, err)
	}
	if !fi.IsDir() {
		return "", usagef(cmd, "--cwd %q is not a directory", dir)
	}
	return abs, nil
}
