package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// lsCmd lists the daemon's session records, newest first.
type lsCmd struct {
	client clientFlags
	limit  int
	json   bool
}

func (c *lsCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("ls")
	fs.IntVar(&c.limit, "limit", 0, "at most this many sessions (default: all)")
	fs.BoolVar(&c.json, "json", false, `print {"sessions":[...records]} as one JSON object`)
	c.client.add(fs)
	return fs
}

func lsCommand() command {
	return command{
		name:    "ls",
		summary: "list the sessions, newest first: id, backend, model, status, rounds, cost, age",
		usage:   "ls [flags]",
		flags:   func() *pflag.FlagSet { return (&lsCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseLsFlags(args) },
	}
}

func parseLsFlags(args []string) (*lsCmd, error) {
	const cmd = "ls"
	c := &lsCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef(cmd, "takes no arguments, got %q", fs.Arg(0))
	}
	if c.limit < 0 {
		return nil, usagef(cmd, "--limit must not be negative")
	}
	return c, nil
}

func (c *lsCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "ls"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	path := "/api/code-sessions"
	if c.limit > 0 {
		path += fmt.Sprintf("?limit=%d", c.limit)
	}
	var res struct {
		Sessions []messages.SessionRecord `json:"sessions"`
	}
	if err := dc.do(ctx, "GET", path, nil, &res); err != nil {
		return remoteErr(cmd, "list", err)
	}
	if c.json {
		return writeJSON(s.stdout, res)
	}
	if len(res.Sessions) == 0 {
		fmt.Fprintln(s.stdout, "no sessions")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBACKEND\tMODEL\tSTATUS\tROUNDS\tCOST\tAGE")
	for _, r := range res.Sessions {
		rounds := fmt.Sprint(r.RoundsElapsed)
		if r.MaxRounds > 0 {
			rounds += fmt.Sprintf("/%d", r.MaxRounds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.SessionID, r.BackendID, orDash(r.Model), r.Status,
			rounds, cost(r.CostUSD), age(now, r.CreatedAt))
	}
	return tw.Flush()
}
