package modelmock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The OpenAI Responses wire: POST /v1/responses,
// streaming SSE or one JSON response. Tool calls are function_call items,
// their results function_call_output items in the next request's input.

// respRequest is the part of a Responses request the mock reads.
type respRequest struct {
	Model        string          `json:"model"`
	Instructions string          `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Tools        []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// respItem is one input item.
type respItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"` // custom_tool_call
	Output    json.RawMessage `json:"output"`
	Summary   json.RawMessage `json:"summary"` // reasoning
}

// decodeResponses turns a Responses request body into a Conversation.
func decodeResponses(body []byte) (*Conversation, error) {
	var req respRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("not a Responses request: %w", err)
	}
	c := &Conversation{Model: req.Model, Stream: req.Stream, System: req.Instructions}
	for _, t := range req.Tools {
		if t.Name != "" {
			c.Tools = append(c.Tools, t.Name)
		} else {
			c.Tools = append(c.Tools, t.Type) // a built-in tool (web_search, …)
		}
	}
	in := bytes.TrimSpace(req.Input)
	var items []respItem
	switch {
	case len(in) == 0 || string(in) == "null":
	case in[0] == '"':
		items = []respItem{{Type: "message", Role: "user", Content: in}}
	default:
		if err := json.Unmarshal(in, &items); err != nil {
			return nil, fmt.Errorf("not a Responses request: input: %w", err)
		}
	}
	for _, it := range items {
		switch it.Type {
		case "message", "":
			texts := openaiContent(it.Content)
			switch it.Role {
			case "system", "developer":
				addSystem(c, texts)
			case "assistant":
				convAppend(c, "assistant", Part{Kind: PartText, Text: strings.Join(texts, "")})
			default:
				for _, t := range texts {
					convAppend(c, "user", Part{Kind: PartText, Text: t})
				}
			}
		case "function_call":
			convAppend(c, "assistant", Part{Kind: PartToolUse, ToolUseID: it.CallID, ToolName: it.Name, Input: argsObject(it.Arguments)})
		case "custom_tool_call":
			in, _ := json.Marshal(map[string]string{"input": it.Input})
			convAppend(c, "assistant", Part{Kind: PartToolUse, ToolUseID: it.CallID, ToolName: it.Name, Input: in})
		case "function_call_output", "custom_tool_call_output":
			out := string(it.Output)
			if ts := openaiContent(it.Output); ts != nil {
				out = strings.Join(ts, "\n")
			}
			convAppend(c, "user", Part{Kind: PartToolResult, ToolUseID: it.CallID, Text: out})
		case "reasoning":
			convAppend(c, "assistant", Part{Kind: PartThinking, Text: strings.Join(openaiContent(it.Summary), "\n")})
		default:
			convAppend(c, "assistant", Part{Kind: PartOther})
		}
	}
	return c, nil
}

