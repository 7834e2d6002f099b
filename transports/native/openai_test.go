package native

// These tests check, against a small SSE fake, what modelmock cannot
// produce: reasoning effort max, plan posture's read-only tool list, cached
// token usage, model items sent back verbatim. The turns themselves run
// against modelmock's OpenAI sides in openai_modelmock_test.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/transporttest"
)

// openaiFake answers each request with the next of its answers (an SSE
// body, or a status) and records the request bodies.
type openaiFake struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	bodies  []map[string]any
	paths   []string
}

func (f *openaiFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	f.mu.Lock()
	f.bodies = append(f.bodies, m)
	f.paths = append(f.paths, r.URL.Path)
	var a func(http.ResponseWriter)
	if len(f.answers) > 0 {
		a, f.answers = f.answers[0], f.answers[1:]
	}
	f.mu.Unlock()
	if a == nil {
		http.Error(w, `{"error":{"message":"no more answers"}}`, http.StatusInternalServerError)
		return
	}
	a(w)
}

func sse(events ...any) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			b, _ := json.Marshal(e)
			if m, ok := e.(map[string]any); ok && m["type"] != nil {
				fmt.Fprintf(w, "event: %s\n", m["type"])
			}
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		if _, ok := events[0].(map[string]any)["choices"]; ok {
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
	}
}

func status(code int, retryAfter string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"fake says %d","type":"fake"}}`, code)
	}
}

func responsesCompleted(output ...map[string]any) map[string]any {
	return map[string]any{"type": "response.completed", "sequence_number": 9, "response": map[string]any{
		"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-fake",
		"output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
			"input_tokens_details": map[string]any{"cached_tokens": 2}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}},
	}}
}

func openLiveOpenAI(t *testing.T, provider string, f *openaiFake, spec transports.SessionSpec) *live {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	spec.Cwd = t.TempDir()
	spec.Model = "gpt-fake"
	spec.Env = []string{EnvProvider + "=" + provider, EnvOpenAIBaseURL + "=" + srv.URL + "/v1", EnvOpenAIAPIKey + "=sk-test"}
	tr := New(WithProcessEnv(nil), WithRetryPolicy(fastRetry))
	rec := transporttest.NewRecorder()
	s, err := tr.Open(t.Context(), spec, rec.Sink)
	require.NoError(t, err)
	t.Cleanup(func() {
		rec.Closing()
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		assert.NoError(t, s.Close(ctx))
		rec.MarkClosed()
		assert.Empty(t, rec.Check())
	})
	return &live{t: t, ws: spec.Cwd, rec: rec, s: s}
}

func TestOpenAIResponsesLoop(t *testing.T) {
	t.Parallel()
	call := map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "ls", "arguments": "{}", "status": "completed"}
	msg := map[string]any{"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": "The workspace is empty.", "annotations": []any{}}}}
	f := &openaiFake{answers: []func(http.ResponseWriter){
		status(http.StatusTooManyRequests, "0"),
		sse(map[string]any{"type": "response.output_text.delta", "sequence_number": 1, "item_id": "x", "output_index": 0, "content_index": 0, "delta": "Looking."},
			responsesCompleted(call)),
		sse(map[string]any{"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_2", "output_index": 0, "content_index": 0, "delta": "The workspace is empty."},
			responsesCompleted(msg)),
	}}
	l := openLiveOpenAI(t, ProviderOpenAIResponses, f, transports.SessionSpec{Effort: messages.EffortMax, Posture: messages.PosturePlan})
	evs := l.turn(1, "what is here?", nil)
	end := closed(evs)
	require.Equal(t, messages.TurnCompleted, end.State, l.rec.Transcript())
	assert.Equal(t, "The workspace is empty.", end.Text)
	assert.Equal(t, int64(16), end.Usage.InputTokens, "cached tokens are counted apart")
	assert.Equal(t, int64(4), end.Usage.CacheReadTokens)
	assert.Contains(t, results(evs)["ls"].Output, "is empty")

	require.Len(t, f.bodies, 3, "the 429 was retried")
	assert.Equal(t, "/v1/responses", f.paths[2])
	first := f.bodies[1]
	assert.Equal(t, "gpt-fake", first["model"])
	assert.Equal(t, map[string]any{"effort": "max"}, first["reasoning"])
	assert.Contains(t, first["instructions"], "coding agent")
	var names []string
	for _, tl := range first["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	assert.ElementsMatch(t, []string{"read", "glob", "grep", "ls"}, names, "plan offers read-only tools")
	input := f.bodies[2]["input"].([]any)
	require.Len(t, input, 3)
	assert.Equal(t, "function_call", input[1].(map[string]any)["type"], "the model's own item goes back verbatim")
	out := input[2].(map[string]any)
	assert.Equal(t, "function_call_output", out["type"])
	assert.Equal(t, "call_1", out["call_id"])
	assert.Contains(t, out["output"], "is empty")
}

func TestOpenAIChatLoop(t *testing.T) {
	t.Parallel()
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	usage := map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-fake", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
	f := &openaiFake{answers: []func(http.ResponseWriter){
		sse(chunk(map[string]any{"role": "assistant", "content": "Writing."}, nil),
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_9", "type": "function",
				"function": map[string]any{"name": "write", "arguments": `{"path":"a.txt",`}}}}, nil),
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `"content":"A\n"}`}}}}, nil),
			chunk(map[string]any{}, "tool_calls"), usage),
		sse(chunk(map[string]any{"role": "assistant", "content": "Wrote a.txt."}, nil), chunk(map[string]any{}, "stop"), usage),
	}}
	l := openLiveOpenAI(t, ProviderOpenAIChat, f, transports.SessionSpec{Posture: messages.PostureAcceptEdits})
	evs := l.turn(1, "write a.txt", nil)
	end := closed(evs)
	require.Equal(t, messages.TurnCompleted, end.State, l.rec.Transcript())
	assert.Equal(t, "Wrote a.txt.", end.Text)
	assert.Equal(t, int64(20), end.Usage.InputTokens)
	assert.Equal(t, "created a.txt (2 bytes)", results(evs)["write"].Output)

	require.Len(t, f.bodies, 2)
	assert.Equal(t, "/v1/chat/completions", f.paths[0])
	msgs := f.bodies[1]["messages"].([]any)
	require.Len(t, msgs, 4) // system, user, assistant with the call, tool
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	assert.Equal(t, []string{"system", "user", "assistant", "tool"}, roles)
	calls := msgs[2].(map[string]any)["tool_calls"].([]any)
	fn := calls[0].(map[string]any)["function"].(map[string]any)
	assert.Equal(t, "write", fn["name"])
	assert.JSONEq(t, `{"path":"a.txt","content":"A\n"}`, fn["arguments"].(string))
	assert.Equal(t, "call_9", msgs[3].(map[string]any)["tool_call_id"])
	assert.True(t, strings.HasPrefix(msgs[3].(map[string]any)["content"].(string), "created a.txt"))
}

func TestOpenAIUnauthorizedNamesTheEndpoint(t *testing.T) {
	t.Parallel()
	f := &openaiFake{answers: []func(http.ResponseWriter){status(http.StatusUnauthorized, "")}}
	l := openLiveOpenAI(t, ProviderOpenAIResponses, f, transports.SessionSpec{})
	end := closed(l.turn(1, "hi", nil))
	assert.Equal(t, messages.TurnErrored, end.State)
	assert.Contains(t, end.Text, "openai-responses endpoint http://127.0.0.1")
	assert.Contains(t, end.Text, "401")
	assert.Len(t, f.bodies, 1)
}
