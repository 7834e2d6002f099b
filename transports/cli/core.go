package cli

import (
	"fmt"
	"sort"

	"github.com/codesession/codesession/messages"
)

// TurnEvent is an event with the turn it belongs to (0: the session's).
type TurnEvent struct {
	Turn int
	Ev   messages.Event
}

// Effects is what a core asks the shell to do after one step: events for
// the sink, lines for the CLI's stdin, a settle timer, and whether the
// running turn closed.
type Effects struct {
	Events []TurnEvent
	Writes [][]byte
	// Settle asks for the core's SettleTimeout(turn) after the shell's
	// settle delay (a core that sets it implements Settler).
	Settle bool
	// Closed says the running turn was closed by one of Events.
	Closed bool
	// Followups are requests of the host the shell sends after the step.
	Followups []Followup
}

// Followup is a request of the host a core asks for in a step: the shell
// sends it with a fresh id outside its mutex, waits for the reply (bounded
// by the control timeout), then writes Then to the same process whatever
// the reply was. Codex steers a deny's reason into the turn this way
// before it writes the decline, which carries no message.
type Followup struct {
	What   string // names it in errors
	Encode func(id string) []byte
	Then   [][]byte
}

// Emit queues ev for turn.
func (e *Effects) Emit(turn int, ev messages.Event) { e.Events = append(e.Events, TurnEvent{turn, ev}) }

// Write queues one stdin line (its newline included).
func (e *Effects) Write(b []byte) { e.Writes = append(e.Writes, b) }

// ExitKind says why the process ended, as far as the shell knows.
type ExitKind int

const (
	ExitInvalid   ExitKind = iota
	ExitOwn                // it exited by itself (or someone else killed it)
	ExitInterrupt          // the interrupt escalation signalled it
)

func (k ExitKind) String() string {
	switch k {
	case ExitOwn:
		return "own"
	case ExitInterrupt:
		return "interrupt"
	}
	return "invalid"
}

// Turn is the turn bookkeeping every core keeps: which turn runs, whether
// it is being interrupted, and whether the process is gone (Dead: the next
// turn starts it again) or died mid-turn (Fatal: no more turns).
type Turn struct {
	Number       int // the running turn, or the last one
	Running      bool
	Interrupting bool
	Dead         bool
	Fatal        bool
}

// EvTurn is the turn an event belongs to: the running one, else 0.
func (t *Turn) EvTurn() int {
	if t.Running {
		return t.Number
	}
	return 0
}

// Begin opens turn n: an error for a number below 1 or while a turn runs.
func (t *Turn) Begin(n int) error {
	if n < 1 {
		return messages.FieldError(messages.OpStart, "turn", "turn numbers start at 1, got %d", n)
	}
	if t.Running {
		return messages.Errorf(messages.CodeConflict, messages.OpStart, "turn %d is still running", t.Number)
	}
	t.Number, t.Running, t.Interrupting = n, true, false
	return nil
}

// Interrupt marks the running turn as interrupted; false when no turn runs,
// one is already being interrupted, or the process is gone.
func (t *Turn) Interrupt() bool {
	if !t.Running || t.Interrupting || t.Dead {
		return false
	}
	t.Interrupting = true
	return true
}

// End closes the running turn's bookkeeping; the caller emits the event
// that closes it, and e says the turn closed.
func (t *Turn) End(e *Effects) {
	t.Running, t.Interrupting = false, false
	e.Closed = true
}

// Detail is an exit for a message: "(exit status 1): the end of stderr".
func Detail(status, tail string) string {
	d := "(" + status + ")"
	if tail != "" {
		d += ": " + tail
	}
	return d
}

// OverCap is the error event of a stdout line dropped for its size.
func OverCap(name string, n, lineCap int) messages.Event {
	return messages.Event{Type: messages.EvError,
		Text: fmt.Sprintf("%s wrote a stdout line of %d bytes, over the %d-byte cap: the line was dropped", name, n, lineCap)}
}

// BadLine is the error event of a stdout line that does not decode.
func BadLine(name string, err error) messages.Event {
	return messages.Event{Type: messages.EvError, Text: name + " wrote a stdout line codesession cannot read: " + err.Error()}
}

// Asked is what a core keeps of the questions it raised: the pending ones
// by id, and every id it ever issued, so a late answer is a conflict and
// an unknown one not found.
type Asked[Q any] struct {
	pending map[string]Q
	issued  map[string]bool
}

// Ask records a pending question.
func (a *Asked[Q]) Ask(id string, q Q) {
	if a.pending == nil {
		a.pending, a.issued = map[string]Q{}, map[string]bool{}
	}
	a.pending[id], a.issued[id] = q, true
}

// Take removes and returns the pending question id, or the answer's error:
// conflict when it was asked and is no longer pending (why says how that
// happens), not found when it was never asked.
func (a *Asked[Q]) Take(id string, d messages.Decision, why string) (Q, error) {
	var zero Q
	if !d.Valid() {
		return zero, messages.FieldError(messages.OpAnswer, "decision", "unknown decision %q", d)
	}
	q, ok := a.pending[id]
	if !ok {
		if a.issued[id] {
			return zero, messages.Errorf(messages.CodeConflict, messages.OpAnswer, "clarification %q is not pending (%s)", id, why)
		}
		return zero, messages.Errorf(messages.CodeNotFound, messages.OpAnswer, "no clarification %q was raised in this session", id)
	}
	delete(a.pending, id)
	return q, nil
}

// Withdraw removes a pending question and reports whether it was pending.
func (a *Asked[Q]) Withdraw(id string) (Q, bool) {
	q, ok := a.pending[id]
	delete(a.pending, id)
	return q, ok
}

// Pending lists the ids of the pending questions, sorted.
func (a *Asked[Q]) Pending() []string {
	ids := make([]string, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Clear drops every pending question (the turn ended).
func (a *Asked[Q]) Clear() { clear(a.pending) }

// Exit takes the end of the process for a core whose turn bookkeeping is
// t: a turn being interrupted ends with interrupted (its EvTurnEnd), a
// running one with a fatal EvError (the session refuses further turns),
// else a warning between turns that says how the next turn starts it
// again (restart). end closes the core's own turn state first.
func (t *Turn) Exit(e *Effects, name string, how ExitKind, status, tail, restart string, interrupted messages.Event, end func(*Effects)) {
	t.Dead = true
	switch {
	case t.Running && how == ExitInterrupt:
		end(e)
		e.Emit(t.Number, interrupted)
	case t.Running:
		t.Fatal = true
		end(e)
		e.Emit(t.Number, messages.Event{Type: messages.EvError, Fatal: true, Text: name + " exited mid-turn " + Detail(status, tail)})
	default:
		e.Emit(0, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("%s exited between turns %s; the next turn starts it again%s", name, Detail(status, tail), restart)})
	}
}

// Signalled is the text of a turn the escalation ended.
func Signalled(name, status string) string {
	return "the turn was interrupted: " + name + " did not stop in time and was signalled (" + status + ")"
}
