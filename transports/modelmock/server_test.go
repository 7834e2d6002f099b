package modelmock

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/codesession/codesession/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data map[string]any
}

// post sends a Messages request and returns the response.
func post(t *testing.T, url string, body any, hdr ...string) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url+"/v1/messages?beta=true", strings.NewReader(string(b)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-secret")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d))
			require.Equal(t, name, d["type"], "the event name is the data's type")
			out = append(out, sseEvent{name, d})
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func names(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

func messagesBody(prompt string, stream bool) map[string]any {
	return map[string]any{"model": "claude-mock-1", "max_tokens": 32000, "stream": stream,
		"tools":    []any{map[string]any{"name": "Write"}, map[string]any{"name": "Bash"}},
		"messages": []any{map[string]any{"role": "user", "content": prompt}}}
}

func TestStreamingTextThinkingAndTool(t *testing.T) {
	sc := &Scenario{Rules: []Rule{{Match: Match{Regex: `WRITE (\S+) (.*)`}, Steps: []Step{{
		Thinking: "let me think", Text: "writing {{1}}", Chunks: 2,
		Tool: &ToolCall{Name: "Write", Input: json.RawMessage(`{"file_path":"{{1}}","content":"{{2}}\n"}`)},
	}}}}}
	srv, err := Start(t, sc)
	require.NoError(t, err)
	resp := post(t, srv.URL(), messagesBody("WRITE /w/a.txt hello there", true))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	evs := readSSE(t, resp.Body)
	assert.Equal(t, []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}, names(evs))
	// reassemble the blocks the way a client does
	var thinking, text, partial string
	for _, e := range evs {
		if e.name != "content_block_delta" {
			continue
		}
		d := e.data["delta"].(map[string]any)
		switch d["type"] {
		case "thinking_delta":
			thinking += d["thinking"].(string)
		case "text_delta":
			text += d["text"].(string)
		case "input_json_delta":
			partial += d["partial_json"].(string)
		}
	}
	assert.Equal(t, "let me think", thinking)
	assert.Equal(t, "writing /w/a.txt", text)
	assert.JSONEq(t, `{"file_path":"/w/a.txt","content":"hello there\n"}`, partial)
	start := evs[11].data["content_block"].(map[string]any)
	assert.Equal(t, "tool_use", start["type"])
	assert.Equal(t, "Write", start["name"])
	assert.NotEmpty(t, start["id"])
	md := evs[15].data
	assert.Equal(t, "tool_use", md["delta"].(map[string]any)["stop_reason"])
	assert.EqualValues(t, 20, md["usage"].(map[string]any)["output_tokens"])

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, KindMain, r.Kind)
	assert.Equal(t, 0, r.Rule)
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, "/v1/messages", r.Path)
	assert.Equal(t, "beta=true", r.Query)
	assert.Equal(t, "REDACTED", r.Header.Get("X-Api-Key"), "secrets are never recorded")
	assert.Equal(t, "claude-mock-1", r.Model)
	assert.Equal(t, "WRITE /w/a.txt hello there", r.Conversation().LastUserText())
	assert.True(t, srv.Saw("hello there"))
	assert.False(t, srv.Saw("sk-ant-secret"))
	line, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(line), `"body":{"max_tokens":32000`, "the log line holds the body as JSON")
}

