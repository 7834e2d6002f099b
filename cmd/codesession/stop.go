package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// stopCmd releases a session with an optional verdict; it is idempotent.
type stopCmd struct {
	client clientFlags
	sid    string
	op     messages.Stop
	json   bool
}

type stopFlags struct {
	client        clientFlags
	outcome, note string
	json          bool
}

func (f *stopFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("stop")
	fs.StringVar(&f.outcome, "outcome", "", "your verdict: success, partial, failed or aborted (default: inferred)")
	fs.StringVar(&f.note, "note", "", "a note for the learning record")
	fs.BoolVar(&f.json, "json", false, "print the stop result as one JSON object")
	f.client.add(fs)
	return fs
}

func stopCommand() command {
	return command{
		name:    "stop",
		summary: "stop a session with an optional verdict (--outcome, --note)",
		usage:   "stop [flags] SESSION",
		flags:   func() *pflag.FlagSet { return (&stopFlags{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseStopFlags(args) },
	}
}

func parseStopFlags(args []string) (*stopCmd, error) {
	const cmd = "stop"
	var f stopFlags
	sid, err := parseSessionFlags(cmd, f.flagSet(), args)
	if err != nil {
		return nil, err
	}
	c := &stopCmd{client: f.client, json: f.json, sid: sid}
	c.op = messages.Stop{SessionID: c.sid, Outcome: messages.Outcome(f.outcome), Note: f.note}
	check := c.op
	check.SessionID = placeholderSessionID // SESSION may be a prefix; sessionArg checked it
	if err := check.Validate(); err != nil {
		return nil, &usageError{cmd: cmd, err: err}
	}
	return c, nil
}

func (c *stopCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "stop"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	var res messages.StopResult
	body := map[string]any{}
	if c.op.Outcome != "" {
		body["outcome"] = c.op.Outcome
	}
	if c.op.Note != "" {
		body["note"] = c.op.Note
	}
	if err := dc.do(ctx, "POST", "/api/code-sessions/"+c.sid+"/stop", body, &res); err != nil {
		return remoteErr(cmd, "stop", err)
	}
	if c.json {
		return writeJSON(s.stdout, res)
	}
	p := &textPrinter{w: s.stdout}
	var v struct {
		Record messages.SessionRecord `json:"record"`
	}
	if dc.do(ctx, "GET", "/api/code-sessions/"+c.sid+"?limit=1", nil, &v) == nil {
		p.wt = v.Record.Worktree // where the work is, said at stop
	}
	p.stopped(c.sid, res)
	return nil
}
