package modelmock

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func TestParseScenario(t *testing.T) {
	sc, err := ParseScenario([]byte(`{"rules":[
		{"match":{"regex":"TOOL:WRITE (\\S+) (.*)"},"steps":[{"tool":{"name":"Write","input":{"file_path":"{{1}}","content":"{{2}}"}}},{"text":"done"}]},
		{"match":{"toolResult":"denied"},"steps":[{"text":"ok, not that"}],"times":1},
		{"match":{"text":"busy"},"times":2,"steps":[{"error":{"status":529,"retryAfter":"1"}}]},
		{"match":{"text":"SLOW"},"steps":[{"thinking":"hmm","text":"a b c","chunks":3,"chunkDelay":"10ms","delay":"5ms"}]}
	],"default":{"text":"hi {{input}}"}}`))
	require.NoError(t, err)
	assert.Len(t, sc.Rules, 4)
	assert.Equal(t, Duration(10*time.Millisecond), sc.Rules[3].Steps[0].ChunkDelay)
	b, err := json.Marshal(sc)
	require.NoError(t, err)
	again, err := ParseScenario(b)
	require.NoError(t, err, "a scenario survives a round trip: %s", b)
	assert.Equal(t, sc, again)

	for _, tc := range []struct{ in, field string }{
		{`{"rules":[{"match":{},"steps":[]}]}`, "rules[0].steps"},
		{`{"rules":[{"match":{"text":"a","toolResult":"b"},"steps":[{"text":"x"}]}]}`, "rules[0].match"},
		{`{"rules":[{"match":{"regex":"("},"steps":[{"text":"x"}]}]}`, "rules[0].match"},
		{`{"rules":[{"match":{"toolResult":"a"},"steps":[{"text":"x"},{"text":"y"}]}]}`, "rules[0].steps"},
		{`{"rules":[{"match":{},"steps":[{}]}]}`, "rules[0].steps[0]"},
		{`{"rules":[{"match":{},"steps":[{"text":"x","error":{"status":500}}]}]}`, "rules[0].steps[0]"},
		{`{"rules":[{"match":{},"steps":[{"error":{"status":200}}]}]}`, "rules[0].steps[0].error.status"},
		{`{"rules":[{"match":{},"steps":[{"error":{"status":429,"retryAfter":"soon"}}]}]}`, "rules[0].steps[0].error.retryAfter"},
		{`{"rules":[{"match":{},"steps":[{"tool":{"name":""}}]}]}`, "rules[0].steps[0].tools[0].name"},
		{`{"rules":[{"match":{},"steps":[{"tool":{"name":"x","input":[1]}}]}]}`, "rules[0].steps[0].tools[0].input"},
		{`{"rules":[{"match":{},"times":-1,"steps":[{"text":"x"}]}]}`, "rules[0].times"},
		{`{"rules":[],"default":{}}`, "default"},
		{`{"rules":[],"bogus":1}`, "scenario"},
		{`{"rules":[]} {}`, "scenario"},
		{`{"rules":[{"match":{},"steps":[{"text":"x","delay":"soon"}]}]}`, "scenario"},
	} {
		_, err := ParseScenario([]byte(tc.in))
		var e *messages.Error
		require.ErrorAs(t, err, &e, tc.in)
		assert.Equal(t, messages.CodeInvalid, e.Code, tc.in)
		assert.Equal(t, tc.field, e.Field, tc.in)
	}
}

