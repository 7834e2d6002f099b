package transporttest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
)

// Record is one Sink call.
type Record struct {
	// Seq is the call's position, from 1.
	Seq   int
	Turn  int
	Event messages.Event
}

// String renders the record as one short line with the fields its type
// uses; long texts are cut.
func (r Record) String() string {
	return fmt.Sprintf("#%d turn %d: %s", r.Seq, r.Turn, Brief(r.Event))
}

// Brief renders an event as one short line with the fields its type uses.
func Brief(ev messages.Event) string {
	switch ev.Type {
	case messages.EvStarted:
		return fmt.Sprintf("started ext=%q model=%q", ev.ExternalSessionID, ev.Model)
	case messages.EvText, messages.EvThinking:
		s := string(ev.Type)
		if ev.Delta {
			s += "~"
		}
		return fmt.Sprintf("%s %q", s, cut(ev.Text))
	case messages.EvToolUse:
		return fmt.Sprintf("tool_use %s %s %s", ev.ToolUseID, ev.ToolName, cut(string(ev.Input)))
	case messages.EvToolResult:
		s := "tool_result " + ev.ToolUseID
		if ev.IsError {
			s += " ERROR"
		}
		if ev.Truncated || ev.OriginalBytes != 0 {
			s += fmt.Sprintf(" truncated=%v(%d of %d bytes)", ev.Truncated, len(ev.Output), ev.OriginalBytes)
		}
		return s + fmt.Sprintf(" %q", cut(ev.Output))
	case messages.EvClarification:
		return fmt.Sprintf("clarification %s %s %s %s", ev.ClarificationID, ev.ToolName, cut(string(ev.Input)), ev.Decision)
	case messages.EvTurnEnd:
		return fmt.Sprintf("turn_end %s %q", ev.State, cut(ev.Text))
	case messages.EvError:
		if ev.Fatal {
			return fmt.Sprintf("error FATAL %q", cut(ev.Text))
		}
		return fmt.Sprintf("error %q", cut(ev.Text))
	case messages.EvEnded, messages.EvWarning:
		return fmt.Sprintf("%s %q", ev.Type, cut(ev.Text))
	}
	return fmt.Sprintf("%s %q", ev.Type, cut(ev.Text))
}

func cut(s string) string {
	const max = 160
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("...(%d bytes)", len(s))
}

// Closes reports whether ev, carried with turn number turn, closes that
// turn: an EvTurnEnd, an EvEnded or a fatal EvError.
func Closes(ev messages.Event) bool {
	return ev.Type == messages.EvTurnEnd || ev.Type == messages.EvEnded ||
		(ev.Type == messages.EvError && ev.Fatal)
}

// transportTypes are the event types a transport may emit: the agent
// events, and EvClarification, which a transport raises and the runtime
// annotates with the answer.
var transportTypes = map[messages.EventType]bool{
	messages.EvStarted: true, messages.EvText: true, messages.EvThinking: true, messages.EvToolUse: true,
	messages.EvToolResult: true, messages.EvTurnEnd: true, messages.EvEnded: true, messages.EvError: true,
	messages.EvWarning: true, messages.EvClarification: true,
}

