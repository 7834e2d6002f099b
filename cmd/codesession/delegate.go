package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/controlplane"
	drv "github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/messages"
)

// delegateCmd dispatches a driver persona in the daemon (seed 000 §2): the
// persona runs as the in-process loop whose only tool is the op tool,
// under a scope of its own whose constraints are its frontmatter's,
// narrowed by these flags.
type delegateCmd struct {
	client     clientFlags
	agent      string
	backend    string
	maxPosture string
	maxRounds  int
	tools      []string
	supervised bool
	askHuman   bool
	cwd        string
	wait       bool
	json       bool
	brief      string
}

func (c *delegateCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("delegate")
	fs.StringVar(&c.agent, "agent", drv.DefaultPersona, "the driver persona: <home>/agents/NAME.md, else the packaged one")
	fs.StringVar(&c.backend, "backend", "", "pin the driven backend (must agree with the persona's pin)")
	fs.StringVar(&c.maxPosture, "max-posture", "", "narrow the persona's posture ceiling (above it is refused)")
	fs.IntVar(&c.maxRounds, "max-rounds", 0, "narrow the persona's round budget per session")
	fs.StringSliceVar(&c.tools, "allowed-tools", nil, "the driven sessions' tools (comma-separated)")
	fs.BoolVar(&c.supervised, "supervised", false, "pin the driven backend to native (the in-process loop)")
	fs.BoolVar(&c.askHuman, "ask-human", false, "hand every clarification of the driven sessions to you (codesession answer), not to the driver")
	fs.StringVar(&c.cwd, "cwd", "", "the repository the driver's sessions work in (default: the current directory)")
	fs.BoolVar(&c.wait, "wait", false, "wait until the driver settles and print its report (exit 1 unless it is done)")
	fs.BoolVar(&c.json, "json", false, "print the delegation record as one JSON object")
	c.client.add(fs)
	return fs
}

func delegateCommand() command {
	return command{
		name:    "delegate",
		summary: "dispatch a driver persona that drives coding agents to an honest verdict",
		usage:   "delegate [--agent NAME] [--backend B] [--max-posture P] [--supervised] [--wait] BRIEF",
		flags:   func() *pflag.FlagSet { return (&delegateCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseDelegateFlags(args) },
	}
}

func parseDelegateFlags(args []string) (*delegateCmd, error) {
	const cmd = "delegate"
	c := &delegateCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() == 0 {
		return nil, usagef(cmd, "want a BRIEF: what the driver should get done")
	}
	c.brief = strings.Join(fs.Args(), " ")
	if len(c.brief) > messages.MaxBriefBytes {
		return nil, usagef(cmd, "the brief is longer than %d bytes", messages.MaxBriefBytes)
	}
	if !drv.ValidName(c.agent) {
		return nil, usagef(cmd, "--agent %q is not a persona name", c.agent)
	}
	if c.maxPosture != "" && !messages.Posture(c.maxPosture).Valid() {
		return nil, usagef(cmd, "--max-posture %q is not a posture (plan, default, acceptEdits, full)", c.maxPosture)
	}
	if c.maxRounds < 0 {
		return nil, usagef(cmd, "--max-rounds must not be negative")
	}
	if c.cwd == "" {
		c.cwd = "."
	}
	abs, err := filepath.Abs(c.cwd)
	if err != nil {
		return nil, usagef(cmd, "--cwd %q is not a usable path", c.cwd)
	}
	c.cwd = abs
	return c, nil
}

func (c *delegateCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "delegate"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	body := map[string]any{"brief": c.brief, "agent": c.agent, "cwd": c.cwd, "supervised": c.supervised, "askHuman": c.askHuman}
	if c.backend != "" {
		body["backend"] = c.backend
	}
	if c.maxPosture != "" {
		body["maxPosture"] = c.maxPosture
	}
	if c.maxRounds > 0 {
		body["maxRounds"] = c.maxRounds
	}
	if c.tools != nil {
		body["allowedTools"] = c.tools
	}
	var rec drv.Record
	if err := dc.do(ctx, "POST", "/api/delegations", body, &rec); err != nil {
		return remoteErr(cmd, "delegate", err)
	}
	if !c.wait {
		if c.json {
			return writeJSON(s.stdout, rec)
		}
		fmt.Fprintf(s.stdout, "delegation %s running (%s, ceiling %s)\n", rec.ID, rec.Agent, orDash(string(rec.Constraints.MaxPosture)))
		fmt.Fprintf(s.stdout, "next: codesession delegations %s\n", rec.ID)
		return nil
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var view controlplane.DelegationView
	for {
		if err := dc.do(ctx, "GET", "/api/delegations/"+rec.ID, nil, &view); err != nil {
			return remoteErr(cmd, "delegation", err)
		}
		if !view.Delegation.State.Live() {
			break
		}
		select {
		case <-ctx.Done():
			return rejected(cmd, fmt.Errorf("stopped waiting: delegation %s still runs", rec.ID))
		case <-tick.C:
		}
	}
	if c.json {
		if err := writeJSON(s.stdout, view); err != nil {
			return err
		}
	} else {
		printDelegation(s, view)
	}
	if view.Delegation.State != drv.StateDone {
		return &failedError{reason: fmt.Sprintf("delegation %s %s: %s", rec.ID, view.Delegation.State, view.Delegation.Error)}
	}
	return nil
}

// printDelegation writes one delegation and the sessions it drove.
func printDelegation(s *streams, v controlplane.DelegationView) {
	d := v.Delegation
	fmt.Fprintf(s.stdout, "delegation %s: %s (%s, %s)\n", d.ID, d.State, d.Agent, d.Source)
	c := d.Constraints
	fmt.Fprintf(s.stdout, "  policy: backend %s, ceiling %s, rounds %s\n", orDash(c.Backend), orDash(string(c.MaxPosture)), orDash(roundsText(c.MaxRounds)))
	if d.ResumeOf != "" {
		fmt.Fprintf(s.stdout, "  resumes %s\n", d.ResumeOf)
	}
	for _, r := range v.Sessions {
		verdict := string(d.Verdicts[r.SessionID])
		fmt.Fprintf(s.stdout, "  session %s  %s  %s  rounds %d  verdict %s\n", r.SessionID, r.BackendID, r.Status, r.RoundsElapsed, orDash(verdict))
	}
	if d.Question != nil {
		fmt.Fprintf(s.stdout, "  waiting for you: %s asks to run %s (%s)\n", d.Question.SessionID, d.Question.ToolName, d.Question.ClarificationID)
	}
	if d.Report != "" {
		fmt.Fprintf(s.stdout, "  report: %s\n", d.Report)
	}
	if d.Error != "" {
		fmt.Fprintf(s.stdout, "  error: %s\n", d.Error)
	}
}

func roundsText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}
