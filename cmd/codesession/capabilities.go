package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/curation"
)

// capabilitiesCmd shows the capability catalog, what a project would get,
// or checks the catalog's pins against upstream (data only: a pin is
// bumped by editing the catalog, never by this command).
type capabilitiesCmd struct {
	cfg    configFlags
	json   bool
	action string // list, detect, check
	dir    string
}

func (c *capabilitiesCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("capabilities")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	c.cfg.addConfig(fs)
	c.cfg.addHome(fs)
	return fs
}

func capabilitiesCommand() command {
	return command{
		name:    "capabilities",
		summary: "list the capability catalog, detect a project's capabilities, check pins for updates",
		usage:   "capabilities [list|detect [DIR]|check] [--json]",
		flags:   func() *pflag.FlagSet { return (&capabilitiesCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseCapabilitiesFlags(args) },
	}
}

func parseCapabilitiesFlags(args []string) (*capabilitiesCmd, error) {
	const cmd = "capabilities"
	c := &capabilitiesCmd{action: "list"}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		c.action = fs.Arg(0)
	}
	switch {
	case c.action == "detect" && fs.NArg() <= 2:
		c.dir = "."
		if fs.NArg() == 2 {
			c.dir = fs.Arg(1)
		}
	case (c.action == "list" || c.action == "check") && fs.NArg() <= 1:
	default:
		return nil, usagef(cmd, "want list, detect [DIR] or check; got %q", strings.Join(fs.Args(), " "))
	}
	return c, nil
}

func (c *capabilitiesCmd) exec(ctx context.Context, s *streams) error {
	cfg, err := c.cfg.load("capabilities", s.getenv)
	if err != nil {
		return err
	}
	cat, err := curation.LoadCatalog(cfg.Home)
	if err != nil {
		return err
	}
	switch c.action {
	case "detect":
		p, cached, err := curation.DetectProject(cfg.Home, c.dir, cat, time.Now())
		if err != nil {
			return fmt.Errorf("cannot read the project %s: %w", c.dir, err)
		}
		if c.json {
			return writeJSON(s.stdout, map[string]any{"profile": p, "cached": cached})
		}
		if len(p.Detected) == 0 {
			fmt.Fprintf(s.stdout, "%s: no capability detected\n", c.dir)
			return nil
		}
		for _, id := range p.Detected {
			e, _ := cat.Lookup(id)
			fmt.Fprintf(s.stdout, "%-16s %-4s %s\n", id, e.Tier, e.Source.Identity())
		}
		return nil
	case "check":
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		ups := (&curation.Refresher{Token: s.getenv("GITHUB_TOKEN")}).Check(ctx, cat)
		if c.json {
			return writeJSON(s.stdout, map[string]any{"updates": ups})
		}
		tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPINNED\tLATEST\tUPDATE")
		for _, u := range ups {
			state := map[bool]string{true: "available (edit the catalog to bump)", false: "-"}[u.Available]
			if u.Error != "" {
				state = "unknown: " + u.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.ID, short(u.Current), orDash(short(u.Latest)), state)
		}
		return tw.Flush()
	default:
		if c.json {
			return writeJSON(s.stdout, cat)
		}
		src := "built in"
		if _, err := os.Stat(cfg.Home + "/" + curation.CatalogFile); err == nil {
			src = cfg.Home + "/" + curation.CatalogFile
		}
		fmt.Fprintf(s.stdout, "catalog (%s), %d entries:\n", src, len(cat.Entries))
		tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTIER\tIDENTITY\tPROVIDES")
		for _, e := range cat.Entries {
			var what []string
			if e.MCP != nil {
				what = append(what, "mcp:"+e.MCP.Name)
			}
			if e.Skill != nil {
				what = append(what, "skill:"+e.Skill.Name)
			}
			if e.Instructions != "" {
				what = append(what, "instructions")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.ID, e.Tier, e.Source.Identity(), strings.Join(what, ", "))
		}
		return tw.Flush()
	}
}

// short cuts a commit sha to 12 digits (versions stay as they are).
func short(v string) string {
	if len(v) == 40 {
		return v[:12]
	}
	return v
}