// Recorder is a transports.Sink that keeps every event and checks, as they
// arrive, the invariants every backend's event stream keeps:
//
//   - EvStarted comes first, once, with a non-empty ExternalSessionID, and
//     carries turn 0 or the number of the first turn (a backend that learns
//     its id from the first turn's output). With Faulty set, EvError and
//     EvWarning may come before it and it may be missing.
//   - Only the events a transport emits arrive (agent events and
//     EvClarification without a Decision).
//   - Every event carries the turn it belongs to: a turn the host started
//     (TurnStarting) and that is not closed yet, or 0 for a session-level
//     EvStarted, EvWarning or non-fatal EvError. A fatal EvError while a turn
//     runs must carry that turn. After a turn's closing event only EvWarning
//     may still carry its number.
//   - Each turn is closed by exactly one closing event (see Closes); after a
//     fatal EvError or EvEnded only EvWarning may arrive.
//   - EvToolUse has a unique ToolUseID and a ToolName; EvToolResult names a
//     ToolUseID used earlier in the same turn, once.
//   - Truncated is set exactly when OriginalBytes is; with OutputCap set, an
//     output longer than the cap is Truncated, and a Truncated one was over it.
//   - EvClarification has a ClarificationID and a ToolName.
//   - Nothing arrives after Close returned (MarkClosed).
//
// Check adds the end-of-session rule: every started turn was closed once,
// unless it was still running when Close was called.
//
// A Recorder is safe for concurrent use. Its Sink never blocks for long
// and calls nothing of the session, so a transport may call it from any
// goroutine, holding any lock.
type Recorder struct {
	// OutputCap, when > 0, is the session's cap on tool outputs. Set it
	// before the session opens.
	OutputCap int
	// Faulty relaxes the start rule for a session that is meant to fail:
	// EvError and EvWarning may precede EvStarted, which may be missing.
	// Set it before the session opens.
	Faulty bool

	mu         sync.Mutex
	recs       []Record
	changed    chan struct{} // closed and replaced on every event
	violations []string

	started   map[int]bool // turns the host started
	order     []int        // the started turns, in order
	refused   map[int]bool // StartTurn failed
	closedBy  map[int]int  // turn -> seq of its closing event
	closings  map[int]int  // turn -> number of closing events
	toolUses  map[string]int
	results   map[string]bool
	startSeq  int // seq of EvStarted, 0 before it
	deadSeq   int // seq of a fatal EvError or EvEnded
	closing   bool
	cutTurn   int // the turn running when Close was called
	closedSet bool
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{
		changed:  make(chan struct{}),
		started:  map[int]bool{},
		refused:  map[int]bool{},
		closedBy: map[int]int{},
		closings: map[int]int{},
		toolUses: map[string]int{},
		results:  map[string]bool{},
	}
}

// TurnStarting records that the host is about to call StartTurn for turn
// n; call it before StartTurn, since events may arrive before it returns.
func (r *Recorder) TurnStarting(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n < 1 {
		r.violations = append(r.violations, fmt.Sprintf("host bug: turn numbers start at 1, got %d", n))
	}
	if r.started[n] {
		r.violations = append(r.violations, fmt.Sprintf("host bug: turn %d started twice", n))
	}
	r.started[n] = true
	r.order = append(r.order, n)
}

// TurnRefused records that StartTurn for turn n returned an error: no
// event may carry n, and n need not be closed.
func (r *Recorder) TurnRefused(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused[n] = true
	for _, rec := range r.recs {
		if rec.Turn == n {
			r.violations = append(r.violations, fmt.Sprintf("%v: StartTurn(%d) failed, yet an event carries its number", rec, n))
			break
		}
	}
}

// Closing records that the host is calling Close: the turn running now
// need not be closed.
func (r *Recorder) Closing() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closing {
		r.closing = true
		r.cutTurn = r.runningLocked()
	}
}

// MarkClosed records that Close returned nil: any later Sink call is a
// violation.
func (r *Recorder) MarkClosed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closing {
		r.closing = true
		r.cutTurn = r.runningLocked()
	}
	r.closedSet = true
}

// runningLocked is the turn that is started and neither refused nor
// closed, or 0.
func (r *Recorder) runningLocked() int {
	if len(r.order) == 0 {
		return 0
	}
	n := r.order[len(r.order)-1]
	if r.refused[n] || r.closings[n] > 0 || r.deadSeq > 0 {
		return 0
	}
	return n
}

// Sink is the transports.Sink to hand to Open.
func (r *Recorder) Sink(turn int, ev messages.Event) {
	r.mu.Lock()
	rec := Record{Seq: len(r.recs) + 1, Turn: turn, Event: ev}
	r.recs = append(r.recs, rec)
	r.check(rec)
	ch := r.changed
	r.changed = make(chan struct{})
	r.mu.Unlock()
	close(ch)
}

