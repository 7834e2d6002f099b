package grok

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
)

var (
	_ transports.Session       = (*session)(nil)
	_ transports.Interrupter   = (*session)(nil)
	_ transports.PostureSetter = (*session)(nil)
)

// session is one grok session: a UUID and the settings each turn's
// process is started with. A turn runs one process; its goroutine is the
// only caller of the sink while it runs (Open calls it once before).
type session struct {
	t    *Transport
	spec transports.SessionSpec
	sink transports.Sink
	bin  string
	ext  string

	mu          sync.Mutex
	wg          sync.WaitGroup
	closed      bool
	created     bool // grok holds the session: later turns --resume it
	dead        bool // grok never answered: the session refuses turns
	posture     messages.Posture
	running     bool
	turn        int
	cmd         *exec.Cmd
	interrupted bool
	input       string        // the running turn's input, for a retry with --resume
	done        chan struct{} // closed when the running turn's process is reaped
}

// StartTurn starts `grok -p input` as turn number turn.
func (s *session) StartTurn(ctx context.Context, turn int, input string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return messages.Errorf(messages.CodeNotLive, messages.OpStart, "the session is closed")
	case s.dead:
		return messages.Errorf(messages.CodeInternal, messages.OpStart, "backend exited: grok never answered a turn of this session; open a new one")
	case turn < 1:
		return messages.FieldError(messages.OpStart, "turn", "turn numbers start at 1, got %d", turn)
	case s.running:
		return messages.Errorf(messages.CodeConflict, messages.OpStart, "turn %d is still running", s.turn)
	}
	return s.spawnLocked(turn, input)
}

// spawnLocked starts the turn's process (s.mu held).
func (s *session) spawnLocked(turn int, input string) error {
	s.input = input
	prompt := input
	if s.spec.AppendSystemPrompt != "" && !s.created {
		// grok -p has no system-prompt flag: the first prompt carries it
		prompt = s.spec.AppendSystemPrompt + "\n\n" + input
	}
	cmd := exec.Command(s.bin, BuildArgs(s.spec, s.posture, s.ext, s.created, prompt)...)
	cmd.Dir = s.spec.Cwd
	cmd.Env = buildEnv(os.Environ(), s.spec, s.t.env)
	cmd.Stdin = nil
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot start grok: "+err.Error())
	}
	stderr := subprocess.NewTail(16 << 10)
	cmd.Stderr = stderr
	// under the watchdog, in the session's cgroup, confined like every
	// backend's process tree
	h, err := s.spec.Procs.Start(cmd, proc.Options{Confine: s.spec.Confine})
	if err != nil {
		return messages.Wrap(messages.CodeInternal, messages.OpStart, err, fmt.Sprintf("cannot start %s: %v", s.bin, err))
	}
	s.running, s.turn, s.cmd, s.interrupted = true, turn, cmd, false
	s.done = make(chan struct{})
	s.wg.Add(1)
	go s.run(turn, cmd, h, stdout, stderr, s.done)
	return nil
}

