package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/controlplane"
	drv "github.com/codesession/codesession/actors/driver"
)

// delegationsCmd lists the daemon's delegations (live and past) with the
// sessions each drove, or shows one; --cancel ends a running one.
type delegationsCmd struct {
	client clientFlags
	json   bool
	cancel bool
	id     string
}

func (c *delegationsCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("delegations")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	fs.BoolVar(&c.cancel, "cancel", false, "cancel the delegation ID (its sessions are released)")
	c.client.add(fs)
	return fs
}

func delegationsCommand() command {
	return command{
		name:    "delegations",
		summary: "list the delegations, live and past, with the sessions they drove (or show one)",
		usage:   "delegations [--json] [--cancel] [ID]",
		flags:   func() *pflag.FlagSet { return (&delegationsCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseDelegationsFlags(args) },
	}
}

func parseDelegationsFlags(args []string) (*delegationsCmd, error) {
	const cmd = "delegations"
	c := &delegationsCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 0:
		if c.cancel {
			return nil, usagef(cmd, "--cancel needs a delegation ID")
		}
	case 1:
		c.id = fs.Arg(0)
		if !drv.ValidID(c.id) {
			return nil, usagef(cmd, "%q is not a delegation id (dl_ and 24 hex digits)", c.id)
		}
	default:
		return nil, usagef(cmd, "takes at most one ID")
	}
	return c, nil
}

func (c *delegationsCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "delegations"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	if c.id != "" {
		if c.cancel {
			var rec drv.Record
			if err := dc.do(ctx, "POST", "/api/delegations/"+c.id+"/cancel", map[string]any{}, &rec); err != nil {
				return remoteErr(cmd, "cancel", err)
			}
		}
		var view controlplane.DelegationView
		if err := dc.do(ctx, "GET", "/api/delegations/"+c.id, nil, &view); err != nil {
			return remoteErr(cmd, "delegation", err)
		}
		if c.json {
			return writeJSON(s.stdout, view)
		}
		printDelegation(s, view)
		return nil
	}
	var list controlplane.DelegationsView
	if err := dc.do(ctx, "GET", "/api/delegations", nil, &list); err != nil {
		return remoteErr(cmd, "delegations", err)
	}
	if c.json {
		return writeJSON(s.stdout, list)
	}
	if len(list.Delegations) == 0 {
		fmt.Fprintln(s.stdout, "no delegations yet: codesession delegate BRIEF")
		return nil
	}
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DELEGATION\tAGENT\tSTATE\tBACKEND\tAGE\tSESSIONS")
	now := time.Now()
	for _, d := range list.Delegations {
		sessions := "-"
		if len(d.Sessions) > 0 {
			sessions = ""
			for i, sid := range d.Sessions {
				if i > 0 {
					sessions += ","
				}
				sessions += shortID(sid)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Agent, d.State, orDash(d.Constraints.Backend),
			now.Sub(d.CreatedAt).Round(time.Second), sessions)
	}
	return tw.Flush()
}
