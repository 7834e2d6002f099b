package controlplane

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// answer takes seed 000's {allow, reason} beside {decision} (issue 40): on
// the old code {allow: false} was refused "unknown decision".
func TestAnswerAcceptsTheSeedsAllowBoolean(t *testing.T) {
	f := newFixture(t)
	sid := f.start("ASK before you vet").SessionID
	r := f.read(sid)
	require.Equal(t, messages.KindClarification, r.Kind)

	bad := f.call("POST", "/api/code-sessions/"+sid+"/answer",
		map[string]any{"clarificationId": r.ClarificationID, "allow": true, "decision": "deny"})
	assert.Equal(t, http.StatusBadRequest, bad.status)
	require.NotNil(t, bad.Error)
	assert.Equal(t, "allow", bad.Error.Field, "a contradicting pair is refused, naming the field")
	none := f.call("POST", "/api/code-sessions/"+sid+"/answer", map[string]any{"clarificationId": r.ClarificationID})
	assert.Equal(t, http.StatusBadRequest, none.status)

	var ans messages.AnswerResult
	f.ok("POST", "/api/code-sessions/"+sid+"/answer",
		map[string]any{"clarificationId": r.ClarificationID, "allow": false, "reason": "not the vet today"}, &ans)
	assert.True(t, ans.OK)
	r = f.read(sid)
	require.Equal(t, messages.KindTurnComplete, r.Kind)
	denied := false
	for _, h := range r.RoundHistory {
		denied = denied || (h.Kind == messages.HistDeny && strings.Contains(h.Text, "not the vet today"))
	}
	assert.True(t, denied, "allow:false is a deny carrying its reason: %+v", r.RoundHistory)
}

func TestAnswerAllowValidation(t *testing.T) {
	yes, no := true, false
	a := messages.Answer{SessionID: messages.NewSessionID(), ClarificationID: "c", Allow: &yes}
	require.NoError(t, a.Validate())
	assert.Equal(t, messages.DecisionAllowOnce, a.Decision)
	a = messages.Answer{SessionID: messages.NewSessionID(), ClarificationID: "c", Allow: &no, Decision: messages.DecisionCancel}
	require.NoError(t, a.Validate(), "cancel allows nothing: it agrees with allow false")
	a = messages.Answer{SessionID: messages.NewSessionID(), ClarificationID: "c", Allow: &no, Decision: messages.DecisionAllowSession}
	assert.Error(t, a.Validate())
}

// The op tool (MCP's schema) offers allow and decodes it.
func TestToolCallAnswerWithAllow(t *testing.T) {
	s, err := messages.ToolInputSchema()
	require.NoError(t, err)
	require.Contains(t, s.Properties, "allow")
	sid := messages.NewSessionID()
	call, err := messages.DecodeToolCall([]byte(`{"op":"answer","sessionId":"` + sid + `","clarificationId":"c","allow":false,"reason":"no"}`))
	require.NoError(t, err)
	a, ok := call.Args.(*messages.Answer)
	require.True(t, ok, "%T", call.Args)
	assert.Equal(t, messages.DecisionDeny, a.Decision)
}

// A raised clarification's event is followed on the feed by a
// code_session_waiting frame carrying the notice (issue 37).
func TestFeedSaysWhenASessionWaits(t *testing.T) {
	f := newFixture(t)
	c := f.sse("topics="+TopicEvent, "")
	require.Equal(t, http.StatusOK, c.status)
	sid := f.start("ASK before you vet").SessionID
	evs := c.until(t, func(e sseEvent) bool { return e.event == WaitingType })
	w := evs[len(evs)-1]
	assert.Empty(t, w.id, "the notice has no id of its own: the event's stays the cursor")
	var n WaitingNotice
	require.NoError(t, json.Unmarshal([]byte(w.data), &n))
	assert.Equal(t, sid, n.SessionID)
	assert.Equal(t, WaitingType, n.Type)
	assert.NotEmpty(t, n.ClarificationID)
	prev := evs[len(evs)-2]
	assert.Equal(t, TopicEvent, prev.event)
	assert.Equal(t, messages.EvClarification, prev.eventData(t).Event.Type, "it follows the clarification's event")
}