// run reads the turn's stdout (lines capped, the whole output buffered),
// waits for the process and turns its one object into events.
func (s *session) run(turn int, cmd *exec.Cmd, h *proc.Handle, stdout io.ReadCloser, stderr *subprocess.Tail, done chan struct{}) {
	defer s.wg.Done()
	var evs []messages.Event
	var buf bytes.Buffer
	lr := transports.NewLineReader(stdout, s.t.lineCap)
	over := false
	for {
		line, n, err := lr.Next()
		if err != nil {
			break
		}
		if n > 0 {
			evs = append(evs, messages.Event{Type: messages.EvError,
				Text: fmt.Sprintf("grok wrote a stdout line of %d bytes, over the %d-byte cap: the line was dropped", n, s.t.lineCap)})
			continue
		}
		if buf.Len()+len(line) > s.t.outputCap {
			over = true
			continue
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	werr := cmd.Wait()
	h.Release() // kills whatever is left of the group
	close(done)
	if over {
		evs = append(evs, messages.Event{Type: messages.EvError,
			Text: fmt.Sprintf("grok wrote more than %d bytes in one turn: the rest was dropped", s.t.outputCap)})
	}
	status := "exit status 0"
	if werr != nil {
		status = werr.Error()
	}

	s.mu.Lock()
	interrupted := s.interrupted
	s.mu.Unlock()
	res, junk, perr := ParseOutput(buf.Bytes())
	if junk != "" {
		evs = append(evs, messages.Event{Type: messages.EvError, Text: "grok wrote output codesession cannot read: " + clip(junk, 300)})
	}
	if perr == nil && res.IsError && !interrupted && strings.Contains(res.Message, "already exists; use --resume") {
		// an interrupted turn left grok holding the session it was pinned
		// to before it ever answered: the same turn again, resuming it
		s.mu.Lock()
		if !s.created && !s.closed {
			s.created, s.running = true, false
			if err := s.spawnLocked(turn, s.input); err == nil {
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
	}
	fatal := false
	var end messages.Event
	switch {
	case interrupted:
		end = messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted,
			Text: fmt.Sprintf("the turn was interrupted (%s)", status)}
		if perr == nil && !res.IsError {
			end.Text = res.Text
		}
	case perr == nil && res.IsError:
		end = messages.Event{Type: messages.EvTurnEnd, State: messages.TurnErrored, Text: "grok: " + res.Message}
	case perr == nil:
		if res.Thought != "" {
			evs = append(evs, messages.Event{Type: messages.EvThinking, Text: res.Thought})
		}
		if res.Text != "" {
			evs = append(evs, messages.Event{Type: messages.EvText, Text: res.Text})
		}
		if res.SessionID != "" && res.SessionID != s.ext {
			evs = append(evs, messages.Event{Type: messages.EvWarning,
				Text: fmt.Sprintf("grok answered for session %s, not the pinned %s", res.SessionID, s.ext)})
		}
		if strings.EqualFold(res.StopReason, "Cancelled") {
			evs = append(evs, messages.Event{Type: messages.EvWarning,
				Text: fmt.Sprintf("grok cancelled a call that needed approval (--permission-mode %s has no approval channel headless): nothing it wanted to change was changed", PermissionMode(s.posture))})
		}
		end = messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted, Text: res.Text, NumTurns: 1}
	default:
		detail := fmt.Sprintf("grok printed no result (%s): %s", status, firstNonEmpty(stderr.Text(1500), "no output on stderr"))
		s.mu.Lock()
		neverAnswered := !s.created
		s.mu.Unlock()
		if neverAnswered {
			// it never held a session: a broken install, not a bad turn
			fatal = true
			end = messages.Event{Type: messages.EvError, Fatal: true, Text: detail}
		} else {
			end = messages.Event{Type: messages.EvTurnEnd, State: messages.TurnErrored, Text: detail}
		}
	}

	s.mu.Lock()
	if perr == nil && !res.IsError {
		s.created = true
	}
	if fatal {
		s.dead = true
	}
	s.running, s.cmd = false, nil
	closed := s.closed
	s.mu.Unlock()
	// outside the lock, so the sink may call the session; Close waits for
	// this goroutine, so no event arrives after Close returned
	if closed {
		return
	}
	for _, ev := range evs {
		s.sink(turn, ev)
	}
	s.sink(turn, end)
}

// Answer: grok -p has no approval channel, so no clarification is ever
// raised.
func (s *session) Answer(ctx context.Context, clarificationID string, decision messages.Decision, reason string) error {
	if !decision.Valid() {
		return messages.FieldError(messages.OpAnswer, "decision", "unknown decision %q", decision)
	}
	return messages.Errorf(messages.CodeNotFound, messages.OpAnswer, "no clarification %q was raised: grok never asks", clarificationID)
}

// Interrupt signals the running turn's process group (SIGINT, then
// SIGTERM and SIGKILL after the deadlines); the turn ends interrupted.
func (s *session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	if s.closed || !s.running || s.interrupted {
		s.mu.Unlock()
		return nil
	}
	s.interrupted = true
	pid, done := s.cmd.Process.Pid, s.done
	s.mu.Unlock()
	subprocess.Signal(pid, syscall.SIGINT)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		d := s.t.deadlines
		subprocess.Escalate(pid, []subprocess.Step{{Wait: d.AfterINT, Signal: syscall.SIGTERM}, {Wait: d.AfterTERM, Signal: syscall.SIGKILL}}, nil, done)
	}()
	return nil
}

// SetPosture sets the --permission-mode of the next turn.
func (s *session) SetPosture(ctx context.Context, p messages.Posture) error {
	if PermissionMode(p) == "" {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return messages.Errorf(messages.CodeNotLive, messages.OpSetPosture, "the session is closed")
	}
	s.posture = p
	return nil
}

// Close kills a running turn's process group and waits for its goroutine;
// no sink call starts once it is called. It is idempotent.
func (s *session) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	if s.cmd != nil && s.cmd.Process != nil {
		pid, done := s.cmd.Process.Pid, s.done
		subprocess.Signal(pid, syscall.SIGTERM)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			subprocess.Escalate(pid, []subprocess.Step{{Wait: 2 * time.Second, Signal: syscall.SIGKILL}}, nil, done)
		}()
	}
	s.mu.Unlock()
	waited := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
		return messages.Wrap(messages.CodeTimeout, "close", ctx.Err(), "the grok turn did not stop in time")
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
