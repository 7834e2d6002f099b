package modelmock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The Anthropic Messages wire: POST /v1/messages (streaming SSE or one JSON
// message) and POST /v1/messages/count_tokens.

// anthRequest is the part of a Messages request the mock reads.
type anthRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	System json.RawMessage `json:"system"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Stream        bool     `json:"stream"`
	MaxTokens     int      `json:"max_tokens"`
	StopSequences []string `json:"stop_sequences"`
	OutputConfig  *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// anthBlock is one content block of a request message.
type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// decodeAnthropic turns a Messages request body into a Conversation and
// says which side request it is, if any.
func decodeAnthropic(body []byte) (*Conversation, *anthRequest, error) {
	var req anthRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, fmt.Errorf("not a Messages request: %w", err)
	}
	c := &Conversation{Model: req.Model, Stream: req.Stream, System: textOf(req.System)}
	for _, t := range req.Tools {
		c.Tools = append(c.Tools, t.Name)
	}
	for _, m := range req.Messages {
		if m.Role == "system" {
			// Claude Code folds a message the user sent mid-turn into the
			// running turn as a system message: the model sees it as the
			// newest thing the user said.
			if t, ok := steeredText(textOf(m.Content)); ok {
				c.Messages = append(c.Messages, Message{Role: "user", Parts: []Part{{Kind: PartText, Text: t}}})
				continue
			}
		}
		msg := Message{Role: m.Role}
		for _, b := range blocksOf(m.Content) {
			switch b.Type {
			case "text":
				msg.Parts = append(msg.Parts, Part{Kind: PartText, Text: b.Text})
			case "thinking":
				msg.Parts = append(msg.Parts, Part{Kind: PartThinking, Text: b.Thinking})
			case "tool_use":
				msg.Parts = append(msg.Parts, Part{Kind: PartToolUse, ToolUseID: b.ID, ToolName: b.Name, Input: b.Input})
			case "tool_result":
				msg.Parts = append(msg.Parts, Part{Kind: PartToolResult, ToolUseID: b.ToolUseID, Text: textOf(b.Content), IsError: b.IsError})
			default:
				msg.Parts = append(msg.Parts, Part{Kind: PartOther})
			}
		}
		c.Messages = append(c.Messages, msg)
	}
	return c, &req, nil
}

// steerIntro opens the system message in which Claude Code 2.1.328 hands
// the model a user message sent while a turn runs; steerOutro follows it.
const (
	steerIntro = "The user sent a new message while you were working:\n"
	steerOutro = "\n\nThis is how Claude Code surfaces messages"
)

// steeredText extracts the user's message from such a system message.
func steeredText(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, steerIntro)
	if !ok {
		return "", false
	}
	if i := strings.Index(rest, steerOutro); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}

// blocksOf reads a content field: a string or an array of blocks.
func blocksOf(raw json.RawMessage) []anthBlock {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return []anthBlock{{Type: "text", Text: s}}
	}
	var bs []anthBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// textOf joins the text of a content field (a string or blocks).
func textOf(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocksOf(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// anthSide classifies the side requests Claude Code makes besides the
// agent's own turns: they are answered without
// consulting the scenario.
func anthSide(c *Conversation, req *anthRequest) Kind {
	if req.MaxTokens == 1 && len(req.Tools) == 0 {
		return KindModelCheck
	}
	if f := req.OutputConfig; f != nil && f.Format != nil && f.Format.Type == "json_schema" && len(req.Tools) == 0 {
		return KindTitle
	}
	for _, m := range c.Messages {
		if m.Role != "user" {
			continue
		}
		for _, p := range m.Parts {
			if p.Kind == PartText && strings.HasPrefix(strings.TrimSpace(p.Text), "<transcript>") {
				return KindClassifier
			}
		}
	}
	return KindMain
}

// schemaAnswer builds a JSON object that satisfies a simple object schema:
// strings get a mock value ("Mock session" for a title), numbers 0,
// booleans false.
func schemaAnswer(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	out := map[string]any{}
	for name, p := range s.Properties {
		switch p.Type {
		case "number", "integer":
			out[name] = 0
		case "boolean":
			out[name] = false
		case "array":
			out[name] = []any{}
		default:
			out[name] = "mock " + name
		}
	}
	if _, ok := s.Properties["title"]; ok || len(out) == 0 {
		out["title"] = "Mock session"
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// anthWire serves the Anthropic side of a Server.
type anthWire struct{ s *Server }

func (w anthWire) messages(rw http.ResponseWriter, r *http.Request, rec *Request) {
	c, req, err := decodeAnthropic(rec.Body)
	if err != nil {
		rec.Kind, rec.Status = KindInvalid, http.StatusBadRequest
		anthError(rw, ErrorStep{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	rec.Model = c.Model
	rec.conv = c
	rec.Kind = anthSide(c, req)
	var p picked
	switch rec.Kind {
	case KindTitle:
		p = picked{step: Step{Text: schemaAnswer(req.OutputConfig.Format.Schema)}, rule: -1}
	case KindClassifier:
		p = picked{step: Step{Text: "<block>no", StopReason: "stop_sequence"}, rule: -1}
	case KindModelCheck:
		p = picked{step: Step{Text: "Hi", StopReason: "max_tokens", OutputTokens: 1}, rule: -1}
	default:
		p = w.s.picker.pick(c)
	}
	rec.Rule = p.rule
	w.s.publish(rec)
	st := p.step
	if st.Delay > 0 && !sleepCtx(r.Context(), st.Delay.D()) {
		return
	}
	if st.Error != nil {
		rec.Status = st.Error.Status
		anthError(rw, *st.Error)
		return
	}
	msg := w.s.render(c.Model, &st, p.vars)
	if p.step.StopReason == "stop_sequence" && len(req.StopSequences) > 0 {
		msg.stopSequence = req.StopSequences[0]
	}
	rec.Status = http.StatusOK
	if req.Stream {
		anthStream(r.Context(), rw, msg, st)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("request-id", "req_mock_"+msg.id)
	_ = json.NewEncoder(rw).Encode(msg.json())
}

func (w anthWire) countTokens(rw http.ResponseWriter, r *http.Request, rec *Request) {
	rec.Kind, rec.Status, rec.Rule = KindCountTokens, http.StatusOK, -1
	rw.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(rw, `{"input_tokens":%d}`, 1+len(rec.Body)/4)
}

// rendered is a response with its templates expanded and its ids minted.
type rendered struct {
	id           string
	model        string
	blocks       []renderedBlock
	stopReason   string
	stopSequence string
	in, out      int64
}

type renderedBlock struct {
	kind  PartKind // text, thinking or tool_use
	text  string
	id    string
	name  string
	input json.RawMessage
}

func (m *rendered) json() map[string]any {
	content := []any{}
	for _, b := range m.blocks {
		switch b.kind {
		case PartThinking:
			content = append(content, map[string]any{"type": "thinking", "thinking": b.text, "signature": "mock-signature"})
		case PartText:
			content = append(content, map[string]any{"type": "text", "text": b.text})
		case PartToolUse:
			content = append(content, map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
		}
	}
	var seq any
	if m.stopSequence != "" {
		seq = m.stopSequence
	}
	return map[string]any{"id": m.id, "type": "message", "role": "assistant", "model": m.model, "content": content,
		"stop_reason": m.stopReason, "stop_sequence": seq,
		"usage": map[string]any{"input_tokens": m.in, "output_tokens": m.out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
}

// anthStream writes the Messages API's SSE sequence; it stops
// early when the client goes away.
func anthStream(ctx context.Context, rw http.ResponseWriter, m rendered, st Step) {
	h := rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("request-id", "req_mock_"+m.id)
	rw.WriteHeader(http.StatusOK)
	fl, _ := rw.(http.Flusher)
	send := func(event string, data any) bool {
		if ctx.Err() != nil {
			return false
		}
		b, _ := json.Marshal(data)
		if _, err := fmt.Fprintf(rw, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	start := map[string]any{"id": m.id, "type": "message", "role": "assistant", "model": m.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": m.in, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
	if !send("message_start", map[string]any{"type": "message_start", "message": start}) {
		return
	}
	if !send("ping", map[string]any{"type": "ping"}) {
		return
	}
	chunks := max(st.Chunks, 1)
	first := true
	wait := func() bool {
		if first {
			first = false
			return true
		}
		return sleepCtx(ctx, st.ChunkDelay.D())
	}
	for i, b := range m.blocks {
		var cb, delta map[string]any
		var pieces []string
		switch b.kind {
		case PartThinking:
			cb = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
			pieces = split(b.text, chunks)
		case PartText:
			cb = map[string]any{"type": "text", "text": ""}
			pieces = split(b.text, chunks)
		case PartToolUse:
			cb = map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": map[string]any{}}
			pieces = split(string(b.input), 2)
		}
		if !send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": cb}) {
			return
		}
		for _, piece := range pieces {
			switch b.kind {
			case PartThinking:
				delta = map[string]any{"type": "thinking_delta", "thinking": piece}
			case PartText:
				delta = map[string]any{"type": "text_delta", "text": piece}
			case PartToolUse:
				delta = map[string]any{"type": "input_json_delta", "partial_json": piece}
			}
			if b.kind != PartToolUse && !wait() {
				return
			}
			if !send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta}) {
				return
			}
		}
		if b.kind == PartThinking {
			if !send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "signature_delta", "signature": "mock-signature"}}) {
				return
			}
		}
		if !send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}) {
			return
		}
	}
	var seq any
	if m.stopSequence != "" {
		seq = m.stopSequence
	}
	if !send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": m.stopReason, "stop_sequence": seq},
		"usage": map[string]any{"output_tokens": m.out}}) {
		return
	}
	send("message_stop", map[string]any{"type": "message_stop"})
}

// split cuts s into n pieces of about equal length (fewer when s is short);
// an empty s is one empty piece.
func split(s string, n int) []string {
	if n <= 1 || len(s) <= 1 {
		return []string{s}
	}
	rs := []rune(s)
	n = min(n, len(rs))
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, string(rs[i*len(rs)/n:(i+1)*len(rs)/n]))
	}
	return out
}

// anthError writes an Anthropic error body with the status.
func anthError(rw http.ResponseWriter, e ErrorStep) {
	typ := e.Type
	if typ == "" {
		switch {
		case e.Status == 401:
			typ = "authentication_error"
		case e.Status == 403:
			typ = "permission_error"
		case e.Status == 404:
			typ = "not_found_error"
		case e.Status == 413:
			typ = "request_too_large"
		case e.Status == 429:
			typ = "rate_limit_error"
		case e.Status == 529:
			typ = "overloaded_error"
		case e.Status >= 500:
			typ = "api_error"
		default:
			typ = "invalid_request_error"
		}
	}
	writeError(rw, e, func(msg string) any {
		return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	})
}

// writeError writes an error step's status, Retry-After and the wire's JSON
// body, which body builds from the message (the status text by default).
func writeError(rw http.ResponseWriter, e ErrorStep, body func(msg string) any) {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.RetryAfter != "" {
		rw.Header().Set("Retry-After", e.RetryAfter)
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(e.Status)
	b, _ := json.Marshal(body(msg))
	_, _ = rw.Write(b)
}

// sleepCtx waits d unless ctx ends first; false means it ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
