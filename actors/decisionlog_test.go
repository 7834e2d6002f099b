package actors

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/messages"
)

// TestDecisionLogLinesPerEventKind: decisionLog writes its line for every
// kind of event that is a decision (it skips the others before building
// anything, so a kind missing from that check would lose its line
// silently), and nothing for streamed output.
func TestDecisionLogLinesPerEventKind(t *testing.T) {
	for _, tc := range []struct {
		ev   messages.Event
		line string
	}{
		{messages.Event{Type: messages.EvTurnStarted}, "code_session_created"},
		{messages.Event{Type: messages.EvClarification, ClarificationID: "c1", ToolName: "Bash"}, "code_session_clarification_raised"},
		{messages.Event{Type: messages.EvClarification, ClarificationID: "c1", Decision: messages.DecisionAllowOnce}, "code_session_clarification_answered"},
		{messages.Event{Type: messages.EvPosture, Posture: messages.PosturePlan}, "code_session_posture_set"},
		{messages.Event{Type: messages.EvGuidance, Text: "go on"}, "code_session_guide"},
		{messages.Event{Type: messages.EvInterrupt}, "code_session_interrupt"},
		{messages.Event{Type: messages.EvReleased, ReleaseReason: messages.ReleaseSweep}, "code_session_scope_swept"},
		{messages.Event{Type: messages.EvText, Text: "streamed"}, ""},
		{messages.Event{Type: messages.EvToolUse, ToolName: "Read"}, ""},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		decisionLog(log, "s1", &messages.PersistedEvent{Seq: 1, Turn: 1, Event: tc.ev})
		if tc.line == "" {
			assert.Empty(t, buf.String(), "%s is no decision", tc.ev.Type)
			continue
		}
		assert.Contains(t, buf.String(), tc.line, "%s", tc.ev.Type)
	}
}
