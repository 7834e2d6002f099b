package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// lsCmd lists the daemon's session records, newest first.
type lsCmd struct {
	client   clientFlags
	limit    int
	json     bool
	output   string
	statuses []string
	backend  string
	since    time.Duration
	sinceArg string // --since as given: a duration (2h) or days (1d)
}

func (c *lsCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("ls")
	fs.IntVar(&c.limit, "limit", 0, "at most this many sessions, after the filters (default: all)")
	fs.StringVarP(&c.output, "output", "o", "table", "table (short ids, fits 100 columns), wide (whole ids, posture, cwd), json or id (ids only)")
	fs.StringSliceVar(&c.statuses, "status", nil, "only sessions in these states (running, idle, ended, failed, orphaned...; repeatable or comma-separated)")
	fs.StringVar(&c.backend, "backend", "", "only sessions of this backend")
	fs.StringVar(&c.sinceArg, "since", "", "only sessions created within this long: a duration (2h) or days (1d)")
	fs.BoolVar(&c.json, "json", false, `print {"sessions":[...records]} as one JSON object (as -o json)`)
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
	if c.sinceArg != "" {
		d, err := parseAge(c.sinceArg)
		if err != nil {
			return nil, usagef(cmd, "--since %q: want a duration such as 2h or days such as 1d", c.sinceArg)
		}
		if d < 0 {
			return nil, usagef(cmd, "--since must not be negative")
		}
		c.since = d
	}
	for _, st := range c.statuses {
		if !messages.Status(st).Valid() {
			return nil, usagef(cmd, "--status: unknown state %q (want running, idle, waiting, ended, failed or orphaned)", st)
		}
	}
	switch c.output {
	case "table", "wide", "id":
	case "json":
		c.json = true
	default:
		return nil, usagef(cmd, "-o takes table, wide, json or id, got %q", c.output)
	}
	return c, nil
}

// keep applies the filters.
func (c *lsCmd) keep(r messages.SessionRecord, now time.Time) bool {
	if c.backend != "" && r.BackendID != c.backend {
		return false
	}
	if c.since > 0 && now.Sub(r.CreatedAt) > c.since {
		return false
	}
	return len(c.statuses) == 0 || slices.Contains(c.statuses, string(r.Status))
}

// shortIDs cuts every id to the shortest prefix (at least 8 hex digits)
// that is unique among ids, as docker shows 12: short enough for a column,
// and each one accepted wherever a SESSION is taken.
func shortIDs(ids []string) map[string]string {
	sorted := slices.Sorted(slices.Values(ids))
	out := make(map[string]string, len(ids))
	for i, id := range sorted {
		n := len(messages.SessionIDPrefix) + 8
		for _, j := range []int{i - 1, i + 1} {
			if j < 0 || j >= len(sorted) || sorted[j] == id {
				continue
			}
			common := 0
			for common < len(id) && common < len(sorted[j]) && id[common] == sorted[j][common] {
				common++
			}
			n = max(n, common+1)
		}
		out[id] = id[:min(n, len(id))]
	}
	return out
}

func (c *lsCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "ls"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	var res struct {
		Sessions []messages.SessionRecord `json:"sessions"`
	}
	if err := dc.do(ctx, "GET", "/api/code-sessions", nil, &res); err != nil {
		return remoteErr(cmd, "list", err)
	}
	now := time.Now()
	kept := res.Sessions[:0]
	for _, r := range res.Sessions {
		if c.keep(r, now) && (c.limit == 0 || len(kept) < c.limit) {
			kept = append(kept, r)
		}
	}
	res.Sessions = kept
	if c.json {
		if res.Sessions == nil {
			res.Sessions = []messages.SessionRecord{}
		}
		return writeJSON(s.stdout, res)
	}
	if c.output == "id" {
		for _, r := range res.Sessions {
			fmt.Fprintln(s.stdout, r.SessionID)
		}
		return nil
	}
	if len(res.Sessions) == 0 {
		fmt.Fprintln(s.stdout, "no sessions")
		return nil
	}
	ids := make([]string, len(res.Sessions))
	for i, r := range res.Sessions {
		ids[i] = r.SessionID
	}
	short := shortIDs(ids)
	wide := c.output == "wide"
	tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "ID\tBACKEND\tMODEL\tSTATUS\tPOSTURE\tROUNDS\tCOST\tAGE\tCWD\tBRANCH")
	} else {
		fmt.Fprintln(tw, "ID\tBACKEND\tMODEL\tSTATUS\tROUNDS\tCOST\tAGE")
	}
	total, isolated := 0.0, 0
	for _, r := range res.Sessions {
		branch, mark := "-", ""
		if r.Worktree != nil {
			branch, mark = r.Worktree.Branch, "*"
			isolated++
		}
		total += r.CostUSD
		rounds := fmt.Sprint(r.RoundsElapsed)
		if r.MaxRounds > 0 {
			rounds += fmt.Sprintf("/%d", r.MaxRounds)
		}
		spent := cost(r.CostUSD)
		if r.MaxCostUSD > 0 {
			spent += fmt.Sprintf("/$%.2f", r.MaxCostUSD) // spent of the budget
		}
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.SessionID, r.BackendID, orDash(r.Model), r.Status,
				r.Posture, rounds, spent, age(now, r.CreatedAt), r.Cwd, branch)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", short[r.SessionID]+mark, oneLine(r.BackendID, 12), oneLine(orDash(r.Model), 24),
			r.Status, rounds, spent, age(now, r.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "sessions"
	if len(res.Sessions) == 1 {
		noun = "session"
	}
	_, err = fmt.Fprintf(s.stdout, "%d %s, %s in all\n", len(res.Sessions), noun, cost(total))
	if isolated > 0 && !wide {
		fmt.Fprintln(s.stdout, "* works in a git worktree of its own (-o wide shows the branch)")
	}
	return err
}
