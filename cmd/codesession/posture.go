package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// postureCmd changes a live session's posture (never above its ceiling).
type postureCmd struct {
	client  clientFlags
	sid     string
	posture messages.Posture
	json    bool
}

func (c *postureCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("posture")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object")
	c.client.add(fs)
	return fs
}

func postureCommand() command {
	return command{
		name:    "posture",
		summary: "change a live session's posture: plan, default, acceptEdits or full (never above its ceiling)",
		usage:   "posture [flags] SESSION POSTURE",
		flags:   func() *pflag.FlagSet { return (&postureCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parsePostureFlags(args) },
	}
}

func parsePostureFlags(args []string) (*postureCmd, error) {
	const cmd = "posture"
	c := &postureCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != 2 {
		return nil, usagef(cmd, "want SESSION POSTURE, got %d arguments", fs.NArg())
	}
	var err error
	if c.sid, err = sessionArg(cmd, fs.Arg(0)); err != nil {
		return nil, err
	}
	if c.posture, err = messages.ParsePosture(fs.Arg(1)); err != nil {
		return nil, usagef(cmd, "%v", err)
	}
	return c, nil
}

func (c *postureCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "posture"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	var res messages.SetPostureResult
	if err := dc.do(ctx, "POST", "/api/code-sessions/"+c.sid+"/posture", map[string]any{"posture": c.posture}, &res); err != nil {
		return remoteErr(cmd, "set-posture", err)
	}
	if c.json {
		return writeJSON(s.stdout, res)
	}
	fmt.Fprintf(s.stdout, "posture is now %s\n", res.Posture)
	return nil
}
