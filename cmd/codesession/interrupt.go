package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// interruptCmd aborts a session's running turn.
type interruptCmd struct {
	client clientFlags
	sid    string
	json   bool
}

func (c *interruptCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("interrupt")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object")
	c.client.add(fs)
	return fs
}

func interruptCommand() command {
	return command{
		name:    "interrupt",
		summary: "abort a session's running turn (it ends interrupted; the session stays live)",
		usage:   "interrupt [flags] SESSION",
		flags:   func() *pflag.FlagSet { return (&interruptCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseInterruptFlags(args) },
	}
}

func parseInterruptFlags(args []string) (*interruptCmd, error) {
	const cmd = "interrupt"
	c := &interruptCmd{}
	var err error
	if c.sid, err = parseSessionFlags(cmd, c.flagSet(), args); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *interruptCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "interrupt"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	var res messages.OKResult
	if err := dc.do(ctx, "POST", "/api/code-sessions/"+c.sid+"/interrupt", struct{}{}, &res); err != nil {
		return remoteErr(cmd, "interrupt", err)
	}
	if c.json {
		return writeJSON(s.stdout, res)
	}
	fmt.Fprintln(s.stdout, "interrupt requested")
	return nil
}
