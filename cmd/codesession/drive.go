package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/messages"
)

// opTimeout bounds every op but read-turn (which has its own --timeout), and
// the cleanup after the command's context has ended.
const opTimeout = time.Minute

// cliScope is the owner scope of every session this process starts.
func cliScope() string { return fmt.Sprintf("cli:%d", os.Getpid()) }

// answerPolicy is how clarifications are answered: allow, deny or ask.
type answerPolicy string

const (
	answerAllow answerPolicy = "allow"
	answerDeny  answerPolicy = "deny"
	answerAsk   answerPolicy = "ask"
)

func parseAnswerPolicy(s string) (answerPolicy, bool) {
	switch p := answerPolicy(s); p {
	case answerAllow, answerDeny, answerAsk:
		return p, true
	}
	return "", false
}

// driver drives one session from its first read-turn to its stop: it
// prints every result, answers clarifications, sends the queued guidance
// after each completed turn, and stops with the inferred verdict.
type driver struct {
	rt          *actors.Runtime
	scope       string
	out         printer
	policy      answerPolicy
	prompt      *prompter // for policy ask
	guides      []string
	readTimeout time.Duration
}

// driveResult is how a driven session ended.
type driveResult struct {
	last    messages.TurnResult // the last read-turn result (zero if none)
	stop    messages.StopResult
	stopped bool  // stop succeeded
	err     error // the op that broke the loop, if any
}

// failure says why the session counts as failed (exit 1), or "" when it did not.
func (r driveResult) failure() string {
	switch {
	case r.err != nil:
		return r.err.Error()
	case r.last.Kind == messages.KindError:
		return "the session ended in error: " + r.last.Message
	case r.stop.Outcome == messages.OutcomeFailed:
		return "the session's verdict is failed"
	case !r.stopped:
		return "the session could not be stopped"
	}
	return ""
}

// drive runs the session sid to its end. It always tries to stop the
// session, with a fresh deadline when ctx has already ended.
func (d *driver) drive(ctx context.Context, sid string) driveResult {
	var res driveResult
	guides := d.guides
loop:
	for {
		rctx, cancel := context.WithTimeout(ctx, d.readTimeout)
		r, err := d.rt.ReadTurn(rctx, d.scope, messages.ReadTurn{SessionID: sid})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("interrupted while waiting for the session: %w", context.Cause(ctx))
			}
			res.err = opErr("read-turn", err)
			break
		}
		res.last = r
		d.out.result(r)
		switch r.Kind {
		case messages.KindClarification:
			decision, reason, err := d.decide(ctx, r)
			if err != nil {
				res.err = err
				break loop
			}
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			_, err = d.rt.Answer(octx, d.scope, messages.Answer{SessionID: sid, ClarificationID: r.ClarificationID, Decision: decision, Reason: reason})
			cancel()
			if err != nil {
				res.err = opErr("answer", err)
				break loop
			}
			d.out.answered(decision, reason)
		case messages.KindTurnComplete:
			if len(guides) == 0 {
				break loop
			}
			text := guides[0]
			guides = guides[1:]
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			_, err := d.rt.Guide(octx, d.scope, messages.Guide{SessionID: sid, Text: text, Mode: messages.GuideQueue, Source: messages.SourceUser})
			cancel()
			if err != nil {
				res.err = opErr("guide", err)
				break loop
			}
			d.out.guided(text)
		default: // ended, error, max_rounds
			break loop
		}
	}
	if len(guides) > 0 {
		d.out.note("note: %d guidance message(s) were not sent: the session ended first", len(guides))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	stop, err := d.rt.Stop(sctx, d.scope, messages.Stop{SessionID: sid})
	if err != nil {
		if res.err == nil {
			res.err = opErr("stop", err)
		} else {
			d.out.note("error: %v", opErr("stop", err))
		}
		return res
	}
	res.stop, res.stopped = stop, true
	d.out.stopped(sid, stop)
	return res
}

// decide answers a clarification by the policy.
func (d *driver) decide(ctx context.Context, r messages.TurnResult) (messages.Decision, string, error) {
	switch d.policy {
	case answerAllow:
		return messages.DecisionAllowOnce, "", nil
	case answerAsk:
		return d.prompt.ask(ctx, r)
	default:
		return messages.DecisionDeny, "denied by the operator's --answer deny", nil
	}
}

