package native

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

// OpenLoop offers the model only the caller's tools, runs every call of
// one of them ungated, refuses any other name, and uses the caller's
// system prompt.
func TestOpenLoopOffersOnlyTheCallersTools(t *testing.T) {
	mock, err := modelmock.Start(t, &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "GO"},
		Steps: []modelmock.Step{{Tools: []modelmock.ToolCall{*tool("echo", map[string]any{"x": 1}), *tool("bash", map[string]any{"command": "rm -rf /"})}},
			{Text: "all done"}}}}})
	require.NoError(t, err)
	var mu sync.Mutex
	var calls []string
	echo := Tool{Spec: ToolSpec{Name: "echo", Description: "echoes", Schema: map[string]any{"type": "object"}},
		Run: func(_ context.Context, in json.RawMessage) (string, bool) {
			mu.Lock()
			calls = append(calls, string(in))
			mu.Unlock()
			return "echoed " + string(in), false
		}}
	rec := transporttest.NewRecorder()
	tr := New(WithProcessEnv(nil), WithRetryPolicy(fastRetry))
	s, err := tr.OpenLoop(context.Background(), LoopSpec{Env: []string{EnvAnthropicBaseURL + "=" + mock.URL(), EnvAnthropicAPIKey + "=k"},
		Model: "claude-mock", System: "You are the test driver.", Tools: []Tool{echo}}, rec.Sink)
	require.NoError(t, err)
	defer func() { _ = s.Close(context.Background()) }()
	rec.TurnStarting(1)
	require.NoError(t, s.StartTurn(context.Background(), 1, "GO"))
	var evs []messages.Event
	_, ok := rec.Wait(testWait, func(recs []transporttest.Record) bool { evs = inTurn(recs, 1); return closed(evs) != nil })
	require.True(t, ok, rec.Transcript())
	end := closed(evs)
	assert.Equal(t, messages.TurnCompleted, end.State)
	assert.Equal(t, "all done", end.Text)
	assert.Equal(t, []string{`{"x":1}`}, calls, "the caller's tool ran; bash did not")
	var refused bool
	for _, ev := range results(evs) {
		refused = refused || (ev.IsError && strings.Contains(ev.Output, `no tool "bash"`))
	}
	assert.True(t, refused, "an unknown tool is refused back to the model")
	for _, r := range mock.MainRequests() {
		assert.Equal(t, []string{"echo"}, r.Conversation().Tools)
		assert.Contains(t, r.Conversation().System, "You are the test driver.")
	}
	_, err = tr.OpenLoop(context.Background(), LoopSpec{}, rec.Sink)
	assert.True(t, messages.IsCode(err, messages.CodeInvalid), "a loop needs a tool: %v", err)
	var _ transports.Session = s
}
