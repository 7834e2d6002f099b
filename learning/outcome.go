package learning

import "github.com/codesession/codesession/messages"

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
}

// InferOutcome derives a verdict when the driver gave none. It never yields
// partial: only the driver can judge a brief half met.
func InferOutcome(f Facts) messages.Outcome {
	switch {
	case f.Failed || f.LastKind == messages.KindError:
		return messages.OutcomeFailed
	case f.TurnRunning || f.CompletedTurns == 0 || f.LastState == messages.TurnInterrupted:
		return messages.OutcomeAborted
	default:
		return messages.OutcomeSuccess
	}
}
