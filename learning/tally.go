package learning

import (
	"github.com/codesession/codesession/messages"
)

// Interventions counts what a person or the driver did to steer a session
// (seed 000 §7): user guidance, clarifications (counted when raised),
// posture escalations and interrupts.
type Interventions struct {
	UserGuidance   int `json:"userGuidance"`
	Clarifications int `json:"clarifications"`
	Escalations    int `json:"postureEscalations"`
	Interrupts     int `json:"interrupts"`
}

// Total sums the counts.
func (i Interventions) Total() int {
	return i.UserGuidance + i.Clarifications + i.Escalations + i.Interrupts
}

// Tally folds a session's events, in seq order, into the evidence a verdict
// and an outcome record need. The session core feeds it as it emits; the
// outcome recorder replays the persisted log through it, so both see the
// same evidence. The zero value is not usable: build it with NewTally.
type Tally struct {
	editTools map[string]bool
	edits     map[string]bool // open edit-tool calls by tool-use id
	posture   messages.Posture

	// Work is the evidence of work so far.
	Work Work
	// Interventions so far.
	Interventions Interventions
	// Model is the last concrete model the backend reported (started
	// events) or a guide switched to; "" when none was reported.
	Model string
	// Turns counts turns started; Closed counts turns closed (a turn diff).
	Turns, Closed int
	// LastKind and LastState describe the last closed turn.
	LastKind  messages.TurnKind
	LastState messages.TurnState
	// CompletedTurns counts closed turns that neither errored nor were interrupted.
	CompletedTurns int
	// Released is the released event, once seen.
	Released *messages.Event
	// CostUSD sums the turns' costs (a cumulative total is turned into deltas).
	CostUSD float64

	unsent    int
	open      bool
	turnText  bool
	turnEnd   messages.TurnKind
	turnState messages.TurnState
	lastTotal float64
}

// NewTally starts a tally for a backend whose edit tools are editTools and a
// session that starts at posture initial ("" when unknown: the first
// posture change then counts as an escalation).
func NewTally(editTools []string, initial messages.Posture) *Tally {
	t := &Tally{editTools: map[string]bool{}, edits: map[string]bool{}, posture: initial}
	for _, n := range editTools {
		t.editTools[n] = true
	}
	return t
}

// Observe folds one event in.
func (t *Tally) Observe(ev messages.Event) { t.ObserveRef(&ev) }

// ObserveRef is Observe from a pointer: ev is read, never kept. A session
// folds in every event it emits, and an Event is some 400 bytes: passed
// by value it is copied twice per event into the caller's frame.
func (t *Tally) ObserveRef(ev *messages.Event) {
	switch ev.Type {
	case messages.EvStarted:
		if ev.Model != "" {
			t.Model = ev.Model
		}
	case messages.EvTurnStarted:
		t.Turns++
		t.open, t.turnText, t.turnEnd, t.turnState = true, false, "", ""
		t.unsent = 0 // whatever guidance was queued went out with this turn
	case messages.EvText:
		if ev.Text != "" {
			t.turnText = true
		}
	case messages.EvToolUse:
		if t.editTools[ev.ToolName] {
			t.edits[ev.ToolUseID] = true
		}
	case messages.EvToolResult:
		if t.edits[ev.ToolUseID] {
			delete(t.edits, ev.ToolUseID)
			if ev.IsError {
				t.Work.EditsRefused++
			} else {
				t.Work.EditsApplied++
			}
		}
	case messages.EvTurnEnd:
		t.turnState = ev.State
		if t.turnState == "" {
			t.turnState = messages.TurnCompleted
		}
		t.turnEnd = messages.KindTurnComplete
		if ev.State == messages.TurnErrored {
			t.turnEnd = messages.KindError
		}
		if ev.Text != "" {
			t.turnText = true
		}
		t.addCost(ev)
	case messages.EvEnded:
		t.turnEnd, t.turnState = messages.KindEnded, messages.TurnEnded
		if ev.Text != "" {
			t.turnText = true
		}
	case messages.EvError:
		if t.open && (ev.Fatal || t.turnEnd == "") {
			t.turnEnd, t.turnState = messages.KindError, messages.TurnErrored
		}
	case messages.EvTurnDiff:
		t.closeTurn(ev.Diff)
	case messages.EvGuidance:
		if ev.Source == messages.SourceUser {
			t.Interventions.UserGuidance++
		}
		if ev.Mode != messages.GuideSteer || !t.open {
			t.unsent++
		}
		if ev.Model != "" {
			t.Model = ev.Model
		}
	case messages.EvClarification:
		if ev.Decision == "" {
			t.Interventions.Clarifications++
		} else if !ev.Decision.Allows() {
			t.Work.Denied++
		}
	case messages.EvPosture:
		if t.posture == "" || ev.Posture.Above(t.posture) {
			t.Interventions.Escalations++
		}
		t.posture = ev.Posture
	case messages.EvInterrupt:
		t.Interventions.Interrupts++
	case messages.EvReleased:
		e := *ev
		t.Released = &e
	}
}

func (t *Tally) addCost(ev *messages.Event) {
	if ev.TotalCostUSD > 0 {
		if d := ev.TotalCostUSD - t.lastTotal; d > 0 {
			t.CostUSD += d
		}
		t.lastTotal = ev.TotalCostUSD
		return
	}
	t.CostUSD += ev.CostUSD
}

func (t *Tally) closeTurn(d *messages.TurnDiff) {
	if !t.open {
		return
	}
	t.open = false
	t.Closed++
	if d != nil && d.Source != messages.DiffNone && d.Source != "" {
		t.Work.Captured++
		t.Work.ChangedFiles += len(d.Files) + d.FilesOmitted
	}
	kind, state := t.turnEnd, t.turnState
	if kind == "" {
		kind, state = messages.KindTurnComplete, messages.TurnCompleted
	}
	t.LastKind, t.LastState = kind, state
	if kind != messages.KindError && state != messages.TurnInterrupted {
		t.CompletedTurns++
		if t.turnText {
			t.Work.Answered = true
		}
	}
}

// TurnOpen reports whether a turn started and has not closed.
func (t *Tally) TurnOpen() bool { return t.open }

// GuidanceUnsent counts guidance messages no turn has carried yet.
func (t *Tally) GuidanceUnsent() int { return t.unsent }

// Facts returns the verdict inputs the events support. failed says
// supervision gave up; capped that maxRounds was reached; readOnly that the
// brief asked for no changes.
func (t *Tally) Facts(failed, capped, readOnly bool) Facts {
	w := t.Work
	w.GuidanceUnsent = t.unsent
	kind := t.LastKind
	if capped && kind == messages.KindTurnComplete {
		kind = messages.KindMaxRounds
	}
	return Facts{Failed: failed, LastKind: kind, LastState: t.LastState, TurnRunning: t.open,
		CompletedTurns: t.CompletedTurns, Capped: capped, ReadOnly: readOnly, Work: w}
}
