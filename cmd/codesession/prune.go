package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/messages"
)

// pruneCmd removes old sessions that are no longer live from the home.
type pruneCmd struct {
	cfg       configFlags
	olderThan time.Duration
	dryRun    bool
	json      bool
}

type pruneFlags struct {
	cfg       configFlags
	olderThan string
	dryRun    bool
	json      bool
}

func (f *pruneFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("prune")
	fs.StringVar(&f.olderThan, "older-than", "", "remove sessions last updated longer ago than this: a Go duration (72h) or days (30d); required")
	fs.BoolVar(&f.dryRun, "dry-run", false, "only list what would be removed")
	fs.BoolVar(&f.json, "json", false, "print the removed sessions as one JSON array")
	f.cfg.addHome(fs)
	f.cfg.addConfig(fs)
	return fs
}

func pruneCommand() command {
	return command{
		name:    "prune",
		summary: "remove ended, failed and orphaned sessions older than an age: records, event logs, worktrees",
		usage:   "prune --older-than D [--dry-run] [--home DIR]",
		flags:   func() *pflag.FlagSet { return (&pruneFlags{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parsePruneFlags(args) },
	}
}

func parsePruneFlags(args []string) (*pruneCmd, error) {
	const cmd = "prune"
	var f pruneFlags
	fs := f.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef(cmd, "takes no arguments, got %q", fs.Arg(0))
	}
	if f.olderThan == "" {
		return nil, usagef(cmd, "--older-than is required (e.g. --older-than 30d)")
	}
	d, err := parseAge(f.olderThan)
	if err != nil || d < 0 {
		return nil, usagef(cmd, "--older-than %q: want a duration such as 72h or 30d", f.olderThan)
	}
	return &pruneCmd{cfg: f.cfg, olderThan: d, dryRun: f.dryRun, json: f.json}, nil
}

// parseAge is time.ParseDuration plus whole days ("30d").
func parseAge(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

func (c *pruneCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "prune"
	cfg, err := c.cfg.load(cmd, s.getenv)
	if err != nil {
		return err
	}
	cutoff := time.Now().Add(-c.olderThan)
	out, err := actors.Prune(ctx, cfg.Home, cutoff, c.dryRun)
	if c.dryRun && messages.IsCode(err, messages.CodeConflict) {
		// a daemon holds the home: its records are current, so a dry run
		// lists from it instead of opening the store beside it
		out, err = c.listFromDaemon(ctx, s, cfg.Home, cutoff)
	}
	if c.json {
		if out == nil {
			out = []actors.Pruned{}
		}
		if werr := writeJSON(s.stdout, out); err == nil {
			err = werr
		}
		return err
	}
	verb := "removed"
	if c.dryRun {
		verb = "would remove"
	}
	for _, p := range out {
		line := fmt.Sprintf("%s %s (%s, updated %s)", verb, p.SessionID, p.Status, p.UpdatedAt.Local().Format(time.DateTime))
		if p.Worktree != nil {
			line += fmt.Sprintf(", its worktree %s (branch %s kept)", p.Worktree.Path, p.Worktree.Branch)
		}
		if p.CodexHome != "" {
			line += ", its CODEX_HOME " + p.CodexHome
		}
		fmt.Fprintln(s.stdout, line)
	}
	if err == nil {
		fmt.Fprintf(s.stdout, "%d session(s) %s from %s\n", len(out), verb, cfg.Home)
	}
	return err
}

// listFromDaemon is a dry run's list while a daemon holds home: the
// daemon's records that prune would remove (not live, updated before
// cutoff). Only the real prune, with the daemon stopped, removes them.
func (c *pruneCmd) listFromDaemon(ctx context.Context, s *streams, home string, cutoff time.Time) ([]actors.Pruned, error) {
	const cmd = "prune"
	cf := clientFlags{home: home}
	dc, err := cf.client(cmd, s.getenv)
	if err != nil {
		return nil, err
	}
	var res struct {
		Sessions []messages.SessionRecord `json:"sessions"`
	}
	if err := dc.do(ctx, "GET", "/api/code-sessions", nil, &res); err != nil {
		return nil, remoteErr(cmd, "list", err)
	}
	var out []actors.Pruned
	for _, rec := range res.Sessions {
		if rec.Status.Live() || !rec.UpdatedAt.Before(cutoff) {
			continue
		}
		out = append(out, actors.Pruned{SessionID: rec.SessionID, Status: rec.Status, UpdatedAt: rec.UpdatedAt, Worktree: rec.Worktree})
	}
	fmt.Fprintf(s.stderr, "codesession prune: a daemon holds %s; listed from it (stop it to prune for real)\n", home)
	return out, nil
}