func TestNonStreamingAndToolResults(t *testing.T) {
	srv, err := Start(t, nil) // the reference scenario
	require.NoError(t, err)
	resp := post(t, srv.URL(), messagesBody("TOOL:BASH echo hi", false))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var msg struct {
		Type       string `json:"type"`
		Role       string `json:"role"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&msg))
	assert.Equal(t, "message", msg.Type)
	assert.Equal(t, "tool_use", msg.StopReason)
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "Bash", msg.Content[0].Name)
	assert.JSONEq(t, `{"command":"echo hi","description":"run a command"}`, string(msg.Content[0].Input))
	assert.Equal(t, 100, msg.Usage.InputTokens)

	// the tool result comes back: the default reply echoes it
	body := messagesBody("TOOL:BASH echo hi", false)
	body["messages"] = []any{
		map[string]any{"role": "user", "content": "TOOL:BASH echo hi"},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": msg.Content[0].ID, "name": "Bash", "input": map[string]any{}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": msg.Content[0].ID,
			"content": []any{map[string]any{"type": "text", "text": "denied by the user"}}, "is_error": true}}},
	}
	resp = post(t, srv.URL(), body)
	var reply struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&reply))
	assert.Equal(t, "TOOL_DONE: is_error=true result=denied by the user", reply.Content[0].Text)
	trs := srv.ToolResults()
	require.Len(t, trs, 1)
	assert.Equal(t, ToolResult{ToolUseID: msg.Content[0].ID, ToolName: "Bash", Content: "denied by the user", IsError: true}, trs[0])
}

func TestSideRequestsLeaveTheScenarioAlone(t *testing.T) {
	sc := &Scenario{Rules: []Rule{{Match: Match{}, Times: 1, Steps: []Step{{Text: "the one scripted answer"}}}}}
	srv, err := Start(t, sc)
	require.NoError(t, err)
	// connectivity probes
	for _, m := range []struct{ method, path string }{{http.MethodHead, "/"}, {http.MethodHead, "/api/hello"}, {http.MethodGet, "/"}} {
		req, _ := http.NewRequest(m.method, srv.URL()+m.path, nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, m)
	}
	// the session title: a JSON object for the schema
	title := map[string]any{"model": "claude-haiku", "max_tokens": 512, "stream": false,
		"messages":      []any{map[string]any{"role": "user", "content": "summarize: fix the tests"}},
		"output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}}}}
	var tr struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.NewDecoder(post(t, srv.URL(), title).Body).Decode(&tr))
	assert.JSONEq(t, `{"title":"Mock session"}`, tr.Content[0].Text)
	// the safety classifier: <block>no, stopped at the stop sequence
	cls := map[string]any{"model": "claude-sonnet-5", "max_tokens": 64, "stream": true, "stop_sequences": []string{"</block>"},
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "<transcript>\n"},
			map[string]any{"type": "text", "text": `{"Bash":"echo plan > x"}`}}}}}
	evs := readSSE(t, post(t, srv.URL(), cls).Body)
	var said string
	for _, e := range evs {
		if d, ok := e.data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			said += d["text"].(string)
		}
	}
	assert.Equal(t, "<block>no", said)
	delta := evs[len(evs)-2].data["delta"].(map[string]any)
	assert.Equal(t, "stop_sequence", delta["stop_reason"])
	assert.Equal(t, "</block>", delta["stop_sequence"])
	// the model check after set_model
	check := map[string]any{"model": "claude-other", "max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": "Hi"}}}
	assert.Equal(t, http.StatusOK, post(t, srv.URL(), check).StatusCode)
	// token counting
	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/v1/messages/count_tokens", strings.NewReader(`{"messages":[]}`))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	// an unknown path is a recorded 404
	resp, err = http.Post(srv.URL()+"/v1/nope", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	// the scenario's one answer is still there
	var main struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.NewDecoder(post(t, srv.URL(), messagesBody("go", false)).Body).Decode(&main))
	assert.Equal(t, "the one scripted answer", main.Content[0].Text)

	var kinds []Kind
	for _, r := range srv.Requests() {
		kinds = append(kinds, r.Kind)
	}
	assert.Equal(t, []Kind{KindProbe, KindProbe, KindProbe, KindTitle, KindClassifier, KindModelCheck, KindCountTokens, KindUnknown, KindMain}, kinds)
	assert.Len(t, srv.MainRequests(), 1)
}

func TestErrorStatusWithRetryAfter(t *testing.T) {
	sc := &Scenario{Rules: []Rule{
		{Match: Match{Text: "busy"}, Times: 1, Steps: []Step{{Error: &ErrorStep{Status: 529, RetryAfter: "2"}}}},
		{Match: Match{Text: "busy"}, Steps: []Step{{Text: "better now"}}},
		{Match: Match{Text: "limit"}, Steps: []Step{{Error: &ErrorStep{Status: 429, Message: "slow down"}}}},
	}}
	srv, err := Start(t, sc)
	require.NoError(t, err)
	resp := post(t, srv.URL(), messagesBody("busy", true))
	assert.Equal(t, 529, resp.StatusCode)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"))
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	assert.Equal(t, "error", e.Type)
	assert.Equal(t, "overloaded_error", e.Error.Type)
	assert.Equal(t, http.StatusOK, post(t, srv.URL(), messagesBody("busy", true)).StatusCode, "the retry works")
	resp = post(t, srv.URL(), messagesBody("limit", false))
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	assert.Equal(t, "rate_limit_error", e.Error.Type)
	assert.Equal(t, "slow down", e.Error.Message)
	assert.Empty(t, resp.Header.Get("Retry-After"))
	assert.Equal(t, 429, srv.Requests()[2].Status)
	// a body that is not a Messages request
	resp, err = http.Post(srv.URL()+"/v1/messages", "application/json", strings.NewReader("nope"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, KindInvalid, srv.Requests()[3].Kind)
}

func TestSlowStreamIsRecordedEarlyAndStopsWithTheClient(t *testing.T) {
	sc := &Scenario{Rules: []Rule{{Match: Match{Text: "SLOW"}, Steps: []Step{{Text: strings.Repeat("x", 100), Chunks: 100, ChunkDelay: Duration(time.Second)}}}}}
	srv, err := Start(t, sc)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	b, _ := json.Marshal(messagesBody("SLOW", true))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(string(b)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	// headers and the first events are out at once; the request is on record
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "event: message_start\n", line)
	require.Len(t, srv.MainRequests(), 1, "recorded while it streams")
	assert.Zero(t, srv.MainRequests()[0].Status, "its status comes when it is done")
	cancel()
	resp.Body.Close()
	// the handler notices the client left: it records the request's end
	// while its script still has 100 s to run (the minute only stops a
	// hang), so Close has nothing to wait for
	require.Eventually(t, func() bool { return srv.MainRequests()[0].Status != 0 }, time.Minute, 5*time.Millisecond,
		"the handler never noticed the client left")
	srv.Close()
}

func TestStartOwners(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Start(ctx, nil)
	require.NoError(t, err)
	cancel()
	require.Eventually(t, func() bool {
		_, err := http.Get(srv.URL() + "/")
		return err != nil
	}, time.Minute, 10*time.Millisecond, "the server closes with its context")

	srv, err = Start(nil, nil, WithAddr("localhost:0"))
	require.NoError(t, err)
	srv.Close()
	srv.Close() // idempotent

	_, err = Start(42, nil)
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	_, err = Start(t, nil, WithAddr("0.0.0.0:0"))
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err), "loopback only")
	_, err = Start(t, nil, WithAddr("nonsense"))
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	_, err = Start(t, &Scenario{Rules: []Rule{{}}})
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))

	seen := make(chan Request, 1)
	srv, err = Start(t, nil, WithRequestHook(func(r Request) { seen <- r }))
	require.NoError(t, err)
	post(t, srv.URL(), messagesBody("hi", false))
	select {
	case r := <-seen:
		assert.Equal(t, http.StatusOK, r.Status, "the hook sees the finished request")
	case <-time.After(time.Minute):
		t.Fatal("the hook was not called")
	}
}
