package modelmock

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The OpenAI Chat Completions wire: POST
// /v1/chat/completions, streaming `data: {chunk}` lines ending in
// `data: [DONE]` (with a usage chunk when stream_options.include_usage),
// or one JSON completion. Tool calls are an assistant message's
// tool_calls, their results role "tool" messages.

// chatRequest is the part of a Chat Completions request the mock reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ReasoningContent string `json:"reasoning_content"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// decodeChat turns a Chat Completions request body into a Conversation.
func decodeChat(body []byte) (*Conversation, *chatRequest, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, fmt.Errorf("not a Chat Completions request: %w", err)
	}
	c := &Conversation{Model: req.Model, Stream: req.Stream}
	for _, t := range req.Tools {
		c.Tools = append(c.Tools, t.Function.Name)
	}
	for _, m := range req.Messages {
		texts := openaiContent(m.Content)
		switch m.Role {
		case "system", "developer":
			addSystem(c, texts)
		case "assistant":
			if m.ReasoningContent != "" {
				convAppend(c, "assistant", Part{Kind: PartThinking, Text: m.ReasoningContent})
			}
			if t := strings.Join(texts, ""); t != "" || len(m.ToolCalls) == 0 {
				convAppend(c, "assistant", Part{Kind: PartText, Text: t})
			}
			for _, tc := range m.ToolCalls {
				convAppend(c, "assistant", Part{Kind: PartToolUse, ToolUseID: tc.ID, ToolName: tc.Function.Name, Input: argsObject(tc.Function.Arguments)})
			}
		case "tool", "function":
			convAppend(c, "user", Part{Kind: PartToolResult, ToolUseID: m.ToolCallID, Text: strings.Join(texts, "\n")})
		default:
			for _, t := range texts {
				convAppend(c, "user", Part{Kind: PartText, Text: t})
			}
		}
	}
	return c, &req, nil
}

// chatWire serves the Chat Completions side of a Server.
type chatWire struct{ s *Server }

func (w chatWire) completions(rw http.ResponseWriter, r *http.Request, rec *Request) {
	c, req, err := decodeChat(rec.Body)
	if err != nil {
		rec.Kind, rec.Status = KindInvalid, http.StatusBadRequest
		openaiError(rw, ErrorStep{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	m, st, ok := w.s.answerSideOrMain(rw, r, rec, c, openaiError) // titles are side requests
	if !ok {
		return
	}
	if !req.Stream {
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("x-request-id", "req_mock_"+m.id)
		_ = json.NewEncoder(rw).Encode(chatObject(m))
		return
	}
	chatStream(newSSE(rw, r, m.id), m, st, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
}

func chatUsage(m rendered) map[string]any {
	return map[string]any{"prompt_tokens": m.in, "completion_tokens": m.out, "total_tokens": m.in + m.out,
		"prompt_tokens_details": map[string]any{"cached_tokens": 0}, "completion_tokens_details": map[string]any{"reasoning_tokens": 0}}
}

// chatObject is the whole completion (non-streaming).
func chatObject(m rendered) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	var text, thinking []string
	var calls []any
	for _, b := range m.blocks {
		switch b.kind {
		case PartThinking:
			thinking = append(thinking, b.text)
		case PartText:
			text = append(text, b.text)
		case PartToolUse:
			calls = append(calls, map[string]any{"id": b.id, "type": "function",
				"function": map[string]any{"name": b.name, "arguments": string(b.input)}})
		}
	}
	if len(text) > 0 {
		msg["content"] = strings.Join(text, "")
	}
	if len(thinking) > 0 {
		msg["reasoning_content"] = strings.Join(thinking, "")
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	return map[string]any{"id": "chatcmpl-" + m.id, "object": "chat.completion", "created": time.Now().Unix(), "model": m.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(m.stopReason), "logprobs": nil}},
		"usage":   chatUsage(m)}
}

// chatStream writes the chunks; it stops early when the client goes away.
func chatStream(w *sseWriter, m rendered, st Step, usage bool) {
	created := time.Now().Unix()
	chunk := func(choices []any, u any) bool {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-" + m.id, "object": "chat.completion.chunk", "created": created,
			"model": m.model, "choices": choices, "usage": u})
		return w.send("", b)
	}
	delta := func(d map[string]any, finish any) bool {
		return chunk([]any{map[string]any{"index": 0, "delta": d, "finish_reason": finish, "logprobs": nil}}, nil)
	}
	if !delta(map[string]any{"role": "assistant", "content": ""}, nil) {
		return
	}
	chunks := max(st.Chunks, 1)
	pace := &pacer{w: w, d: st.ChunkDelay}
	call := 0
	for _, b := range m.blocks {
		switch b.kind {
		case PartThinking, PartText:
			key := "content"
			if b.kind == PartThinking {
				key = "reasoning_content"
			}
			for _, piece := range split(b.text, chunks) {
				if !pace.wait() || !delta(map[string]any{key: piece}, nil) {
					return
				}
			}
		case PartToolUse:
			for k, piece := range split(string(b.input), 2) {
				tc := map[string]any{"index": call, "function": map[string]any{"arguments": piece}}
				if k == 0 {
					tc = map[string]any{"index": call, "id": b.id, "type": "function",
						"function": map[string]any{"name": b.name, "arguments": piece}}
				}
				if !delta(map[string]any{"tool_calls": []any{tc}}, nil) {
					return
				}
			}
			call++
		}
	}
	if !delta(map[string]any{}, finishReason(m.stopReason)) {
		return
	}
	if usage && !chunk([]any{}, chatUsage(m)) {
		return
	}
	w.send("", []byte("[DONE]"))
}
