package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/messages"
)

// showCmd prints one session: its record, its most recent events and,
// when the backend has one, its own interactive resume command.
type showCmd struct {
	client clientFlags
	sid    string
	events int
	json   bool
}

// sessionDetail is GET /api/code-sessions/{id}'s data.
type sessionDetail struct {
	Record         messages.SessionRecord    `json:"record"`
	Events         []messages.PersistedEvent `json:"events"`
	LastSeq        uint64                    `json:"lastSeq"`
	ExternalAttach *controlplane.AttachView  `json:"externalAttach,omitempty"`
	Manifest       *curation.Manifest        `json:"manifest,omitempty"`
}

func (c *showCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("show")
	fs.IntVar(&c.events, "events", 20, "how many of the most recent events to show")
	fs.BoolVar(&c.json, "json", false, "print {record, events, lastSeq, externalAttach?} as one JSON object")
	c.client.add(fs)
	return fs
}

func showCommand() command {
	return command{
		name:    "show",
		summary: "show a session's record and its recent events",
		usage:   "show [flags] SESSION",
		flags:   func() *pflag.FlagSet { return (&showCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseShowFlags(args) },
	}
}

func parseShowFlags(args []string) (*showCmd, error) {
	const cmd = "show"
	c := &showCmd{}
	var err error
	if c.sid, err = parseSessionFlags(cmd, c.flagSet(), args); err != nil {
		return nil, err
	}
	if c.events < 0 || c.events > 5000 {
		return nil, usagef(cmd, "--events must be in 0..5000")
	}
	return c, nil
}

// getSession reads a session's record and the events after afterSeq.
func getSession(ctx context.Context, dc *daemonClient, sid string, afterSeq uint64, limit int) (sessionDetail, error) {
	var d sessionDetail
	err := dc.do(ctx, "GET", fmt.Sprintf("/api/code-sessions/%s?afterSeq=%d&limit=%d", sid, afterSeq, limit), nil, &d)
	return d, err
}

func (c *showCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "show"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	d, err := getSession(ctx, dc, c.sid, 0, 1)
	if err != nil {
		return remoteErr(cmd, "get", err)
	}
	d.Events = nil
	if c.events > 0 {
		after := uint64(0)
		if d.LastSeq > uint64(c.events) {
			after = d.LastSeq - uint64(c.events)
		}
		if d, err = getSession(ctx, dc, c.sid, after, c.events); err != nil {
			return remoteErr(cmd, "get", err)
		}
	}
	if c.json {
		return writeJSON(s.stdout, d)
	}
	writeRecord(s, d, time.Now())
	return nil
}

func writeRecord(s *streams, d sessionDetail, now time.Time) {
	r := d.Record
	w := s.stdout
	fmt.Fprintf(w, "session %s\n", r.SessionID)
	status := string(r.Status)
	if r.Outcome != "" {
		status += " (outcome " + string(r.Outcome)
		if r.OutcomeNote != "" {
			status += ": " + oneLine(r.OutcomeNote, 120)
		}
		status += ")"
	}
	fmt.Fprintf(w, "  status    %s\n", status)
	fmt.Fprintf(w, "  backend   %s   model %s   effort %s\n", r.BackendID, orDash(r.Model), orDash(string(r.Effort)))
	fmt.Fprintf(w, "  posture   %s (ceiling %s)\n", r.Posture, r.MaxPosture)
	rounds := fmt.Sprint(r.RoundsElapsed)
	if r.MaxRounds > 0 {
		rounds += fmt.Sprintf(" of %d", r.MaxRounds)
	}
	fmt.Fprintf(w, "  rounds    %s   cost %s%s\n", rounds, cost(r.CostUSD), budgetText(r.MaxCostUSD))
	fmt.Fprintf(w, "  cwd       %s\n", r.Cwd)
	writeWorktree(w, r.Worktree)
	writeProvision(w, r.Provision, d.Manifest)
	fmt.Fprintf(w, "  brief     %s\n", oneLine(r.TaskBrief, 160))
	if len(r.TaskTags) > 0 {
		fmt.Fprintf(w, "  tags      %s\n", strings.Join(r.TaskTags, ", "))
	}
	fmt.Fprintf(w, "  created   %s (%s ago)   updated %s ago\n", r.CreatedAt.Local().Format(time.DateTime), age(now, r.CreatedAt), age(now, r.UpdatedAt))
	for i, run := range r.Runs {
		fmt.Fprintf(w, "  run %d     %s by %s", i+1, run.StartedAt.Local().Format(time.DateTime), run.OwnerScopeID)
		if run.ExternalSessionID != "" {
			fmt.Fprintf(w, ", backend session %s", run.ExternalSessionID)
		}
		fmt.Fprintln(w)
		if a := run.Containment; a != nil {
			fmt.Fprintf(w, "            confined: Landlock ABI %d, network %s", a.LandlockABI, a.Network)
			if len(a.ConnectTCP) > 0 {
				fmt.Fprintf(w, " (TCP ports %v)", a.ConnectTCP)
			}
			fmt.Fprintf(w, ", %d writable paths, %d read-denied\n", len(a.Writable), len(a.ReadDenied))
			for _, b := range a.BestEffort {
				fmt.Fprintf(w, "            best effort: %s\n", b)
			}
		}
	}
	if a := d.ExternalAttach; a != nil {
		fmt.Fprintf(w, "  attach    %s\n", a.Command)
		if a.Caution != "" {
			fmt.Fprintf(w, "            caution: %s\n", a.Caution)
		}
	}
	if len(d.Events) == 0 {
		fmt.Fprintf(w, "no events shown (%d in the log)\n", d.LastSeq)
		return
	}
	fmt.Fprintf(w, "events %d..%d of %d:\n", d.Events[0].Seq, d.Events[len(d.Events)-1].Seq, d.LastSeq)
	for _, ev := range d.Events {
		fmt.Fprintf(w, "  %s\n", eventLine(ev))
	}
}
