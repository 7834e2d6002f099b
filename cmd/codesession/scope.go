package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/controlplane/client"
	"github.com/codesession/codesession/messages"
)

// scopeCmd shows the token's scope and its constraints in the daemon, or
// (an admin token) replaces them.
type scopeCmd struct {
	client clientFlags
	set    bool
	cons   client.ScopeConstraints
	json   bool
}

type scopeFlags struct {
	client     clientFlags
	maxPosture string
	maxRounds  int
	tools      []string
	backends   []string
	set        bool
	json       bool
}

func (f *scopeFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("scope")
	fs.BoolVar(&f.set, "set", false, "replace the scope's constraints with the flags below (an admin token only)")
	fs.StringVar(&f.maxPosture, "max-posture", "", "with --set: the ceiling of every session the scope starts")
	fs.IntVar(&f.maxRounds, "max-rounds", 0, "with --set: at most this many turns per session (0: no cap)")
	fs.StringArrayVar(&f.tools, "allowed-tool", nil, "with --set: a tool sessions may use (repeatable; none: every tool)")
	fs.StringArrayVar(&f.backends, "backend", nil, "with --set: a backend the scope may start (repeatable; none: every backend)")
	fs.BoolVar(&f.json, "json", false, "print the scope as one JSON object")
	f.client.add(fs)
	return fs
}

func scopeCommand() command {
	return command{
		name:    "scope",
		summary: "show your token's scope and its constraints in the daemon; --set replaces them (admin tokens)",
		usage:   "scope [--set [--max-posture P] [--max-rounds N] [--allowed-tool T]... [--backend B]...]",
		flags:   func() *pflag.FlagSet { return (&scopeFlags{}).flagSet() },
		parse: func(args []string) (runner, error) {
			const cmd = "scope"
			var f scopeFlags
			fs := f.flagSet()
			if err := parseFlags(fs, args); err != nil {
				return nil, err
			}
			if fs.NArg() > 0 {
				return nil, usagef(cmd, "takes no arguments, got %q", fs.Arg(0))
			}
			c := &scopeCmd{client: f.client, set: f.set, json: f.json,
				cons: client.ScopeConstraints{MaxRounds: f.maxRounds, AllowedTools: f.tools, Backends: f.backends}}
			if f.maxPosture != "" {
				p, err := messages.ParsePosture(f.maxPosture)
				if err != nil {
					return nil, usagef(cmd, "--max-posture: %v", err)
				}
				c.cons.MaxPosture = p
			}
			if !f.set && (f.maxPosture != "" || f.maxRounds != 0 || len(f.tools) > 0 || len(f.backends) > 0) {
				return nil, usagef(cmd, "constraint flags change the scope only with --set")
			}
			return c, nil
		},
	}
}

func (c *scopeCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "scope"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	var sc client.Scope
	if c.set {
		sc, err = dc.SetScope(ctx, c.cons)
	} else {
		sc, err = dc.Scope(ctx)
	}
	if err != nil {
		return remoteErr(cmd, "scope", err)
	}
	if c.json {
		return writeJSON(s.stdout, sc)
	}
	admin := ""
	if sc.Admin {
		admin = " (admin token: may set its constraints)"
	}
	fmt.Fprintf(s.stdout, "scope %s%s\n", sc.Scope, admin)
	fmt.Fprintf(s.stdout, "  max posture    %s\n", orDash(string(sc.Constraints.MaxPosture)))
	rounds := "-"
	if sc.Constraints.MaxRounds > 0 {
		rounds = fmt.Sprint(sc.Constraints.MaxRounds)
	}
	fmt.Fprintf(s.stdout, "  max rounds     %s\n", rounds)
	fmt.Fprintf(s.stdout, "  allowed tools  %s\n", orDash(strings.Join(sc.Constraints.AllowedTools, ", ")))
	fmt.Fprintf(s.stdout, "  backends       %s\n", orDash(strings.Join(sc.Backends, ", ")))
	return nil
}
