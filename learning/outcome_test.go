package learning

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/messages"
)

func TestInferOutcome(t *testing.T) {
	cases := []struct {
		name string
		f    Facts
		want messages.Outcome
	}{
		{"completed", Facts{LastKind: messages.KindTurnComplete, LastState: messages.TurnCompleted, CompletedTurns: 2}, messages.OutcomeSuccess},
		{"max rounds is clean", Facts{LastKind: messages.KindMaxRounds, CompletedTurns: 3}, messages.OutcomeSuccess},
		{"agent ended", Facts{LastKind: messages.KindEnded, CompletedTurns: 1}, messages.OutcomeSuccess},
		{"last turn errored", Facts{LastKind: messages.KindError, CompletedTurns: 2}, messages.OutcomeFailed},
		{"supervision gave up", Facts{Failed: true, CompletedTurns: 5}, messages.OutcomeFailed},
		{"stopped mid-turn", Facts{TurnRunning: true, CompletedTurns: 1, LastKind: messages.KindTurnComplete}, messages.OutcomeAborted},
		{"never finished a turn", Facts{}, messages.OutcomeAborted},
		{"interrupted last", Facts{LastKind: messages.KindTurnComplete, LastState: messages.TurnInterrupted, CompletedTurns: 1}, messages.OutcomeAborted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := InferOutcome(c.f)
			assert.Equal(t, c.want, got)
			assert.NotEqual(t, messages.OutcomePartial, got)
		})
	}
}