func TestLoadScenario(t *testing.T) {
	sc, err := LoadScenario("builtin:reference")
	require.NoError(t, err)
	assert.Equal(t, Reference(), sc)
	path := filepath.Join(t.TempDir(), "sc.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"rules":[{"match":{"text":"x"},"steps":[{"text":"y"}]}]}`), 0o644))
	sc, err = LoadScenario(path)
	require.NoError(t, err)
	assert.Equal(t, "y", sc.Rules[0].Steps[0].Text)
	_, err = LoadScenario(filepath.Join(t.TempDir(), "missing.json"))
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	require.NoError(t, os.WriteFile(path, []byte(`{"rules":[{"match":{"text":"x"},"steps":[]}]}`), 0o644))
	_, err = LoadScenario(path)
	assert.ErrorContains(t, err, "sc.json")
	assert.ErrorContains(t, err, "at least one step")
}

// conv builds a conversation from alternating user/assistant messages.
func conv(msgs ...Message) *Conversation { return &Conversation{Model: "m", Messages: msgs} }

func user(parts ...Part) Message      { return Message{Role: "user", Parts: parts} }
func assistant(parts ...Part) Message { return Message{Role: "assistant", Parts: parts} }
func text(s string) Part              { return Part{Kind: PartText, Text: s} }
func use(id, name string) Part        { return Part{Kind: PartToolUse, ToolUseID: id, ToolName: name} }
func result(id, out string, isErr bool) Part {
	return Part{Kind: PartToolResult, ToolUseID: id, Text: out, IsError: isErr}
}

func TestPick(t *testing.T) {
	sc := &Scenario{Rules: []Rule{
		{Match: Match{Regex: `WRITE (\S+)`}, Steps: []Step{{Tool: &ToolCall{Name: "Write"}}, {Text: "wrote {{1}}"}}},
		{Match: Match{ToolResult: "denied"}, Times: 1, Steps: []Step{{Text: "understood: {{result}} ({{tool}}, error {{is_error}})"}}},
		{Match: Match{Text: "flaky"}, Times: 1, Steps: []Step{{Error: &ErrorStep{Status: 529}}}},
		{Match: Match{Text: "flaky"}, Steps: []Step{{Text: "now it works"}}},
	}}
	p, err := newPicker(sc)
	require.NoError(t, err)
	text0 := func(c *Conversation) (string, int) {
		pk := p.pick(c)
		if pk.step.Error != nil {
			return "error", pk.rule
		}
		return expand(pk.step.Text, pk.vars), pk.rule
	}

	// a prompt: the matching rule's first step
	pk := p.pick(conv(user(text("<system-reminder>x</system-reminder>"), text("please WRITE a.txt"))))
	assert.Equal(t, "Write", pk.step.Tool.Name)
	assert.Equal(t, 0, pk.rule)
	// its tool result: the next step, with the prompt's groups
	got, rule := text0(conv(user(text("please WRITE a.txt")), assistant(use("t1", "Write")), user(result("t1", "ok", false))))
	assert.Equal(t, "wrote a.txt", got)
	assert.Equal(t, 0, rule)
	// past its steps: the tool-result default
	got, rule = text0(conv(user(text("please WRITE a.txt")), assistant(use("t1", "Write")), user(result("t1", "ok", false)),
		assistant(text("wrote")), user(result("t2", "more", false))))
	assert.Equal(t, "TOOL_DONE: is_error=false result=more", got)
	assert.Equal(t, -1, rule)
	// a tool-result rule wins over the continuation, once
	c := conv(user(text("please WRITE b.txt")), assistant(use("t1", "Write")), user(result("t1", "denied by user", true)))
	got, _ = text0(c)
	assert.Equal(t, "understood: denied by user (Write, error true)", got)
	got, _ = text0(c)
	assert.Equal(t, "wrote b.txt", got, "spent: the continuation answers")
	// times: the first flaky prompt fails, the retry works
	got, _ = text0(conv(user(text("flaky"))))
	assert.Equal(t, "error", got)
	got, rule = text0(conv(user(text("flaky"))))
	assert.Equal(t, "now it works", got)
	assert.Equal(t, 3, rule)
	// nothing matches: the default
	got, rule = text0(conv(user(text("hello"))))
	assert.Equal(t, "PONG(model=m): hello", got)
	assert.Equal(t, -1, rule)
	// a mid-conversation system message is not an assistant turn
	got, _ = text0(conv(user(text("please WRITE c.txt")), Message{Role: "system", Parts: []Part{text("env")}},
		assistant(use("t1", "Write")), user(result("t1", "ok", false))))
	assert.Equal(t, "wrote c.txt", got)
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"a": "1", "input": "x"}
	assert.Equal(t, "1-x-{{b}}-{{", expand("{{a}}-{{input}}-{{b}}-{{", vars))
	assert.JSONEq(t, `{"p":"1","n":[ "x", 2],"o":{"q":"{{zz}}"}}`, string(expandJSON(json.RawMessage(`{"p":"{{a}}","n":["{{input}}",2],"o":{"q":"{{zz}}"}}`), vars)))
	assert.JSONEq(t, `{}`, string(expandJSON(nil, vars)))
	assert.JSONEq(t, `{"s":"a \"quoted\"\nline"}`, string(expandJSON(json.RawMessage(`{"s":"{{v}}"}`), map[string]string{"v": "a \"quoted\"\nline"})), "expanded values stay valid JSON")
}

func TestSteeredText(t *testing.T) {
	s, ok := steeredText("The user sent a new message while you were working:\nfix the tests too\n\nThis is how Claude Code surfaces messages the user sends mid-turn")
	assert.True(t, ok)
	assert.Equal(t, "fix the tests too", s)
	_, ok = steeredText("# Environment")
	assert.False(t, ok)
}
