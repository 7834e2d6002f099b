package native

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// wireConversation is a conversation with every kind of block, an empty
// message and an opaque block of another provider (left out).
func wireConversation() []message {
	return []message{
		{role: roleUser, blocks: []block{{kind: blockText, text: "list the files <b>&</b> \u2028 say \"hi\""}}},
		{role: roleAssistant, blocks: []block{
			{kind: blockThinking, text: "first, ls", signature: "sig-1"},
			{kind: blockText, text: "Looking."},
			{kind: blockToolUse, id: "tu_1", name: ToolLs, input: json.RawMessage(`{"path": "."}`)},
			{kind: blockOpaque, raw: json.RawMessage(`{"type":"redacted_thinking","data":"xyz"}`), rawOwner: ProviderAnthropic},
			{kind: blockOpaque, raw: json.RawMessage(`{"type":"reasoning"}`), rawOwner: ProviderOpenAIResponses},
		}},
		{role: roleUser, blocks: []block{{kind: blockToolResult, id: "tu_1", text: "README.md\n"}}},
		{role: roleAssistant, blocks: []block{{kind: blockText, text: ""}}}, // nothing to send
		{role: roleAssistant, blocks: []block{{kind: blockToolUse, id: "tu_2", name: ToolBash, input: nil}}},
		{role: roleUser, blocks: []block{{kind: blockToolResult, id: "tu_2", text: "denied", isError: true}}},
	}
}

// sdkJSON is what the SDK itself encodes for req, decoded, with the
// "stream": true NewStreaming adds.
func sdkJSON(t *testing.T, req request) any {
	t.Helper()
	raw, err := sdkParams(req).MarshalJSON()
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(raw, &v))
	v["stream"] = true
	return v
}

// wireJSON is wire's body for req, decoded.
func wireJSON(t *testing.T, w *anthropicWire, req request) any {
	t.Helper()
	raw, err := w.body(req)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
	return v
}

// TestAnthropicWireMatchesSDK: the request the cached encoding sends is the
// one the SDK builds from scratch, as the conversation grows (new
// messages, blocks merged into the last user message), the tools change
// (a posture change) and the fixed fields change.
func TestAnthropicWireMatchesSDK(t *testing.T) {
	w := &anthropicWire{}
	conv := wireConversation()
	req := request{model: "claude-mock", system: "be brief", messages: conv[:1],
		tools: offered(messages.PostureFull, nil), effort: messages.EffortHigh, maxTokens: 1024}
	assert.Equal(t, sdkJSON(t, req), wireJSON(t, w, req), "first call")

	for n := 2; n <= len(conv); n++ {
		req.messages = conv[:n]
		assert.Equal(t, sdkJSON(t, req), wireJSON(t, w, req), "%d messages", n)
	}

	// appendUser merges tool results into the last user message
	last := len(conv) - 1
	conv[last].blocks = append(conv[last].blocks, block{kind: blockText, text: "and a note"})
	req.messages = conv
	assert.Equal(t, sdkJSON(t, req), wireJSON(t, w, req), "blocks merged into the last message")

	req.tools = offered(messages.PosturePlan, nil)
	assert.Equal(t, sdkJSON(t, req), wireJSON(t, w, req), "the plan posture's tools")
	// an MCP server's list refreshed: same name and description, another
	// schema; the cached definition must not be sent
	mcpTool := func(prop string) ToolSpec {
		return ToolSpec{Name: "mcp__srv__lookup", Description: "look a thing up",
			Schema: map[string]any{"type": "object", "properties": map[string]any{prop: map[string]any{"type": "string"}}}}
	}
	req.tools = []ToolSpec{mcpTool("key")}
	assert.Equal(t, sdkJSON(t, req), wireJSON(t, w, req), "an MCP tool")
	req.tools = []ToolSpec{mcpTool("query")}
	assert.Equal(t, sdkJSON(t, req), wireJSON(t, w, req), "the MCP tool's schema changed")
	req.tools = nil
	assert.Equal(t, sdkJSON(t, req), wireJSON(t, w, req), "no tools")

	req.model, req.system, req.effort, req.maxTokens = "claude-other", "", "", 99
	assert.Equal(t, sdkJSON(t, req), wireJSON(t, w, req), "other fixed fields")

	// a conversation that is not a continuation (a fresh one in the same
	// wire, which a session never does) is encoded afresh, not mixed up
	fresh := []message{{role: roleUser, blocks: []block{{kind: blockText, text: "other"}}}, conv[1]}
	req.messages = fresh
	assert.Equal(t, sdkJSON(t, req), wireJSON(t, w, req), "another conversation")
}

