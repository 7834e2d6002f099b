package modelmock

import (
	"encoding/json"
	"strings"
)

// Freeform ("custom") tools of the Responses wire:
// a client such as Codex offers apply_patch as {type:"custom", name}, and
// the model calls it with a custom_tool_call item whose input is plain
// text, streamed as response.custom_tool_call_input.delta/done. A scenario
// calls such a tool like any other, with Input {"input": "<text>"} (a bare
// JSON string works too); the wire then decides the item type from what
// the request offered, so one scenario serves every client.

// customTools returns the names of the freeform tools a Responses request
// offers.
func customTools(body []byte) map[string]bool {
	var req struct {
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var m map[string]bool
	for _, t := range req.Tools {
		if t.Type == "custom" && t.Name != "" {
			if m == nil {
				m = map[string]bool{}
			}
			m[t.Name] = true
		}
	}
	return m
}

// customInput is the freeform text a scripted call carries: Input's
// "input" string, a bare JSON string, or else Input verbatim.
func customInput(in json.RawMessage) string {
	var obj struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal(in, &obj) == nil && obj.Input != nil {
		return *obj.Input
	}
	var s string
	if json.Unmarshal(in, &s) == nil {
		return s
	}
	return string(in)
}

// makeCustom turns the function_call items of out that call a freeform
// tool into custom_tool_call items.
func makeCustom(out []map[string]any, custom map[string]bool) {
	for _, item := range out {
		if item["type"] != "function_call" {
			continue
		}
		name, _ := item["name"].(string)
		if !custom[name] {
			continue
		}
		args, _ := item["arguments"].(string)
		item["type"] = "custom_tool_call"
		item["id"] = "ctc_" + strings.TrimPrefix(item["id"].(string), "fc_")
		item["input"] = customInput(json.RawMessage(args))
		delete(item, "arguments")
	}
}

// customStream writes the streamed events of a custom_tool_call item
// between its added and done events; false when the client went away.
func customStream(send func(string, map[string]any) bool, i int, item map[string]any) bool {
	id := item["id"]
	input, _ := item["input"].(string)
	for _, piece := range split(input, 2) {
		if !send("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": i, "delta": piece}) {
			return false
		}
	}
	return send("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": i, "input": input})
}
