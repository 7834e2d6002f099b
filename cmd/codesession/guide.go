package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// guideCmd sends the user's guidance to a live session.
type guideCmd struct {
	client clientFlags
	sid    string
	op     messages.Guide
	json   bool
}

type guideFlags struct {
	client              clientFlags
	mode, model, effort string
	json                bool
}

func (f *guideFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("guide")
	fs.StringVar(&f.mode, "mode", "queue", "steer (into the running turn), queue (the next turn; starts one when idle) or interrupt (interrupt, then send)")
	fs.StringVar(&f.model, "model", "", "switch the agent's model from the next turn (backends that allow it)")
	fs.StringVar(&f.effort, "effort", "", "switch the reasoning effort from the next turn: low, medium, high or max")
	fs.BoolVar(&f.json, "json", false, "print the result as one JSON object")
	f.client.add(fs)
	return fs
}

func guideCommand() command {
	return command{
		name:    "guide",
		summary: "send guidance to a live session (--mode steer, queue or interrupt)",
		usage:   "guide [flags] SESSION TEXT",
		flags:   func() *pflag.FlagSet { return (&guideFlags{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseGuideFlags(args) },
	}
}

func parseGuideFlags(args []string) (*guideCmd, error) {
	const cmd = "guide"
	var f guideFlags
	fs := f.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != 2 {
		return nil, usagef(cmd, "want SESSION TEXT, got %d arguments: quote the text", fs.NArg())
	}
	c := &guideCmd{client: f.client, json: f.json}
	var err error
	if c.sid, err = sessionArg(cmd, fs.Arg(0)); err != nil {
		return nil, err
	}
	c.op = messages.Guide{SessionID: c.sid, Text: fs.Arg(1), Mode: messages.GuideMode(f.mode), Model: f.model, Effort: messages.Effort(f.effort)}
	if strings.TrimSpace(c.op.Text) == "" {
		return nil, usagef(cmd, "the TEXT is empty")
	}
	check := c.op
	check.SessionID = placeholderSessionID // SESSION may be a prefix; sessionArg checked it
	if err := check.Validate(); err != nil {
		return nil, &usageError{cmd: cmd, err: err}
	}
	return c, nil
}

func (c *guideCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "guide"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	var res messages.OKResult
	body := map[string]any{"text": c.op.Text, "mode": c.op.Mode}
	if c.op.Model != "" {
		body["agentModel"] = c.op.Model
	}
	if c.op.Effort != "" {
		body["effort"] = c.op.Effort
	}
	if err := dc.do(ctx, "POST", "/api/code-sessions/"+c.sid+"/guidance", body, &res); err != nil {
		return remoteErr(cmd, "guide", err)
	}
	if c.json {
		return writeJSON(s.stdout, res)
	}
	fmt.Fprintf(s.stdout, "guidance sent (%s)\n", c.op.EffectiveMode())
	return nil
}