// argsObject is a function call's arguments string as JSON (a malformed
// one is kept as a JSON string).
func argsObject(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// respWire serves the Responses side of a Server.
type respWire struct{ s *Server }

func (w respWire) responses(rw http.ResponseWriter, r *http.Request, rec *Request) {
	c, err := decodeResponses(rec.Body)
	if err != nil {
		rec.Kind, rec.Status = KindInvalid, http.StatusBadRequest
		openaiError(rw, ErrorStep{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	m, st, ok := w.s.openaiAnswer(rw, r, rec, c)
	if !ok {
		return
	}
	out := respOutput(m)
	makeCustom(out, customTools(rec.Body))
	if !c.Stream {
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("x-request-id", "req_mock_"+m.id)
		_ = json.NewEncoder(rw).Encode(respObject(m, out, true))
		return
	}
	respStream(newSSE(rw, r, m.id), m, st, out)
}

// respOutput builds the response's output items, complete.
func respOutput(m rendered) []map[string]any {
	var out []map[string]any
	for i, b := range m.blocks {
		switch b.kind {
		case PartThinking:
			out = append(out, map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%s_%d", m.id, i),
				"summary": []any{map[string]any{"type": "summary_text", "text": b.text}}})
		case PartText:
			out = append(out, map[string]any{"type": "message", "id": fmt.Sprintf("msg_%s_%d", m.id, i), "role": "assistant",
				"status": "completed", "content": []any{outputText(b.text)}})
		case PartToolUse:
			out = append(out, map[string]any{"type": "function_call", "id": "fc_" + b.id, "call_id": b.id, "name": b.name,
				"arguments": string(b.input), "status": "completed"})
		}
	}
	return out
}

func outputText(s string) map[string]any {
	return map[string]any{"type": "output_text", "text": s, "annotations": []any{}, "logprobs": []any{}}
}

// respObject is the response object; done says whether it is finished
// (with its output and usage) or just created.
func respObject(m rendered, out []map[string]any, done bool) map[string]any {
	status := "in_progress"
	var incomplete, usage any
	output := []map[string]any{}
	if done {
		status, output = "completed", out
		if m.stopReason == "max_tokens" {
			status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
		}
		usage = map[string]any{"input_tokens": m.in, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": m.out, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": m.in + m.out}
	}
	return map[string]any{"id": "resp_" + m.id, "object": "response", "created_at": time.Now().Unix(), "status": status,
		"model": m.model, "output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"error": nil, "incomplete_details": incomplete, "instructions": nil, "metadata": map[string]any{},
		"temperature": 1, "top_p": 1, "usage": usage}
}

// respStream writes the Responses API's event sequence; it stops
// early when the client goes away.
func respStream(w *sseWriter, m rendered, st Step, out []map[string]any) {
	seq := 0
	send := func(typ string, fields map[string]any) bool {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(fields)
		return w.send(typ, b)
	}
	if !send("response.created", map[string]any{"response": respObject(m, out, false)}) ||
		!send("response.in_progress", map[string]any{"response": respObject(m, out, false)}) {
		return
	}
	chunks := max(st.Chunks, 1)
	pace := &pacer{w: w, d: st.ChunkDelay}
	for i, b := range m.blocks {
		item := out[i]
		id := item["id"]
		var added map[string]any
		switch b.kind {
		case PartThinking:
			added = map[string]any{"type": "reasoning", "id": id, "summary": []any{}}
		case PartText:
			added = map[string]any{"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}
		case PartToolUse:
			added = map[string]any{"type": "function_call", "id": id, "call_id": b.id, "name": b.name, "arguments": "", "status": "in_progress"}
			if item["type"] == "custom_tool_call" {
				added = map[string]any{"type": "custom_tool_call", "id": id, "call_id": b.id, "name": b.name, "input": "", "status": "in_progress"}
			}
		}
		if !send("response.output_item.added", map[string]any{"output_index": i, "item": added}) {
			return
		}
		switch b.kind {
		case PartThinking:
			part := map[string]any{"type": "summary_text", "text": ""}
			if !send("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": i, "summary_index": 0, "part": part}) {
				return
			}
			for _, piece := range split(b.text, chunks) {
				if !pace.wait() || !send("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": i, "summary_index": 0, "delta": piece}) {
					return
				}
			}
			part = map[string]any{"type": "summary_text", "text": b.text}
			if !send("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": i, "summary_index": 0, "text": b.text}) ||
				!send("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": i, "summary_index": 0, "part": part}) {
				return
			}
		case PartText:
			part := outputText("")
			if !send("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": part}) {
				return
			}
			for _, piece := range split(b.text, chunks) {
				if !pace.wait() || !send("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
					"delta": piece, "logprobs": []any{}}) {
					return
				}
			}
			if !send("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": b.text, "logprobs": []any{}}) ||
				!send("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": outputText(b.text)}) {
				return
			}
		case PartToolUse:
			if item["type"] == "custom_tool_call" {
				if !customStream(send, i, item) {
					return
				}
				break
			}
			for _, piece := range split(string(b.input), 2) {
				if !send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": piece}) {
					return
				}
			}
			if !send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "name": b.name, "arguments": string(b.input)}) {
				return
			}
		}
		if !send("response.output_item.done", map[string]any{"output_index": i, "item": item}) {
			return
		}
	}
	final := respObject(m, out, true)
	ev := "response.completed"
	if final["status"] == "incomplete" {
		ev = "response.incomplete"
	}
	send(ev, map[string]any{"response": final})
}
