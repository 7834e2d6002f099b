package native

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
)

// anthSSE is a stream of events as the Messages API sends them.
func anthSSE(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		var v struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(e), &v)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", v.Type, e)
	}
	return b.String()
}

func sseResponse(body string) *http.Response {
	req, _ := http.NewRequest(http.MethodPost, "http://example.invalid/v1/messages", nil)
	return &http.Response{StatusCode: http.StatusOK, Request: req,
		Header: http.Header{"Content-Type": []string{"text/event-stream"}, "Request-Id": []string{"req_1"}},
		Body:   io.NopCloser(strings.NewReader(body))}
}

// decoded is what a stream's decoding gave: the response, the deltas
// emitted, the error's text.
type decoded struct {
	resp   response
	deltas []delta
	err    string
}

// sdkDecoded decodes body the way the provider did before
// decodeStream: the SDK's stream of MessageStreamEventUnion, Accumulate.
func sdkDecoded(body string) decoded {
	var out decoded
	st := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(sseResponse(body)), nil)
	defer st.Close()
	var acc anthropic.Message
	for st.Next() {
		if err := accumulate(&acc, st.Current(), func(d delta) { out.deltas = append(out.deltas, d) }); err != nil {
			out.err = err.Error()
			return out
		}
	}
	if err := st.Err(); err != nil {
		out.err = err.Error()
		return out
	}
	out.resp = sdkResponse(&acc)
	return out
}

func fastDecoded(body string) decoded {
	var out decoded
	st := ssestream.NewStream[streamEvent](ssestream.NewDecoder(sseResponse(body)), nil)
	defer st.Close()
	resp, err := decodeStream(st, func(d delta) { out.deltas = append(out.deltas, d) })
	if err != nil {
		out.err = err.Error()
		return out
	}
	out.resp = resp
	return out
}

