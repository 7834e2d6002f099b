package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/messages"
)

// approvalsCmd lists the capability approval requests of the home, or
// approves or denies one. It works on the home's ledger directly (locked,
// so a running daemon sees the decision at its next session start).
type approvalsCmd struct {
	cfg    configFlags
	json   bool
	action string // list, approve, deny
	id     string
}

func (c *approvalsCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("approvals")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	c.cfg.addConfig(fs)
	c.cfg.addHome(fs)
	return fs
}

func approvalsCommand() command {
	return command{
		name:    "approvals",
		summary: "list capability approval requests; approve or deny one",
		usage:   "approvals [approve|deny ID] [--json]",
		flags:   func() *pflag.FlagSet { return (&approvalsCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseApprovalsFlags(args) },
	}
}

func parseApprovalsFlags(args []string) (*approvalsCmd, error) {
	const cmd = "approvals"
	c := &approvalsCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 0:
		c.action = "list"
	case 2:
		c.action, c.id = fs.Arg(0), fs.Arg(1)
		if c.action != "approve" && c.action != "deny" {
			return nil, usagef(cmd, "unknown action %q (want approve ID or deny ID)", c.action)
		}
	default:
		return nil, usagef(cmd, "takes nothing, or approve ID, or deny ID; got %q", strings.Join(fs.Args(), " "))
	}
	return c, nil
}

func (c *approvalsCmd) exec(ctx context.Context, s *streams) error {
	cfg, err := c.cfg.load("approvals", s.getenv)
	if err != nil {
		return err
	}
	l := curation.NewLedger(cfg.Home, nil)
	if c.action != "list" {
		a, err := l.Decide(messages.ApprovalDecision{ID: c.id, Decision: c.action})
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(s.stdout, a)
		}
		fmt.Fprintf(s.stdout, "%s %s (%s): the next session in a project that uses it %s\n", a.Status, a.ID, a.Identity,
			map[bool]string{true: "gets it", false: "goes without it"}[a.Status == messages.ApprovalApproved])
		return nil
	}
	list, err := l.List()
	if err != nil {
		return err
	}
	if c.json {
		if list == nil {
			list = []messages.Approval{}
		}
		return writeJSON(s.stdout, map[string]any{"approvals": list})
	}
	if len(list) == 0 {
		fmt.Fprintln(s.stdout, "no approval requests")
		return nil
	}
	tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tTIER\tIDENTITY\tREQUESTED\tPROJECTS")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Status, a.Tier, a.Identity, a.RequestedAt.Local().Format(time.DateTime), strings.Join(a.Projects, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range list {
		if a.Status == messages.ApprovalPending {
			fmt.Fprintf(s.stdout, "\n%s: %s\n  approve: codesession approvals approve %s\n", a.ID, a.Question, a.ID)
		}
	}
	return nil
}

// writeProvision prints what capability curation did for a session and
// what its launch manifest holds (show).
func writeProvision(w io.Writer, p *messages.Provision, m *curation.Manifest) {
	if p != nil {
		tier := func(ids []string) string {
			out := make([]string, len(ids))
			for i, id := range ids {
				out[i] = id + " (" + p.Tiers[id] + ")"
			}
			return strings.Join(out, ", ")
		}
		fmt.Fprintf(w, "  capabilities detected %s\n", orDash(tier(p.CapabilityIDs)))
		if len(p.Applied) > 0 {
			fmt.Fprintf(w, "            applied %s\n", strings.Join(p.Applied, ", "))
		}
		for _, id := range p.AwaitingApproval {
			fmt.Fprintf(w, "            %s: awaiting approval (codesession approvals)\n", id)
		}
		if len(p.Ignored) > 0 {
			fmt.Fprintf(w, "            ignored %s\n", strings.Join(p.Ignored, ", "))
		}
		for _, n := range p.TokenScopeNotes {
			fmt.Fprintf(w, "            caution: %s\n", n)
		}
	}
	if m != nil {
		fmt.Fprintf(w, "  manifest  %s %s, brief sha256 %s, %d file(s)\n", m.Backend, orDash(m.CLIVersion), short12(m.BriefSHA256), len(m.Files))
		if len(m.Argv) > 0 {
			fmt.Fprintf(w, "            argv %s\n", oneLine(strings.Join(m.Argv, " "), 200))
		}
		for _, f := range m.Files {
			fmt.Fprintf(w, "            %s  %s (%d bytes)\n", short12(f.SHA256), f.Path, f.Bytes)
		}
	}
}

func short12(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
