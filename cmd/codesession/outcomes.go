package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/learning/outcomes"
)

// outcomesCmd prints the outcome log ($CODESESSION_HOME/learning/outcomes.jsonl):
// one row per session run, filterable.
type outcomesCmd struct {
	cfg    configFlags
	json   bool
	filter outcomes.Filter
	since  string
}

func (c *outcomesCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("outcomes")
	fs.BoolVar(&c.json, "json", false, "print one JSON outcome record per line")
	fs.StringVar(&c.filter.Backend, "backend", "", "only this backend")
	fs.StringVar(&c.filter.Model, "model", "", "only this model")
	fs.StringVar(&c.filter.Tag, "tag", "", "only runs with this task tag")
	fs.StringVar(&c.since, "since", "", "only runs ended since: a duration (24h), days (1d) or a time (RFC 3339)")
	c.cfg.addConfig(fs)
	c.cfg.addHome(fs)
	return fs
}

func outcomesCommand() command {
	return command{
		name:    "outcomes",
		summary: "list recorded session outcomes (the learning loop's evidence)",
		usage:   "outcomes [--json] [--backend B] [--model M] [--tag T] [--since 24h]",
		flags:   func() *pflag.FlagSet { return (&outcomesCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseOutcomesFlags(args, time.Now()) },
	}
}

func parseOutcomesFlags(args []string, now time.Time) (*outcomesCmd, error) {
	c := &outcomesCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("outcomes", "takes no arguments, got %q", fs.Arg(0))
	}
	if c.since != "" {
		since, err := parseSince(c.since, now)
		if err != nil {
			return nil, usagef("outcomes", "--since: %v", err)
		}
		c.filter.Since = since
	}
	return c, nil
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := parseAge(s); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("want a duration like 24h or 1d, or an RFC 3339 time, got %q", s)
}

func (c *outcomesCmd) exec(ctx context.Context, s *streams) error {
	cfg, err := c.cfg.load("outcomes", s.getenv)
	if err != nil {
		return err
	}
	log, err := outcomes.OpenLog(cfg.Home)
	if err != nil {
		return err
	}
	all, _ := log.All()
	rs := outcomes.Select(all, c.filter)
	if c.json {
		for _, r := range rs {
			if err := writeJSON(s.stdout, r); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rs) == 0 {
		fmt.Fprintln(s.stdout, "no outcomes recorded yet")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDED\tSESSION\tRUN\tBACKEND\tMODEL\tEFFORT\tOUTCOME\tROUNDS\tDURATION\tCOST\tINTERVENTIONS\tTAGS\tREASON")
	for _, r := range rs {
		cost := "-"
		if r.CostUSD > 0 {
			cost = fmt.Sprintf("$%.4f", r.CostUSD)
		}
		outcome := string(r.Outcome)
		if r.Inferred {
			outcome += " (inferred)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", age(now, r.EndedAt), shortID(r.SessionID), r.Run,
			r.BackendID, orDash(r.Model), orDash(string(r.Effort)), outcome, r.Rounds,
			(time.Duration(r.DurationMs) * time.Millisecond).Round(time.Millisecond), cost, r.Interventions.Total(),
			orDash(strings.Join(r.TaskTags, ",")), orDash(oneLine(firstNonEmptyStr(r.FailureReason, r.DriverNote), 60)))
	}
	return tw.Flush()
}

func firstNonEmptyStr(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
