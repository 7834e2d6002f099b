package modelmock

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// postResponses sends a Responses request as Codex does and returns the
// response.
func postResponses(t *testing.T, url string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(string(b)))
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// codexTools is the tool list Codex offers: a
// function shell tool and the freeform apply_patch.
var codexTools = []any{
	map[string]any{"type": "function", "name": "exec_command"},
	map[string]any{"type": "custom", "name": "apply_patch"},
}

func TestResponsesCustomToolCall(t *testing.T) {
	s, err := Start(t, Reference())
	require.NoError(t, err)
	body := func(prompt string, stream bool) map[string]any {
		return map[string]any{"model": "gpt-5.5", "stream": stream, "tools": codexTools,
			"input": []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}}}}
	}

	// streamed: the freeform tool is a custom_tool_call with its input text
	evs := readSSE(t, postResponses(t, s.URL(), body("TOOL:PATCH a.txt hello there", true)).Body)
	require.Contains(t, names(evs), "response.custom_tool_call_input.delta")
	require.Contains(t, names(evs), "response.custom_tool_call_input.done")
	require.NotContains(t, names(evs), "response.function_call_arguments.delta")
	var done map[string]any
	for _, e := range evs {
		if e.name == "response.output_item.done" {
			done = e.data["item"].(map[string]any)
		}
	}
	require.NotNil(t, done)
	require.Equal(t, "custom_tool_call", done["type"])
	require.Equal(t, "apply_patch", done["name"])
	require.Equal(t, "*** Begin Patch\n*** Add File: a.txt\n+hello there\n*** End Patch\n", done["input"])
	var input strings.Builder
	for _, e := range evs {
		if e.name == "response.custom_tool_call_input.delta" {
			input.WriteString(e.data["delta"].(string))
		}
	}
	require.Equal(t, done["input"], input.String(), "the deltas add up to the input")

	// a function tool stays a function_call, also in a non-streamed answer
	resp := postResponses(t, s.URL(), body("TOOL:SHELL ls -la", false))
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var obj struct {
		Output []map[string]any `json:"output"`
	}
	require.NoError(t, json.Unmarshal(raw, &obj))
	require.Len(t, obj.Output, 1)
	require.Equal(t, "function_call", obj.Output[0]["type"])
	require.JSONEq(t, `{"cmd":"ls -la"}`, obj.Output[0]["arguments"].(string))

	// the tool's output comes back as custom_tool_call_output and is
	// answered as a tool result
	follow := map[string]any{"model": "gpt-5.5", "stream": false, "tools": codexTools, "input": []any{
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "TOOL:PATCH a.txt hi"}}},
		map[string]any{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch\n"},
		map[string]any{"type": "custom_tool_call_output", "call_id": "c1", "output": "Success. Updated the following files:\nA a.txt"},
	}}
	raw, err = io.ReadAll(postResponses(t, s.URL(), follow).Body)
	require.NoError(t, err)
	require.Contains(t, string(raw), "TOOL_DONE")
	require.Contains(t, string(raw), "Success. Updated the following files")
}

func TestCustomInputForms(t *testing.T) {
	require.Equal(t, "patch", customInput(json.RawMessage(`{"input":"patch"}`)))
	require.Equal(t, "bare", customInput(json.RawMessage(`"bare"`)))
	require.Equal(t, `{"other":1}`, customInput(json.RawMessage(`{"other":1}`)))
	require.Nil(t, customTools([]byte(`not json`)))
	require.Equal(t, map[string]bool{"apply_patch": true}, customTools([]byte(`{"tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"x"}]}`)))
}
