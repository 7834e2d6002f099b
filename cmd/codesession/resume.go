package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/messages"
)

// resumeCmd has the daemon adopt an ended, failed or orphaned session:
// same id, the event log continuing, a new run.
type resumeCmd struct {
	client clientFlags
	sid    string
	brief  string
	json   bool
	// maxPosture is the ceiling asked for; empty keeps the record's
	// (clamped to the scope's)
	maxPosture string
}

func (c *resumeCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("resume")
	fs.StringVar(&c.brief, "brief", "", "what the resumed run is told first (default: check the workspace and continue the task)")
	fs.StringVar(&c.maxPosture, "max-posture", "", "the ceiling the resumed run asks for (default: the session's, clamped to the token's scope)")
	fs.BoolVar(&c.json, "json", false, "print the start result as one JSON object")
	c.client.add(fs)
	return fs
}

func resumeCommand() command {
	return command{
		name:    "resume",
		summary: "resume an ended, failed or orphaned session in the daemon (same id, a new run)",
		usage:   "resume [flags] SESSION",
		flags:   func() *pflag.FlagSet { return (&resumeCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseResumeFlags(args) },
	}
}

func parseResumeFlags(args []string) (*resumeCmd, error) {
	const cmd = "resume"
	c := &resumeCmd{}
	var err error
	if c.sid, err = parseSessionFlags(cmd, c.flagSet(), args); err != nil {
		return nil, err
	}
	if len(c.brief) > messages.MaxBriefBytes {
		return nil, usagef(cmd, "--brief is longer than %d bytes", messages.MaxBriefBytes)
	}
	if c.maxPosture != "" && !messages.Posture(c.maxPosture).Valid() {
		return nil, usagef(cmd, "--max-posture %q is not a posture (plan, default, acceptEdits, full)", c.maxPosture)
	}
	return c, nil
}

func (c *resumeCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "resume"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	body := map[string]any{}
	if c.brief != "" {
		body["brief"] = c.brief
	}
	if c.maxPosture != "" {
		body["maxPosture"] = c.maxPosture
	}
	var view controlplane.ResumeView
	if err := dc.do(ctx, "POST", "/api/code-sessions/"+c.sid+"/resume", body, &view); err != nil {
		return remoteErr(cmd, "resume", err)
	}
	st := view.StartResult
	if c.json {
		if view.Delegation != nil {
			return writeJSON(s.stdout, view)
		}
		return writeJSON(s.stdout, st)
	}
	if d := view.Delegation; d != nil {
		// a driver drove it: a fresh driver adopts it (same id, a new run)
		fmt.Fprintf(s.stdout, "session %s is resumed by delegation %s (%s), which adopts it\n", st.SessionID, d.ID, d.Agent)
		fmt.Fprintf(s.stdout, "next: codesession delegations %s\n", d.ID)
		return nil
	}
	fmt.Fprintf(s.stdout, "session %s resumed on %s (posture %s, ceiling %s)\n", st.SessionID, st.Backend, st.Posture, st.MaxPosture)
	fmt.Fprintf(s.stdout, "next: codesession read %s\n", st.SessionID)
	return nil
}
