package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// readCmd waits for a session's next read-turn result (long-polling the
// daemon until --timeout).
type readCmd struct {
	client      clientFlags
	sid         string
	includeDiff bool
	timeout     time.Duration
	json        bool
	quiet       bool
	// spinnerTo, when set, is where the waiting spinner draws (tests);
	// otherwise stderr when it is a terminal
	spinnerTo   io.Writer
	stopSpinner func()
}

// spinnerWriter is where read's waiting spinner draws: nowhere with
// --quiet or --json, else spinnerTo, else stderr when it is a terminal.
func (c *readCmd) spinnerWriter(s *streams) io.Writer {
	switch {
	case c.quiet || c.json:
		return nil
	case c.spinnerTo != nil:
		return c.spinnerTo
	case isTerminal(s.stderr) && s.getenv("TERM") != "dumb":
		return s.stderr
	}
	return nil
}

// readPoll is the longest single long poll; read loops until its --timeout.
const readPoll = time.Minute

func (c *readCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("read")
	fs.BoolVar(&c.includeDiff, "include-diff", false, "include the turn's full unified diff")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "how long to wait for the result")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object (a messages.TurnResult)")
	fs.BoolVarP(&c.quiet, "quiet", "q", false, "no spinner while waiting (it shows only on a terminal anyway)")
	c.client.add(fs)
	return fs
}

func readCommand() command {
	return command{
		name:    "read",
		summary: "wait for a session's next result: turn_complete, clarification, ended, error or max_rounds",
		usage:   "read [flags] SESSION",
		flags:   func() *pflag.FlagSet { return (&readCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseReadFlags(args) },
	}
}

func parseReadFlags(args []string) (*readCmd, error) {
	const cmd = "read"
	c := &readCmd{}
	var err error
	if c.sid, err = parseSessionFlags(cmd, c.flagSet(), args); err != nil {
		return nil, err
	}
	if c.timeout <= 0 {
		return nil, usagef(cmd, "--timeout must be positive")
	}
	return c, nil
}

func (c *readCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "read"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	if w := c.spinnerWriter(s); w != nil {
		sp := &spinner{w: w, frame: 120 * time.Millisecond, refresh: 2 * time.Second, status: func(ctx context.Context) string {
			d, err := getSession(ctx, dc, c.sid, 0, 1)
			if err != nil {
				return ""
			}
			return fmt.Sprintf("%s %s, round %d", shortID(d.Record.SessionID), d.Record.Status, d.Record.RoundsElapsed)
		}}
		sp.start(ctx)
		defer sp.stop()
		c.stopSpinner = sp.stop
	}
	deadline := time.Now().Add(c.timeout)
	for {
		poll := min(time.Until(deadline), readPoll)
		if poll < time.Millisecond {
			return fmt.Errorf("read-turn: no result within %s", c.timeout)
		}
		var r messages.TurnResult
		err := dc.do(ctx, "POST", "/api/code-sessions/"+c.sid+"/read-turn",
			map[string]any{"includeDiff": c.includeDiff, "timeoutMs": poll.Milliseconds()}, &r)
		if messages.IsCode(err, messages.CodeTimeout) {
			continue // nothing yet: poll again
		}
		if err != nil {
			return remoteErr(cmd, "read-turn", err)
		}
		if c.stopSpinner != nil {
			c.stopSpinner() // the line is cleared before the result
		}
		if c.json {
			return writeJSON(s.stdout, r)
		}
		(&textPrinter{w: s.stdout, color: useColor("auto", s.stdout, s.getenv)}).result(r)
		if r.Kind == messages.KindClarification {
			fmt.Fprintf(s.stdout, "   answer: codesession answer %s %s allow|always|deny|cancel\n", c.sid, r.ClarificationID)
		}
		return nil
	}
}
