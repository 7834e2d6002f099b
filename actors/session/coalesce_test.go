package session

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/messages"
)

func evsOf(from uint64, types ...messages.EventType) []messages.PersistedEvent {
	out := make([]messages.PersistedEvent, len(types))
	for i, t := range types {
		out[i] = messages.PersistedEvent{Seq: from + uint64(i), Event: messages.Event{Type: t}}
	}
	return out
}

// TestMayHoldOnlyStreamedOutputNobodyWaitsFor: what may wait for the rest
// of its turn, and every reason it may not.
func TestMayHoldOnlyStreamedOutputNobodyWaitsFor(t *testing.T) {
	stream := evsOf(5, messages.EvThinking, messages.EvText, messages.EvToolUse, messages.EvToolResult)
	long := make([]messages.PersistedEvent, persistChunk)
	for i := range long {
		long[i] = messages.PersistedEvent{Seq: uint64(i + 1), Event: messages.Event{Type: messages.EvText}}
	}
	for _, tc := range []struct {
		name   string
		evs    []messages.PersistedEvent
		record bool
		parked uint64
		live   bool
		want   bool
	}{
		{"streamed output", stream, false, 0, true, true},
		{"an op waits on a later seq", stream, false, 9, true, true},
		{"nothing to write", nil, false, 0, true, false},
		{"a record rides with it", stream, true, 0, true, false},
		{"an op waits on one of its seqs", stream, false, 8, true, false},
		{"an op waits on an earlier seq", stream, false, 2, true, false},
		{"the session is releasing", stream, false, 0, false, false},
		{"a write's worth", long, false, 0, true, false},
		{"the turn ended", evsOf(5, messages.EvText, messages.EvTurnEnd), false, 0, true, false},
		{"a clarification", evsOf(5, messages.EvToolUse, messages.EvClarification), false, 0, true, false},
		{"a turn started", evsOf(5, messages.EvTurnStarted), false, 0, true, false},
		{"a warning", evsOf(5, messages.EvText, messages.EvWarning), false, 0, true, false},
		{"an error", evsOf(5, messages.EvError), false, 0, true, false},
		{"guidance", evsOf(5, messages.EvGuidance), false, 0, true, false},
	} {
		assert.Equal(t, tc.want, mayHold(tc.evs, tc.record, tc.parked, tc.live), tc.name)
	}
}

// TestOvertakesOnlyWhatSomeoneWaitsOn: what may start beside a batch in
// flight instead of waiting for its ack.
func TestOvertakesOnlyWhatSomeoneWaitsOn(t *testing.T) {
	stream := evsOf(5, messages.EvThinking, messages.EvText, messages.EvToolUse, messages.EvToolResult)
	for _, tc := range []struct {
		name   string
		evs    []messages.PersistedEvent
		parked uint64
		want   bool
	}{
		{"streamed output", stream, 0, false},
		{"an op waits on a later seq", stream, 9, false},
		{"nothing to write", nil, 0, false},
		{"an op waits on one of its seqs", stream, 8, true},
		{"an op waits on an earlier seq", stream, 2, true},
		{"the turn ended", evsOf(5, messages.EvText, messages.EvTurnEnd), 0, true},
		{"its diff", evsOf(5, messages.EvTurnDiff), 0, true},
		{"a clarification", evsOf(5, messages.EvToolUse, messages.EvClarification), 0, true},
		{"an error", evsOf(5, messages.EvError), 0, true},
		{"released", evsOf(5, messages.EvText, messages.EvReleased), 0, true},
		{"the agent ended", evsOf(5, messages.EvEnded), 0, true},
		{"the backend started", evsOf(5, messages.EvStarted, messages.EvText), 0, false},
		{"a warning", evsOf(5, messages.EvWarning), 0, false},
		{"guidance nobody waits on", evsOf(5, messages.EvGuidance), 0, false},
		{"guidance an op waits on", evsOf(5, messages.EvGuidance), 5, true},
	} {
		assert.Equal(t, tc.want, overtakes(tc.evs, tc.parked), tc.name)
	}
}