// check applies the invariants to one new record; r.mu is held.
func (r *Recorder) check(rec Record) {
	ev, turn := rec.Event, rec.Turn
	bad := func(format string, args ...any) {
		r.violations = append(r.violations, fmt.Sprintf("%v: %s", rec, fmt.Sprintf(format, args...)))
	}
	if r.closedSet {
		bad("arrived after Close returned")
	}
	if !transportTypes[ev.Type] {
		bad("type %q is not an event a transport emits", ev.Type)
	}
	if r.deadSeq > 0 && ev.Type != messages.EvWarning {
		bad("arrived after the session ended at event #%d (fatal EvError or EvEnded)", r.deadSeq)
	}

	// The start rule.
	if ev.Type == messages.EvStarted {
		switch {
		case r.startSeq > 0:
			bad("a second EvStarted (the first is #%d): a session starts once", r.startSeq)
		case rec.Seq > 1 && !r.Faulty:
			bad("EvStarted is not the first event")
		case rec.Seq > 1:
			for _, p := range r.recs[:rec.Seq-1] {
				if p.Event.Type != messages.EvError && p.Event.Type != messages.EvWarning {
					bad("EvStarted comes after %v", p)
					break
				}
			}
		}
		if ev.ExternalSessionID == "" {
			bad("EvStarted without the backend's ExternalSessionID")
		}
		if turn != 0 && (len(r.order) == 0 || turn != r.order[0]) {
			bad("EvStarted carries turn %d: want 0, or the number of the first turn", turn)
		}
		if r.startSeq == 0 {
			r.startSeq = rec.Seq
		}
	} else if r.startSeq == 0 && !(r.Faulty && (ev.Type == messages.EvError || ev.Type == messages.EvWarning)) {
		bad("arrived before EvStarted, which comes first")
	}

	// The turn rule.
	running := r.runningLocked()
	switch {
	case turn < 0:
		bad("negative turn number")
	case turn == 0:
		switch {
		case ev.Type == messages.EvStarted, ev.Type == messages.EvWarning:
		case ev.Type == messages.EvError && !ev.Fatal:
		case ev.Type == messages.EvError && ev.Fatal:
			if running != 0 {
				bad("a fatal EvError while turn %d runs must carry that turn's number, or the turn is never closed", running)
			}
		default:
			bad("turn 0 is only for session-level EvStarted, EvWarning and EvError; a %s belongs to a turn", ev.Type)
		}
	case !r.started[turn]:
		bad("turn %d was never started", turn)
	case r.refused[turn]:
		bad("StartTurn(%d) failed, yet an event carries its number", turn)
	case r.closings[turn] > 0 && ev.Type != messages.EvWarning:
		bad("turn %d was already closed by #%d", turn, r.closedBy[turn])
	case turn != running && ev.Type != messages.EvWarning && r.closings[turn] == 0 && r.deadSeq == 0:
		bad("turn %d is not the running turn (%d)", turn, running)
	}

	// Per type.
	switch ev.Type {
	case messages.EvTurnEnd:
		if turn == 0 {
			bad("EvTurnEnd must carry the number of the turn it closes")
		}
		if !ev.State.Valid() {
			bad("EvTurnEnd with invalid State %q", ev.State)
		}
	case messages.EvToolUse:
		if ev.ToolUseID == "" || ev.ToolName == "" {
			bad("EvToolUse needs a ToolUseID and a ToolName")
		}
		if _, dup := r.toolUses[ev.ToolUseID]; dup && ev.ToolUseID != "" {
			bad("ToolUseID %q used twice", ev.ToolUseID)
		}
		r.toolUses[ev.ToolUseID] = turn
	case messages.EvToolResult:
		t, known := r.toolUses[ev.ToolUseID]
		switch {
		case ev.ToolUseID == "":
			bad("EvToolResult without a ToolUseID")
		case !known:
			bad("EvToolResult for %q, which no earlier EvToolUse announced: results follow their tool uses", ev.ToolUseID)
		case t != turn:
			bad("EvToolResult for %q carries turn %d; its EvToolUse carried %d", ev.ToolUseID, turn, t)
		case r.results[ev.ToolUseID]:
			bad("a second EvToolResult for %q", ev.ToolUseID)
		}
		r.results[ev.ToolUseID] = true
		if ev.Truncated != (ev.OriginalBytes > 0) {
			bad("Truncated=%v with OriginalBytes=%d: a cut output says how long it was, and only a cut one", ev.Truncated, ev.OriginalBytes)
		}
		if r.OutputCap > 0 {
			if ev.Truncated && ev.OriginalBytes <= r.OutputCap {
				bad("Truncated, yet the original (%d bytes) is within the cap (%d)", ev.OriginalBytes, r.OutputCap)
			}
			if !ev.Truncated && len(ev.Output) > r.OutputCap {
				bad("a %d-byte output over the %d-byte cap is not Truncated", len(ev.Output), r.OutputCap)
			}
		}
	case messages.EvClarification:
		if ev.ClarificationID == "" || ev.ToolName == "" {
			bad("EvClarification needs a ClarificationID and a ToolName")
		}
		if ev.Decision != "" {
			bad("a transport raises clarifications; the runtime annotates the decision (Decision=%q)", ev.Decision)
		}
		if turn == 0 {
			bad("EvClarification must carry the number of the turn that asks")
		}
	}

	if Closes(ev) {
		if turn > 0 {
			r.closings[turn]++
			if r.closings[turn] == 1 { // a second one was reported by the turn rule
				r.closedBy[turn] = rec.Seq
			}
		}
		if ev.Type != messages.EvTurnEnd && r.deadSeq == 0 {
			r.deadSeq = rec.Seq
		}
	}
}