// TestAnthropicWireEncodesEachMessageOnce: a call's encoding costs the
// same whatever the length of the conversation before it, as each message
// is encoded once; building the SDK's parameters afresh on every call
// (what the provider did) costs allocations in proportion to it. Counted
// in allocations, never in time.
func TestAnthropicWireEncodesEachMessageOnce(t *testing.T) {
	long := func(n int) []message {
		var conv []message
		for i := range n {
			conv = append(conv,
				message{role: roleUser, blocks: []block{{kind: blockText, text: fmt.Sprintf("turn %d", i)}}},
				message{role: roleAssistant, blocks: []block{
					{kind: blockText, text: "Looking."},
					{kind: blockToolUse, id: fmt.Sprintf("tu_%d", i), name: ToolLs, input: json.RawMessage(`{}`)}}},
				message{role: roleUser, blocks: []block{{kind: blockToolResult, id: fmt.Sprintf("tu_%d", i), text: "README.md\n"}}},
				message{role: roleAssistant, blocks: []block{{kind: blockText, text: "Done."}}})
		}
		return conv
	}
	allocs := func(turns int) float64 {
		w := &anthropicWire{}
		req := request{model: "claude-mock", system: "be brief", messages: long(turns),
			tools: offered(messages.PostureDefault, nil), maxTokens: 1024}
		_, err := w.body(req) // the session's earlier calls
		require.NoError(t, err)
		return testing.AllocsPerRun(20, func() {
			if _, err := w.body(req); err != nil {
				t.Fatal(err)
			}
		})
	}
	short, longer := allocs(2), allocs(20)
	t.Logf("allocations per call: %.0f after 2 turns, %.0f after 20", short, longer)
	assert.LessOrEqual(t, longer, short+4, "a call's encoding grows with the conversation before it")
}

// TestAnthropicMessageEncoding: encodeMessage's bytes are the SDK's for
// every kind of block and every kind of string (HTML, line separators,
// control characters, invalid UTF-8, tool inputs spaced, nested, empty,
// invalid), and it leaves to the SDK what it does not encode.
func TestAnthropicMessageEncoding(t *testing.T) {
	texts := []string{"", "plain", "list the files <b>&</b> \u2028 \u2029 say \"hi\"", "tab\tnew\nline\r\\ \x00 \x01 \x1f \x7f",
		"bad utf-8 \xff\xfe \xc3", "emoji 😀 é 中文", strings.Repeat("long ", 500)}
	inputs := []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{ "path" : "." , "n": [1, 2.50, true, null] }`),
		json.RawMessage(`{"html":"<script>&</script>","ls":"\u2028"}`), json.RawMessage(`{"nested":{"a":{"b":[{}]}}}`),
		json.RawMessage(`not json`), json.RawMessage(` {"padded":1} `)}
	var conv []message
	for i, s := range texts {
		conv = append(conv,
			message{role: roleUser, blocks: []block{{kind: blockText, text: s}}},
			message{role: roleAssistant, blocks: []block{
				{kind: blockThinking, text: s, signature: s + "sig"},
				{kind: blockText, text: s},
				{kind: blockToolUse, id: "tu_" + s, name: ToolLs, input: inputs[i%len(inputs)]}}},
			message{role: roleUser, blocks: []block{
				{kind: blockToolResult, id: "tu_" + s, text: s, isError: i%2 == 0},
				{kind: blockText, text: "note " + s}}})
	}
	for _, in := range inputs {
		conv = append(conv, message{role: roleAssistant, blocks: []block{{kind: blockToolUse, id: "x", name: ToolBash, input: in}}})
	}
	conv = append(conv, wireConversation()...)
	encoded := 0
	for i, m := range conv {
		mp, sdkSends := sdkMessage(m)
		raw, ok := encodeMessage(m)
		if !ok {
			continue
		}
		encoded++
		require.True(t, sdkSends, "message %d: the SDK sends nothing", i)
		want, err := mp.MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, string(want), string(raw), "message %d", i)
	}
	assert.Greater(t, encoded, len(texts)*3)
	// what it leaves to the SDK: an opaque block, nothing to send
	_, ok := encodeMessage(wireConversation()[1])
	assert.False(t, ok, "a message with an opaque block")
	_, ok = encodeMessage(message{role: roleAssistant, blocks: []block{{kind: blockText}}})
	assert.False(t, ok, "a message with nothing to send")
}

// TestBuiltinToolsEncodedOncePerProcess: a session's first call takes the
// built-in tools' definitions as encoded once per process (a new wire
// allocates a few more for seven tools than for one, not six encodings
// more), and a tool that only
// shares a built-in's name (another schema, another description: an MCP
// server's) is encoded from its own spec, as the SDK encodes it.
func TestBuiltinToolsEncodedOncePerProcess(t *testing.T) {
	req := request{model: "claude-mock", system: "be brief", messages: wireConversation()[:1], maxTokens: 64}
	first := func(tools []ToolSpec) float64 {
		r := req
		r.tools = tools
		return testing.AllocsPerRun(20, func() {
			if _, err := (&anthropicWire{}).body(r); err != nil {
				t.Fatal(err)
			}
		})
	}
	all := offered(messages.PostureFull, nil)
	require.Len(t, all, len(ToolNames()))
	one, seven := first(all[:1]), first(all)
	t.Logf("a first call's allocations: %.0f with one tool, %.0f with %d", one, seven, len(all))
	// the SDK encodes a tool in some thirty allocations; a table
	// entry costs a few
	assert.Less(t, seven, one+50, "the built-in tools were encoded again")

	ls := tools[ToolLs].spec
	for _, other := range []ToolSpec{
		{Name: ToolLs, Description: ls.Description, Schema: map[string]any{"type": "object", "properties": map[string]any{"dir": map[string]any{"type": "string"}}}},
		{Name: ToolLs, Description: "an MCP server's ls", Schema: ls.Schema},
	} {
		r := req
		r.tools = []ToolSpec{other}
		assert.Equal(t, sdkJSON(t, r), wireJSON(t, &anthropicWire{}, r))
	}
	r := req
	r.tools = all
	assert.Equal(t, sdkJSON(t, r), wireJSON(t, &anthropicWire{}, r))
}
