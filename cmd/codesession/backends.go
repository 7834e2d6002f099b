package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// backendsCmd prints the capability matrix: every backend's descriptor and
// a live probe of its availability, probed here or, with --addr, by the
// daemon (whose environment and config the sessions it starts get).
type backendsCmd struct {
	cfg    configFlags
	json   bool
	client clientFlags
	remote bool // --addr was given
}

func (c *backendsCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("backends")
	fs.BoolVar(&c.json, "json", false, "print the list-backends result as one JSON object")
	c.cfg.addConfig(fs)
	c.cfg.addHome(fs)
	fs.StringVar(&c.client.addr, "addr", "", "ask the daemon at host:port (or URL) instead of probing here")
	fs.StringVar(&c.client.token, "token", "", "with --addr: the daemon's bearer token (default $CODESESSION_TOKEN, else <home>/token)")
	return fs
}

func backendsCommand() command {
	return command{
		name:    "backends",
		summary: "list the backends with their capabilities and availability",
		usage:   "backends [--json]",
		flags:   func() *pflag.FlagSet { return (&backendsCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseBackendsFlags(args) },
	}
}

func parseBackendsFlags(args []string) (*backendsCmd, error) {
	c := &backendsCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("backends", "takes no arguments, got %q", fs.Arg(0))
	}
	c.remote = fs.Changed("addr")
	c.client.home = c.cfg.home // with --addr, the token is looked for there
	return c, nil
}

func (c *backendsCmd) exec(ctx context.Context, s *streams) error {
	if c.remote {
		return c.execRemote(ctx, s)
	}
	cfg, err := c.cfg.load("backends", s.getenv)
	if err != nil {
		return err
	}
	if installLogger != nil {
		installLogger(s.stderr, cfg.LogLevel, cfg.LogFormat)
	}
	// Listing reads no records: a memory store keeps this command from
	// opening the home (and from sweeping other processes' live sessions
	// as orphans).
	rt, err := actors.New(cfg, actors.WithStore(store.NewMemory()))
	if err != nil {
		return fmt.Errorf("start the runtime: %w", err)
	}
	defer closeRuntime(ctx, s, rt)
	res, err := rt.ListBackends(ctx, cliScope())
	if err != nil {
		return opErr("list-backends", err)
	}
	if c.json {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		_, err = s.stdout.Write(append(b, '\n'))
		return err
	}
	writeBackendsTable(s.stdout, res)
	return nil
}

// execRemote lists the daemon's backends, probed by the daemon.
func (c *backendsCmd) execRemote(ctx context.Context, s *streams) error {
	dc, err := c.client.client("backends", s.getenv)
	if err != nil {
		return err
	}
	var res messages.ListBackendsResult
	if err := dc.do(ctx, "GET", "/api/backends", nil, &res); err != nil {
		return remoteErr("backends", "list-backends", err)
	}
	if c.json {
		return writeJSON(s.stdout, res)
	}
	writeBackendsTable(s.stdout, res)
	return nil
}

// writeBackendsTable prints the capability matrix for people: one row per
// backend, then each backend's posture map and availability detail.
func writeBackendsTable(w io.Writer, res messages.ListBackendsResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tNAME\tSCRIPTED\tGRANULARITY\tCLARIFY\tALLOWED-TOOLS\tRESUME\tMODEL\tEFFORT\tLIVE CONTROLS\tAVAILABLE")
	for _, b := range res.Backends {
		d := b.Descriptor
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			d.ID, d.DisplayName, yesNo(d.Scripted), d.Granularity, yesNo(d.ClarifySupport),
			honoured(d.HonorsAllowed), d.Resume, d.ModelSelection, d.EffortSupport,
			liveControls(d.Live), availability(b.Availability))
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Posture maps (codesession posture -> the backend's own mode):")
	for _, b := range res.Backends {
		d := b.Descriptor
		parts := make([]string, 0, len(d.PostureMap))
		for _, p := range messages.Postures() {
			if v, ok := d.PostureMap[p]; ok {
				parts = append(parts, fmt.Sprintf("%s=%s", p, v))
			}
		}
		fmt.Fprintf(w, "  %s: %s\n", d.ID, orDash(strings.Join(parts, " ")))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Attach (the CLI's own interactive resume, verified against its pinned version; `attach SESSION` fills it in; - = none offered):")
	for _, b := range res.Backends {
		cmd := ""
		if a := b.Descriptor.ExternalAttach; a != nil {
			cmd = a.CommandTemplate
		}
		fmt.Fprintf(w, "  %s: %s\n", b.Descriptor.ID, orDash(cmd))
	}
	writeContainment(w, res)
	var notes []string
	for _, b := range res.Backends {
		if b.Descriptor.Scripted {
			notes = append(notes, fmt.Sprintf("  %s is SCRIPTED: it replays a fixed scenario and never calls a model (tests, demo, benchmarks).", b.Descriptor.ID))
		}
		for _, line := range b.TrackRecord {
			notes = append(notes, fmt.Sprintf("  %s track record: %s", b.Descriptor.ID, line))
		}
		for _, line := range b.RoutingGuidance {
			notes = append(notes, fmt.Sprintf("  %s routing: %s", b.Descriptor.ID, line))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func honoured(b bool) string {
	if b {
		return "honoured"
	}
	return "ignored"
}

func liveControls(l messages.LiveControls) string {
	var parts []string
	if l.Interrupt {
		parts = append(parts, "interrupt")
	}
	if l.SetPosture {
		parts = append(parts, "posture")
	}
	modes := make([]string, 0, len(l.GuideModes))
	for _, m := range l.GuideModes {
		modes = append(modes, string(m))
	}
	sort.Strings(modes)
	if len(modes) > 0 {
		parts = append(parts, "guide:"+strings.Join(modes, "/"))
	}
	return orDash(strings.Join(parts, ","))
}

func availability(a messages.Availability) string {
	if a.Available {
		if a.Version != "" {
			return "yes (" + a.Version + ")"
		}
		return "yes"
	}
	if a.Reason != "" {
		return "no: " + oneLine(a.Reason, 80)
	}
	return "no"
}
