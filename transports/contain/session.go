package contain

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
)

// session is a contained backend session.
//
// Two locks: emitMu orders every call of sink (the backend's events, the
// wall clock's warning and end) and is held across it, which may wait
// while the session is behind its store (backpressure); mu guards the
// fields and is never held across sink, so a command (StartTurn, Answer,
// ...) never waits behind an event the session is not taking yet, and the
// session's commands return at once when its backend's do
// (transports.Prompt). emitMu is always taken before mu.
type session struct {
	emitMu sync.Mutex
	mu     sync.Mutex
	inner  transports.Session
	sink   transports.Sink
	redact *redactor
	group  *proc.Group
	wall   time.Duration
	grace  time.Duration
	// applied is the session's confinement, put on the backend's first
	// started event of this run (and so on the record's run)
	applied *messages.Applied
	started bool

	turn    int  // the last turn started
	open    bool // it has not ended yet
	timer   *time.Timer
	clocked map[int]bool // turns the runtime ended itself: the backend's late end is dropped
	closed  bool
}

var (
	_ transports.Session       = (*session)(nil)
	_ transports.Interrupter   = (*session)(nil)
	_ transports.Steerer       = (*session)(nil)
	_ transports.ModelSetter   = (*session)(nil)
	_ transports.PostureSetter = (*session)(nil)
	_ transports.Prompt        = (*session)(nil)
)

func (s *session) backend() transports.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inner
}

// closes reports whether ev ends its turn.
func closes(ev messages.Event) bool {
	return ev.Type == messages.EvTurnEnd || ev.Type == messages.EvEnded || (ev.Type == messages.EvError && ev.Fatal)
}

// fromBackend is the sink the backend sees.
func (s *session) fromBackend(turn int, ev messages.Event) {
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	if s.take(turn, &ev) {
		s.sink(turn, s.redact.event(ev))
	}
}

// take updates the session's state for the backend's ev, and reports
// whether ev goes on.
func (s *session) take(turn int, ev *messages.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Type == messages.EvTurnEnd && s.clocked[turn] {
		return false // the runtime already ended this turn at its wall clock
	}
	if closes(*ev) && turn == s.turn && s.open {
		s.stopClock()
	}
	if ev.Type == messages.EvStarted && !s.started {
		s.started = true
		if w := s.group.Writable(); len(w) > 0 && s.applied != nil && s.applied.LandlockABI > 0 {
			// exactly what the rules of the processes started so far were
			// built from (a backend adds folders at its start)
			s.applied.Writable = w
		}
		ev.Containment = s.applied
	}
	return true
}

func (s *session) stopClock() {
	s.open = false
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// StartTurn starts the turn's wall clock, then the backend's turn.
func (s *session) StartTurn(ctx context.Context, turn int, input string) error {
	s.mu.Lock()
	s.stopClock()
	s.turn, s.open = turn, true
	if s.wall > 0 {
		s.timer = time.AfterFunc(s.wall, func() { s.overTime(turn) })
	}
	inner := s.inner
	s.mu.Unlock()
	err := inner.StartTurn(ctx, turn, input)
	if err != nil {
		s.mu.Lock()
		if s.turn == turn {
			s.stopClock()
		}
		s.mu.Unlock()
	}
	return err
}

// overTime interrupts a turn past its wall clock and ends it after the
// grace period if the backend has not.
func (s *session) overTime(turn int) {
	s.emitMu.Lock()
	s.mu.Lock()
	if s.closed || !s.open || s.turn != turn {
		s.mu.Unlock()
		s.emitMu.Unlock()
		return
	}
	inner := s.inner
	s.timer = time.AfterFunc(s.grace, func() { s.endOverTime(turn) })
	s.mu.Unlock()
	s.sink(turn, messages.Event{Type: messages.EvWarning,
		Text: fmt.Sprintf("turn %d ran past its wall clock of %s: the runtime interrupts it", turn, s.wall)})
	s.emitMu.Unlock()
	if i, ok := inner.(transports.Interrupter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), s.grace)
		defer cancel()
		if err := i.Interrupt(ctx); err != nil {
			s.emitMu.Lock()
			if !s.isClosed() {
				s.sink(turn, messages.Event{Type: messages.EvWarning, Text: "interrupting the over-time turn failed: " + err.Error()})
			}
			s.emitMu.Unlock()
		}
	}
}

func (s *session) endOverTime(turn int) {
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	s.mu.Lock()
	if s.closed || !s.open || s.turn != turn {
		s.mu.Unlock()
		return
	}
	s.stopClock()
	s.clocked[turn] = true
	s.mu.Unlock()
	s.sink(turn, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted,
		Text: fmt.Sprintf("the turn ran past its wall clock of %s and did not stop within %s of the interrupt: the runtime ended it", s.wall, s.grace)})
}

func (s *session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Prompt is the backend session's (transports.Prompt): what the wrapper
// adds to a command (its wall clock's timer, under mu, which no sink call
// holds) never blocks.
func (s *session) Prompt() bool {
	p, ok := s.backend().(transports.Prompt)
	return ok && p.Prompt()
}

// Answer is the backend's.
func (s *session) Answer(ctx context.Context, id string, d messages.Decision, reason string) error {
	return s.backend().Answer(ctx, id, d, reason)
}

// Interrupt is the backend's, or unsupported.
func (s *session) Interrupt(ctx context.Context) error {
	if i, ok := s.backend().(transports.Interrupter); ok {
		return i.Interrupt(ctx)
	}
	return messages.Errorf(messages.CodeUnsupported, messages.OpInterrupt, "backend cannot interrupt")
}

// Steer is the backend's, or unsupported.
func (s *session) Steer(ctx context.Context, text string) error {
	if i, ok := s.backend().(transports.Steerer); ok {
		return i.Steer(ctx, text)
	}
	return messages.Errorf(messages.CodeUnsupported, messages.OpGuide, "backend cannot steer")
}

// SetModel is the backend's, or unsupported.
func (s *session) SetModel(ctx context.Context, model string, effort messages.Effort) error {
	if i, ok := s.backend().(transports.ModelSetter); ok {
		return i.SetModel(ctx, model, effort)
	}
	return messages.Errorf(messages.CodeUnsupported, messages.OpGuide, "backend cannot switch model")
}

// SetPosture is the backend's, or unsupported.
func (s *session) SetPosture(ctx context.Context, p messages.Posture) error {
	if i, ok := s.backend().(transports.PostureSetter); ok {
		return i.SetPosture(ctx, p)
	}
	return messages.Errorf(messages.CodeUnsupported, messages.OpSetPosture, "backend cannot change posture live")
}

// Close closes the backend, then kills and removes the session's cgroup.
func (s *session) Close(ctx context.Context) error {
	// emitMu first: once closed is set, no wall-clock event is sent (a
	// sink call in progress ends first, as it did when one lock held both)
	s.emitMu.Lock()
	s.mu.Lock()
	s.closed = true
	s.stopClock()
	inner := s.inner
	s.mu.Unlock()
	s.emitMu.Unlock()
	err := inner.Close(ctx)
	s.group.Close()
	return err
}
