package contain

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// pair is a redactor with its pre-checks and the same one without them.
func pair(values ...string) (fast, exhaustive *redactor) {
	fast = newRedactor(values)
	exhaustive = newRedactor(values)
	exhaustive.exhaustive = true
	return fast, exhaustive
}

// The pre-checks change nothing the redactor does: every key shape, every
// secret value, escaped or not, in text or in a tool input, well-formed or
// not, is redacted exactly as without them; and an event with nothing to
// redact comes back as it was.
func TestPrecheckAgreesWithExhaustive(t *testing.T) {
	fast, slow := pair("hunter2-db", "s3cr3t-token-value")
	texts := []string{
		"", "plain text", "Turn 3 is done.", "step 4 of turn 2",
		"key sk-ant-abcdefgh123 here", "sk-proj-abcdefghijklmnopqrstuvwxyz",
		"ghp_abcdefghijklmnopqrstuvwxyz0123", "github_pat_abcdefghijklmnopqrstuv_wx",
		"glpat-abcdefghijklmnopqrstu", "xoxb-1234567890-abc", "AKIAABCDEFGHIJKLMNOP",
		"AIza" + "abcdefghijklmnopqrstuvwxyz012345678", "-----BEGIN RSA PRIVATE KEY-----",
		"dsn=hunter2-db x", "gh but short", "sk- nothing", "AKIA too short",
		"hunter2-dbsk-ant-abcdefgh123",
	}
	for _, s := range texts {
		assert.Equal(t, slow.text(s), fast.text(s), "%q", s)
		in, err := json.Marshal(map[string]any{"command": s, "n": 3, "list": []string{s, "x"}})
		require.NoError(t, err)
		assert.Equal(t, string(slow.json(in)), string(fast.json(in)), "%s", in)
		assert.Equal(t, string(slow.json(json.RawMessage(s))), string(fast.json(json.RawMessage(s))), "malformed %q", s)
	}
	// escaped in JSON: found by decoding, never by the raw bytes
	for _, in := range []string{
		`{"command":"echo s3cr3\u0074-token-value"}`,
		`{"command":"\u0073k-ant-abcdefgh123"}`,
		`{"command":"\u0041KIAABCDEFGHIJKLMNOP"}`,
		"{\"command\":\"echo \xff s3cr3t-token-value\"}",
	} {
		got := fast.json(json.RawMessage(in))
		assert.Equal(t, string(slow.json(json.RawMessage(in))), string(got), in)
		assert.Contains(t, string(got), Redacted, in)
	}
	// nothing to redact: the very same text and input
	ev := messages.Event{Type: messages.EvToolUse, Text: "reading", Input: json.RawMessage(`{"file_path":"pkg/file1.go"}`)}
	got := fast.event(ev)
	assert.Equal(t, ev, got)
	assert.Same(t, &ev.Input[0], &got.Input[0], "an input with nothing to redact is not re-encoded")
}

// mayHoldKeyShape is a necessary condition of a key shape: whatever
// keyShapes matches holds one of its literals.
func TestKeyShapeLiteralsAreNecessary(t *testing.T) {
	for _, s := range []string{
		"sk-ant-abcdefgh123", "sk-svcacct-abcdefghijklmnopqrstuvwxyz", "gho_abcdefghijklmnopqrstuvwxyz",
		"ghr_abcdefghijklmnopqrstuvwxyz", "xoxp-1234567890", "-----BEGIN PRIVATE KEY-----",
	} {
		require.True(t, keyShapes.MatchString(s), s)
		assert.True(t, mayHoldKeyShape(s), s)
		assert.True(t, mayHoldKeyShape([]byte(s)), s)
	}
	assert.False(t, mayHoldKeyShape("Turn 3 is done. step 4 of turn 2 {\"file_path\":\"pkg/file1.go\"}"))
}

// FuzzPrecheck: on any text, secret and tool input the pre-checked
// redactor gives what the exhaustive one gives, and mayHoldKeyShape never
// says no where keyShapes finds a match.
func FuzzPrecheck(f *testing.F) {
	f.Add("echo gitea-secret-1", "gitea-secret-1", `{"command":"echo gitea-secret-1"}`)
	f.Add("ghp_abcdefghijklmnopqrstuvwxyz0123 sk-ant-xxxxxxxxxx", "sk-ant-yyyyyy", `{"a":["sk-ant-xxxxxxxxxx"]}`)
	f.Add("plain", "hunter2-db", `{"command":"echo hunter2\u002ddb"}`)
	f.Add("AKIAABCDEFGHIJKLMNOP", "zzzzzz", `{"command": echo hunter2-db}`)
	f.Fuzz(func(t *testing.T, text, secret, input string) {
		if keyShapes.MatchString(text) && !mayHoldKeyShape(text) {
			t.Fatalf("mayHoldKeyShape missed a key shape in %q", text)
		}
		fast, slow := pair(secret)
		if a, b := fast.text(text), slow.text(text); a != b {
			t.Fatalf("text(%q): pre-checked %q, exhaustive %q", text, a, b)
		}
		if a, b := fast.json(json.RawMessage(input)), slow.json(json.RawMessage(input)); string(a) != string(b) {
			t.Fatalf("json(%q): pre-checked %s, exhaustive %s", input, a, b)
		}
	})
}

// BenchmarkRedactEvent is the redactor's cost per event of a scripted turn
// (thinking, a tool call and its result, a text), with its pre-checks and
// without (exhaustive): compare the two in the same run.
func BenchmarkRedactEvent(b *testing.B) {
	evs := []messages.Event{
		{Type: messages.EvThinking, Text: "step 3 of turn 2"},
		{Type: messages.EvToolUse, ToolUseID: "toolu_script_7", ToolName: "Read", Input: json.RawMessage(`{"file_path":"pkg/file3.go"}`)},
		{Type: messages.EvToolResult, ToolUseID: "toolu_script_7", Output: "package pkg\n"},
		{Type: messages.EvText, Text: "Turn 2 is done."},
	}
	fast, slow := pair("hunter2-db-PRIMARY", "s3cr3t-token-value")
	for _, bc := range []struct {
		name string
		r    *redactor
	}{{"prechecked", fast}, {"exhaustive", slow}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i := range evs {
					_ = bc.r.event(evs[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
		})
	}
}
