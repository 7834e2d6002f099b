package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// startCmd starts a session in the daemon and returns at once: the
// session's first turn runs there, read it with `read`.
type startCmd struct {
	client clientFlags
	start  messages.Start
	json   bool
}

type startFlags struct {
	client                      clientFlags
	backend, cwd, model, effort string
	posture, maxPosture         string
	maxRounds                   int
	maxCostUSD                  float64
	network                     string
	allowedTools, tags          []string
	appendSystemPrompt          string
	json                        bool
	isolate                     string
	exclusive                   bool
}

func (f *startFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("start")
	fs.StringVar(&f.backend, "backend", "", "backend id (default: the daemon's defaultBackend); see 'codesession backends'")
	fs.StringVar(&f.cwd, "cwd", "", "the session's working directory on the daemon's machine (default: the current directory)")
	fs.StringVar(&f.posture, "posture", "", "initial posture: plan, default, acceptEdits or full")
	fs.StringVar(&f.maxPosture, "max-posture", "", "posture ceiling for the session's whole life")
	fs.StringVar(&f.model, "model", "", "the agent's model (a concrete name, or cheap, standard or frontier)")
	fs.StringVar(&f.effort, "effort", "", "reasoning effort: low, medium, high or max")
	fs.IntVar(&f.maxRounds, "max-rounds", 0, "at most this many turns (default: the daemon's)")
	addBudgetFlag(fs, &f.maxCostUSD)
	addNetworkFlag(fs, &f.network)
	fs.StringArrayVar(&f.allowedTools, "allowed-tool", nil, "a tool the agent may use (repeatable; default: the backend's own set)")
	fs.StringArrayVar(&f.tags, "tag", nil, "a task tag for the learning record (repeatable)")
	fs.StringVar(&f.appendSystemPrompt, "append-system-prompt", "", "text appended to the agent's system prompt")
	addIsolationFlags(fs, &f.isolate, &f.exclusive)
	fs.BoolVar(&f.json, "json", false, "print the start result as one JSON object")
	f.client.add(fs)
	return fs
}

func startCommand() command {
	return command{
		name:    "start",
		summary: "start a session in the daemon from a brief (then: read, answer, guide, stop)",
		usage:   "start [flags] BRIEF",
		flags:   func() *pflag.FlagSet { return (&startFlags{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseStartFlags(args) },
	}
}

func parseStartFlags(args []string) (*startCmd, error) {
	const cmd = "start"
	var f startFlags
	fs := f.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		return nil, usagef(cmd, "want one BRIEF argument, got %d: quote the brief", fs.NArg())
	}
	c := &startCmd{client: f.client, json: f.json}
	c.start = messages.Start{Brief: fs.Arg(0), Backend: f.backend, Cwd: f.cwd, Model: f.model, MaxRounds: f.maxRounds, MaxCostUSD: f.maxCostUSD,
		AllowedTools: f.allowedTools, TaskTags: f.tags, AppendSystemPrompt: f.appendSystemPrompt,
		Isolate: f.isolate, Exclusive: f.exclusive, Network: f.network}
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
	c.start.Effort = messages.Effort(f.effort)
	if err := c.start.Validate(); err != nil {
		return nil, &usageError{cmd: cmd, err: err}
	}
	return c, nil
}

func (c *startCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "start"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	op := c.start
	if op.Cwd, err = workDir(cmd, op.Cwd); err != nil {
		return err
	}
	var st messages.StartResult
	if err := dc.do(ctx, "POST", "/api/code-sessions", op, &st); err != nil {
		return remoteErr(cmd, "start", err)
	}
	for _, w := range st.Warnings {
		fmt.Fprintf(s.stderr, "codesession start: warning: %s\n", w)
	}
	if c.json {
		return writeJSON(s.stdout, st)
	}
	fmt.Fprintf(s.stdout, "session %s started\n", st.SessionID)
	fmt.Fprintf(s.stdout, "  backend   %s\n", st.Backend)
	fmt.Fprintf(s.stdout, "  posture   %s (ceiling %s)\n", st.Posture, st.MaxPosture)
	rounds := "unlimited"
	if st.MaxRounds > 0 {
		rounds = fmt.Sprint(st.MaxRounds)
	}
	fmt.Fprintf(s.stdout, "  rounds    at most %s%s\n", rounds, budgetText(st.MaxCostUSD))
	if st.Model != "" || st.Effort != "" {
		fmt.Fprintf(s.stdout, "  model     %s %s\n", orDash(st.Model), st.Effort)
	}
	writeWorktree(s.stdout, st.Worktree)
	fmt.Fprintf(s.stdout, "next: codesession read %s\n", st.SessionID)
	return nil
}
