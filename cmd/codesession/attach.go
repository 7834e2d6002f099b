package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
)

// attachCmd prints the backend's own interactive resume command for a
// session, to continue it by hand in a terminal.
type attachCmd struct {
	client clientFlags
	sid    string
	json   bool
}

func (c *attachCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("attach")
	fs.BoolVar(&c.json, "json", false, "print {command, note?, caution?} as one JSON object")
	c.client.add(fs)
	return fs
}

func attachCommand() command {
	return command{
		name:    "attach",
		summary: "print the backend's own command to resume a session by hand in a terminal",
		usage:   "attach [flags] SESSION",
		flags:   func() *pflag.FlagSet { return (&attachCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseAttachFlags(args) },
	}
}

func parseAttachFlags(args []string) (*attachCmd, error) {
	const cmd = "attach"
	c := &attachCmd{}
	var err error
	if c.sid, err = parseSessionFlags(cmd, c.flagSet(), args); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *attachCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "attach"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	d, err := getSession(ctx, dc, c.sid, 0, 1)
	if err != nil {
		return remoteErr(cmd, "get", err)
	}
	a := d.ExternalAttach
	if a == nil {
		return fmt.Errorf("session %s: backend %s has no interactive resume command, or no run captured its own session id (or the command would need a cwd the record lacks)",
			c.sid, d.Record.BackendID)
	}
	if c.json {
		return writeJSON(s.stdout, a)
	}
	if a.Caution != "" {
		fmt.Fprintf(s.stderr, "caution: %s\n", a.Caution)
	}
	if a.Note != "" {
		fmt.Fprintf(s.stderr, "note: %s\n", a.Note)
	}
	fmt.Fprintln(s.stdout, a.Command)
	return nil
}