const (
	evStart     = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1,"cache_creation_input_tokens":3,"cache_read_input_tokens":4}}}`
	evTextStart = `{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`
	evTextDelta = `{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%q}}`
	evStop      = `{"type":"content_block_stop","index":%d}`
	evMsgDelta  = `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`
	evMsgStop   = `{"type":"message_stop"}`
)

// streamCases are streams of every shape the provider meets: the fast
// path's and those it hands to the SDK (another block type, a citation,
// a block out of order, an error event, an event of an unknown type).
func streamCases() map[string]string {
	f := fmt.Sprintf
	return map[string]string{
		"text": anthSSE(evStart, f(evTextStart, 0), f(evTextDelta, 0, "Hello"), f(evTextDelta, 0, ", <world> \u2028 é"), f(evStop, 0), evMsgDelta, evMsgStop),
		"thinking, text, tool": anthSSE(evStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"list "}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"first"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig-a"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig-b"}}`,
			f(evStop, 0), f(evTextStart, 1), f(evTextDelta, 1, "Looking."), f(evStop, 1),
			`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tu_1","name":"ls","input":{}}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":" \".\"}"}}`,
			f(evStop, 2),
			`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":40,"output_tokens":30,"cache_creation_input_tokens":null,"cache_read_input_tokens":7}}`,
			evMsgStop),
		"tool without input deltas": anthSSE(evStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu_2","name":"ls","input":{}}}`,
			f(evStop, 0), evMsgDelta, evMsgStop),
		"tool input not {}": anthSSE(evStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu_3","name":"ls","input":{ }}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"x"}}`,
			f(evStop, 0), evMsgDelta, evMsgStop),
		"tool input null": anthSSE(evStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu_4","name":"ls","input":null}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}`,
			f(evStop, 0), evMsgDelta, evMsgStop),
		"tool input absent": anthSSE(evStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu_5","name":"ls"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":2}"}}`,
			f(evStop, 0), evMsgDelta, evMsgStop),
		"fields null": anthSSE(`{"type":"message_start","message":{"model":null,"content":null,"stop_reason":null,"usage":{"input_tokens":null,"output_tokens":3}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":null,"signature":null}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"t"}}`,
			f(evStop, 0), `{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":null}}`, evMsgStop),
		"text that starts non-empty, ping, max_tokens": anthSSE(evStart, `{"type":"ping"}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Pre"}}`,
			f(evTextDelta, 0, "fix"), f(evTextDelta, 0, ""), f(evStop, 0),
			`{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{}}`, evMsgStop),
		"redacted thinking mid-stream": anthSSE(evStart, f(evTextStart, 0), f(evTextDelta, 0, "a"), f(evStop, 0),
			`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"xyz"}}`,
			f(evStop, 1), f(evTextStart, 2), f(evTextDelta, 2, "b"), f(evStop, 2), evMsgDelta, evMsgStop),
		"citations": anthSSE(evStart, f(evTextStart, 0), f(evTextDelta, 0, "cited"),
			`{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x","document_index":0,"document_title":"d","start_char_index":0,"end_char_index":1}}}`,
			f(evStop, 0), evMsgDelta, evMsgStop),
		"block out of order": anthSSE(evStart, f(evTextStart, 1), f(evTextDelta, 1, "x"), evMsgStop),
		"delta for no block": anthSSE(evStart, f(evTextStart, 0), f(evTextDelta, 3, "x"), evMsgStop),
		"error event": anthSSE(evStart, f(evTextStart, 0), f(evTextDelta, 0, "par"),
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
		"unknown event type":    anthSSE(evStart, f(evTextStart, 0), `{"type":"brand_new","index":0}`, f(evTextDelta, 0, "y"), f(evStop, 0), evMsgDelta, evMsgStop),
		"usage of a wrong type": anthSSE(evStart, f(evTextStart, 0), f(evStop, 0), `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":"15"}}`, evMsgStop),
		"message_start with content": anthSSE(`{"type":"message_start","message":{"model":"m","content":[{"type":"text","text":"pre"}],"usage":{"input_tokens":1,"output_tokens":1}}}`,
			f(evTextStart, 1), f(evTextDelta, 1, "z"), f(evStop, 1), evMsgDelta, evMsgStop),
		"empty": "",
	}
}

// modelmockStream is the stream modelmock answers the bench's first call
// with: thinking, text and an ls call.
func modelmockStream(t testing.TB) string {
	t.Helper()
	mock, err := modelmock.Start(t, benchScenario())
	require.NoError(t, err)
	body := `{"model":"claude-mock","max_tokens":64,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"bench turn 1"}]}]}`
	resp, err := http.Post(mock.URL()+"/v1/messages", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(raw), "tool_use")
	return string(raw)
}

// TestAnthropicStreamMatchesSDK: decodeStream gives what the SDK's stream
// and Accumulate gave the provider (response, deltas emitted, error) for
// every shape of stream, on the fast path and handed to the SDK.
func TestAnthropicStreamMatchesSDK(t *testing.T) {
	cases := streamCases()
	cases["modelmock"] = modelmockStream(t)
	for name, body := range cases {
		want, got := sdkDecoded(body), fastDecoded(body)
		assert.Equal(t, want, got, name)
	}
	// the cases cover what they say: a response with every kind of block,
	// an opaque one, and errors
	full := fastDecoded(cases["thinking, text, tool"])
	require.Len(t, full.resp.blocks, 3)
	assert.Equal(t, `{"path": "."}`, string(full.resp.blocks[2].input))
	assert.Equal(t, "sig-asig-b", full.resp.blocks[0].signature)
	assert.Equal(t, messages.Usage{InputTokens: 40, OutputTokens: 30, CacheWriteTokens: 3, CacheReadTokens: 7}, full.resp.usage)
	assert.Equal(t, blockOpaque, fastDecoded(cases["redacted thinking mid-stream"]).resp.blocks[1].kind)
	assert.NotEmpty(t, fastDecoded(cases["block out of order"]).err)
	assert.Contains(t, fastDecoded(cases["error event"]).err, "Overloaded")
}

