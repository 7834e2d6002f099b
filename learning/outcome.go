package learning

import (
	"fmt"

	"github.com/codesession/codesession/messages"
)

// Facts is what a session's end looks like to the verdict inference.
type Facts struct {
	// Failed: supervision gave up on the session.
	Failed bool
	// LastKind is the kind of the last terminal read-turn result, "" if none.
	LastKind messages.TurnKind
	// LastState is how the last closed turn ended.
	LastState messages.TurnState
	// TurnRunning: a turn was still open when the session was stopped.
	TurnRunning bool
	// CompletedTurns counts turns that closed turn_complete, ended or max_rounds.
	CompletedTurns int
	// Capped: the session reached its maxRounds.
	Capped bool
	// ReadOnly: the brief asked for an answer, not for changes (ReadOnlyBrief).
	ReadOnly bool
	// ReadOnlyWhy says why ReadOnly (BriefReadOnly's reason), for the
	// verdict's reason; "" reads as "the brief asks for no change".
	ReadOnlyWhy string
	// Work is the evidence the session's events carry (Tally.Work).
	Work Work
}

// Work is the evidence of work a session's events carry.
type Work struct {
	// ChangedFiles counts files the captured turn diffs show changed.
	ChangedFiles int
	// Captured counts turn diffs that could see changes (git or tool events).
	Captured int
	// EditsApplied counts edit-tool calls whose result was not an error.
	EditsApplied int
	// EditsRefused counts edit-tool calls whose result was an error (a
	// refusal by posture or the gate, or a failed write).
	EditsRefused int
	// Denied counts clarifications answered deny or cancel.
	Denied int
	// Answered: the agent produced text (an answer) in a closed turn.
	Answered bool
	// GuidanceUnsent counts guidance messages that never reached the agent.
	GuidanceUnsent int
}

// Verdict is an inferred outcome and how it was inferred: why it is not
// success, or the evidence a success rests on.
type Verdict struct {
	Outcome messages.Outcome
	Reason  string
}

// Infer derives a verdict when the driver gave none (seed 000 §7: success
// only when the brief was met AND verified by the agent's actions). It never
// yields partial: only the driver can judge a brief half met.
//
//   - failed: supervision gave up, or the last turn errored;
//   - aborted: stopped mid-turn, interrupted last, or no turn ever closed;
//   - failed: maxRounds reached with work left (guidance unsent, or no change);
//   - failed: a brief that asked for changes and changed nothing (all writes
//     denied or refused, or simply none);
//   - failed: a read-only brief with no answer;
//   - success otherwise: changes in the diffs (or applied edits where no diff
//     could be captured), or a read-only brief answered ("hello" asks for
//     no change: answered, it is a success, and the reason says so).
func Infer(f Facts) Verdict {
	w := f.Work
	changed := w.ChangedFiles > 0 || (w.Captured == 0 && w.EditsApplied > 0)
	switch {
	case f.Failed:
		return Verdict{messages.OutcomeFailed, "the session failed (supervision gave up)"}
	case f.LastKind == messages.KindError:
		return Verdict{messages.OutcomeFailed, "the last turn ended in an error"}
	case f.TurnRunning:
		return Verdict{messages.OutcomeAborted, "stopped while a turn was running"}
	case f.LastState == messages.TurnInterrupted:
		return Verdict{messages.OutcomeAborted, "the last turn was interrupted"}
	case f.CompletedTurns == 0:
		return Verdict{messages.OutcomeAborted, "no turn completed"}
	case (f.Capped || f.LastKind == messages.KindMaxRounds) && w.GuidanceUnsent > 0:
		return Verdict{messages.OutcomeFailed, fmt.Sprintf("reached maxRounds with %d guidance message(s) unsent", w.GuidanceUnsent)}
	case (f.Capped || f.LastKind == messages.KindMaxRounds) && !changed && !f.ReadOnly:
		return Verdict{messages.OutcomeFailed, "reached maxRounds without changing anything"}
	case !f.ReadOnly && !changed && (w.Denied > 0 || w.EditsRefused > 0):
		return Verdict{messages.OutcomeFailed, fmt.Sprintf("no change made: every write was denied or refused (%d denied, %d refused)", w.Denied, w.EditsRefused)}
	case !f.ReadOnly && !changed:
		return Verdict{messages.OutcomeFailed, "the brief asked for changes and no file changed"}
	case f.ReadOnly && !w.Answered && !changed:
		return Verdict{messages.OutcomeFailed, "the brief asked a question and got no answer"}
	case w.ChangedFiles > 0:
		return Verdict{messages.OutcomeSuccess, fmt.Sprintf("inferred from the turn diffs: %d file(s) changed", w.ChangedFiles)}
	case changed:
		return Verdict{messages.OutcomeSuccess, fmt.Sprintf("inferred from %d applied edit(s) (no diff could be captured)", w.EditsApplied)}
	default:
		why := f.ReadOnlyWhy
		if why == "" {
			why = "it asks for no change"
		}
		return Verdict{messages.OutcomeSuccess, "inferred: the brief asks for an answer (" + why + ") and the agent answered"}
	}
}

// InferOutcome is Infer's outcome alone.
func InferOutcome(f Facts) messages.Outcome { return Infer(f).Outcome }