// Records returns a copy of every event so far.
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.recs...)
}

// Turn returns the events that carry turn number n.
func (r *Recorder) Turn(n int) []messages.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return turnEvents(r.recs, n)
}

func turnEvents(recs []Record, n int) []messages.Event {
	var out []messages.Event
	for _, rec := range recs {
		if rec.Turn == n {
			out = append(out, rec.Event)
		}
	}
	return out
}

// Started returns the EvStarted event, if one arrived.
func (r *Recorder) Started() (messages.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.startSeq == 0 {
		return messages.Event{}, false
	}
	return r.recs[r.startSeq-1].Event, true
}

// Dead reports whether the session ended itself (a fatal EvError or EvEnded).
func (r *Recorder) Dead() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deadSeq > 0
}

// Violations returns the invariant violations seen so far.
func (r *Recorder) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.violations...)
}

// Check returns every violation, adding the end-of-session rule: each
// started turn that StartTurn accepted was closed exactly once, unless it
// was running when Close was called. Call it once the session is closed.
func (r *Recorder) Check() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]string(nil), r.violations...)
	for _, n := range r.order {
		if r.refused[n] || r.closings[n] > 0 || (r.closing && n == r.cutTurn) {
			continue
		}
		out = append(out, fmt.Sprintf("turn %d was started and never closed (want one EvTurnEnd, EvEnded or fatal EvError carrying %d)", n, n))
	}
	return out
}

// Transcript renders every event, one per line, for failure messages.
func (r *Recorder) Transcript() string {
	recs := r.Records()
	if len(recs) == 0 {
		return "  (no events)"
	}
	lines := make([]string, len(recs))
	for i, rec := range recs {
		lines[i] = "  " + rec.String()
	}
	return strings.Join(lines, "\n")
}

// Wait blocks until pred, called with every event so far, returns true,
// and returns those events; false means timeout passed first. pred is
// called with the recorder's lock held: it must not call the recorder.
func (r *Recorder) Wait(timeout time.Duration, pred func(recs []Record) bool) ([]Record, bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		if pred(r.recs) {
			out := append([]Record(nil), r.recs...)
			r.mu.Unlock()
			return out, true
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			// an event that came with the deadline may have lost select's
			// random pick: look once more before saying it never came
			r.mu.Lock()
			defer r.mu.Unlock()
			if pred(r.recs) {
				return append([]Record(nil), r.recs...), true
			}
			return nil, false
		}
	}
}

// SawInEvents reports whether some event shows substr as something the
// agent was given or said: the Text of text, thinking, turn_end, error and
// warning events, or a tool result's Output. It is the suite's stand-in
// for Setup.AgentSaw when that is nil.
func SawInEvents(recs []Record, substr string) bool {
	for _, rec := range recs {
		ev := rec.Event
		if strings.Contains(ev.Text, substr) || strings.Contains(ev.Output, substr) {
			return true
		}
	}
	return false
}