// TestAnthropicStreamDecodesWithoutTheSDKsDecoder: a stream of the usual
// shape (modelmock's, the API's) stays on the fast path, never through
// the SDK's reflective decoder and Accumulate (what the provider used),
// and allocates less than they do; the shapes it does not know are handed
// over. Counted in allocations, never in time (BenchmarkAnthropicStream
// has the time).
func TestAnthropicStreamDecodesWithoutTheSDKsDecoder(t *testing.T) {
	onSDK := func(body string) bool {
		st := ssestream.NewStream[streamEvent](ssestream.NewDecoder(sseResponse(body)), nil)
		defer st.Close()
		d := &streamDecoder{emit: func(delta) {}}
		for st.Next() {
			ev := st.Current()
			require.NoError(t, d.add(&ev))
		}
		return d.onSDK
	}
	body := modelmockStream(t)
	cases := streamCases()
	assert.False(t, onSDK(body), "modelmock's stream")
	for _, name := range []string{"text", "thinking, text, tool", "tool without input deltas", "tool input absent", "fields null", "text that starts non-empty, ping, max_tokens"} {
		assert.False(t, onSDK(cases[name]), name)
	}
	for _, name := range []string{"redacted thinking mid-stream", "citations", "unknown event type", "usage of a wrong type", "message_start with content", "tool input null"} {
		assert.True(t, onSDK(cases[name]), name)
	}
	fast := testing.AllocsPerRun(20, func() { fastDecoded(body) })
	sdk := testing.AllocsPerRun(20, func() { sdkDecoded(body) })
	t.Logf("allocations per stream: %.0f decoded here, %.0f through the SDK", fast, sdk)
	assert.Less(t, fast, sdk, "the stream is decoded as the SDK decodes it")
}

// TestAnthropicRequestMatchesSDK: the provider's call is the request the
// SDK's NewStreaming sends for the same parameters, on the wire: method,
// path, headers and body.
func TestAnthropicRequestMatchesSDK(t *testing.T) {
	type seen struct {
		method, path string
		header       http.Header
		body         map[string]any
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("body %s: %v", raw, err)
		}
		h := r.Header.Clone()
		h.Del("Content-Length") // the same body, compared decoded
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, h, body})
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, anthSSE(evStart, fmt.Sprintf(evTextStart, 0), fmt.Sprintf(evTextDelta, 0, "ok"), fmt.Sprintf(evStop, 0), evMsgDelta, evMsgStop))
	}))
	defer srv.Close()

	p := newAnthropic(srv.URL, "k", "", srv.Client())
	req := request{model: "claude-mock", system: "be brief", messages: wireConversation(),
		tools: offered(messages.PostureFull, nil), effort: messages.EffortHigh, maxTokens: 1024}
	st := p.client.Messages.NewStreaming(context.Background(), sdkParams(req))
	for st.Next() {
	}
	require.NoError(t, st.Err())
	require.NoError(t, st.Close())
	resp, err := p.stream(context.Background(), req, func(delta) {})
	require.NoError(t, err)
	assert.Equal(t, "ok", resp.text())

	require.Len(t, got, 2)
	assert.Equal(t, got[0], got[1])
	assert.Equal(t, true, got[1].body["stream"])
	// and the bytes: "stream" first, the SDK's encoding of the rest
	body, err := p.wire.body(req)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(body, []byte(`{"stream":true,`)), "%s", body)
}

// BenchmarkAnthropicStream decodes the bench's first answer (thinking,
// text, an ls call) here and through the SDK's decoder and Accumulate.
func BenchmarkAnthropicStream(b *testing.B) {
	body := modelmockStream(b)
	for _, c := range []struct {
		name   string
		decode func(string) decoded
	}{{"here", fastDecoded}, {"sdk", sdkDecoded}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.decode(body)
			}
		})
	}
}
