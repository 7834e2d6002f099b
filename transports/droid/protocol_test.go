package droid

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// captureLines returns the CLI's stdout lines of the reference capture
// (testdata/droid/droid_jsonrpc.jsonl: {"dir":"<<","msg":{...}} lines).
func captureLines(t testing.TB) [][]byte {
	t.Helper()
	f, err := os.Open("testdata/droid/droid_jsonrpc.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Dir string          `json:"dir"`
			Msg json.RawMessage `json:"msg"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		if l.Dir == "<<" {
			out = append(out, l.Msg)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func TestParseCapture(t *testing.T) {
	lines := captureLines(t)
	require.Len(t, lines, 44)
	types := map[string]int{}
	var perm *PermissionRequest
	var ends []Notification
	for _, b := range lines {
		l, err := ParseLine(b)
		require.NoError(t, err, string(b))
		switch l := l.(type) {
		case Notification:
			types[l.Type]++
			if l.Type == "agent_turn_completed" {
				ends = append(ends, l)
			}
		case PermissionRequest:
			perm = &l
		case Response:
			types["response"]++
		}
	}
	assert.Equal(t, 3, types["response"], "initialize and two add_user_message")
	assert.Equal(t, 2, types["tool_call"])
	assert.Equal(t, 1, types["tool_result"])
	require.Len(t, ends, 2)
	assert.Equal(t, "completed", ends[0].Reason)
	assert.Equal(t, TokenUsage{InputTokens: 120, OutputTokens: 30}, ends[0].Usage)
	require.NotNil(t, perm)
	assert.Equal(t, "d61e0ec5-709c-475c-a285-aec5c8804c90", perm.ID)
	assert.Equal(t, []string{"proceed_once", "proceed_always", "cancel"}, perm.Options)
	require.Len(t, perm.ToolUses, 1)
	tu := perm.ToolUses[0]
	assert.Equal(t, "Execute", tu.ToolName)
	assert.Equal(t, "exec", tu.ConfirmationType)
	assert.Equal(t, "medium", tu.ImpactLevel, "droid's impact level is the model's self-declared riskLevel")
	assert.Equal(t, "echo perm > /home/dev/work/droid/d_jsonrpc_perm.txt", tu.Command)
	assert.JSONEq(t, `{"command":"echo perm > /home/dev/work/droid/d_jsonrpc_perm.txt","riskLevelReason":"mock says so","riskLevel":"medium"}`, string(tu.Input))
}

func TestParseLineRejects(t *testing.T) {
	for _, in := range []string{"", "not json", "[1]", `{"type":"weird"}`, `{"type":"response"}`, `{"type":"request","id":{}}`,
		`{"type":"notification","method":"droid.session_notification","params":{}}`} {
		_, err := ParseLine([]byte(in))
		assert.Error(t, err, in)
	}
}

func TestEncoders(t *testing.T) {
	var env map[string]any
	require.NoError(t, json.Unmarshal(requestLine("r1", methodAddUserMessage, map[string]any{"text": "hi"}), &env))
	assert.Equal(t, map[string]any{"jsonrpc": "2.0", "type": "request", "factoryApiVersion": "1.0.0",
		"factoryProtocolVersion": "1.206.0", "id": "r1", "method": "droid.add_user_message",
		"params": map[string]any{"text": "hi"}}, env)
	env = nil
	require.NoError(t, json.Unmarshal(responseLine("p1", permissionAnswer{SelectedOption: optionCancel, Comment: "no"}), &env))
	assert.Equal(t, map[string]any{"selectedOption": "cancel", "comment": "no"}, env["result"])
	assert.Equal(t, "response", env["type"])
}

// FuzzParseLine: any line parses or fails with an error, never panics; a
// parsed permission request always has JSON inputs.
func FuzzParseLine(f *testing.F) {
	for _, b := range captureLines(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"type":"request","id":7,"method":"droid.request_permission","params":{"toolUses":[{"toolUse":{"input":"x"}}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLine(b)
		if err != nil {
			return
		}
		if p, ok := l.(PermissionRequest); ok {
			for _, tu := range p.ToolUses {
				if !json.Valid(tu.Input) {
					t.Fatalf("invalid input JSON %q", tu.Input)
				}
			}
		}
	})
}