// prompter asks the person at the terminal: it writes the question to w and
// reads one line from r per question.
type prompter struct {
	w    io.Writer
	r    *bufio.Reader
	echo bool // the input is not a terminal: show what was read
}

func newPrompter(r io.Reader, w io.Writer) *prompter {
	echo := true
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			echo = false
		}
	}
	return &prompter{w: w, r: bufio.NewReader(r), echo: echo}
}

// ask reads y/yes (allow once), a/always (allow for the session) or
// anything else (deny; the typed text is the reason). A closed input denies.
func (p *prompter) ask(ctx context.Context, r messages.TurnResult) (messages.Decision, string, error) {
	fmt.Fprintf(p.w, "Allow %s %s?\n  [y]es once, [a]lways this session, anything else denies (the text is the reason): ",
		r.ToolName, compactJSON(r.Input, 300))
	type read struct {
		line string
		err  error
	}
	ch := make(chan read, 1)
	go func() {
		line, err := p.r.ReadString('\n')
		ch <- read{line, err}
	}()
	var got read
	select {
	case got = <-ch:
	case <-ctx.Done():
		fmt.Fprintln(p.w)
		return "", "", fmt.Errorf("no answer: %w", ctx.Err())
	}
	line := strings.TrimSpace(got.line)
	if got.err != nil && line == "" {
		fmt.Fprintln(p.w)
		return messages.DecisionDeny, "no answer: the terminal's input was closed", nil
	}
	if p.echo {
		fmt.Fprintln(p.w, line)
	}
	switch strings.ToLower(line) {
	case "y", "yes":
		return messages.DecisionAllowOnce, "", nil
	case "a", "always":
		return messages.DecisionAllowSession, "", nil
	case "", "n", "no":
		return messages.DecisionDeny, "denied at the terminal", nil
	}
	return messages.DecisionDeny, cutUTF8(line, messages.MaxReasonBytes), nil
}

// sessionOpts are how runSession drives and prints a session.
type sessionOpts struct {
	live        *liveText // text deltas as they arrive (text mode only)
	json        bool
	policy      answerPolicy
	guides      []string
	readTimeout time.Duration
}

// runSession starts a session with op in rt, drives it to its stop and
// prints it. It returns the session id (empty when start failed) and an
// error that decides the exit code: a usage error when start was refused
// for what was asked, a *failedError when the session failed.
func runSession(ctx context.Context, s *streams, rt *actors.Runtime, cmd string, op messages.Start, o sessionOpts) (string, error) {
	out := newPrinter(o.json, s.stdout, s.stderr, op.Cwd)
	if tp, ok := out.(*textPrinter); ok {
		tp.live = o.live
		if o.live != nil {
			tp.w = o.live.printerWriter()
		}
	}
	scope := cliScope()
	sctx, cancel := context.WithTimeout(ctx, opTimeout)
	st, err := rt.Start(sctx, scope, op)
	cancel()
	if err != nil {
		return "", rejected(cmd, opErr("start", err))
	}
	var desc messages.Descriptor
	if t, err := rt.Backends().Get(st.Backend); err == nil {
		desc = t.Descriptor()
	}
	out.started(st, desc)
	d := &driver{rt: rt, scope: scope, out: out, policy: o.policy, guides: o.guides, readTimeout: o.readTimeout}
	if o.policy == answerAsk {
		d.prompt = newPrompter(s.stdin, s.stderr)
	}
	res := d.drive(ctx, st.SessionID)
	if why := res.failure(); why != "" {
		return st.SessionID, &failedError{reason: why}
	}
	return st.SessionID, nil
}

// closeRuntime closes rt with a fresh deadline, reporting a failure on stderr.
func closeRuntime(ctx context.Context, s *streams, rt *actors.Runtime) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	if err := rt.Close(cctx); err != nil {
		fmt.Fprintf(s.stderr, "codesession: closing the runtime: %v\n", err)
	}
}

// opErr names the op an error came from, unless the error already does.
func opErr(op string, err error) error {
	var e *messages.Error
	if errors.As(err, &e) && e.Op == op {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}
