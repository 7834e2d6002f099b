package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// answerCmd answers a session's pending permission question.
type answerCmd struct {
	client clientFlags
	sid    string
	op     messages.Answer
	json   bool
}

func (c *answerCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("answer")
	fs.StringVar(&c.op.Reason, "reason", "", "why (a deny's reason is passed on to the agent)")
	fs.StringVar(&c.op.Note, "note", "", "a note for the record")
	fs.BoolVar(&c.json, "json", false, "print the answer result as one JSON object")
	c.client.add(fs)
	return fs
}

func answerCommand() command {
	return command{
		name:    "answer",
		summary: "answer a permission question: allow (once), always (this session), deny or cancel",
		usage:   "answer [flags] SESSION CLARIFICATION DECISION",
		flags:   func() *pflag.FlagSet { return (&answerCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseAnswerFlags(args) },
	}
}

// parseDecision accepts the decisions and the short forms people type.
func parseDecision(s string) (messages.Decision, bool) {
	switch s {
	case "allow", "y", "yes":
		return messages.DecisionAllowOnce, true
	case "always", "a":
		return messages.DecisionAllowSession, true
	case "no", "n":
		return messages.DecisionDeny, true
	}
	d := messages.Decision(s)
	return d, d.Valid()
}

func parseAnswerFlags(args []string) (*answerCmd, error) {
	const cmd = "answer"
	c := &answerCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != 3 {
		return nil, usagef(cmd, "want SESSION CLARIFICATION DECISION, got %d arguments", fs.NArg())
	}
	var err error
	if c.sid, err = sessionArg(cmd, fs.Arg(0)); err != nil {
		return nil, err
	}
	c.op.SessionID, c.op.ClarificationID = c.sid, fs.Arg(1)
	var ok bool
	if c.op.Decision, ok = parseDecision(fs.Arg(2)); !ok {
		return nil, usagef(cmd, "DECISION %q: want allow, always, deny or cancel (or allow_once, allow_session)", fs.Arg(2))
	}
	check := c.op
	check.SessionID = placeholderSessionID // SESSION may be a prefix; sessionArg checked it
	if err := check.Validate(); err != nil {
		return nil, &usageError{cmd: cmd, err: err}
	}
	return c, nil
}

func (c *answerCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "answer"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	var res messages.AnswerResult
	body := map[string]any{"clarificationId": c.op.ClarificationID, "decision": c.op.Decision, "reason": c.op.Reason, "note": c.op.Note}
	if err := dc.do(ctx, "POST", "/api/code-sessions/"+c.sid+"/answer", body, &res); err != nil {
		return remoteErr(cmd, "answer", err)
	}
	if c.json {
		return writeJSON(s.stdout, res)
	}
	fmt.Fprintf(s.stdout, "answered %s (%s): %s\n", res.Clarification.ID, res.Clarification.ToolName, c.op.Decision)
	return nil
}
