package modelmock

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// What the two OpenAI wires (Responses, Chat Completions) share: the
// answering of a decoded conversation, error bodies and content decoding.

// openaiAnswer picks the step for a decoded main request, records it and
// waits its delay. It writes the error answer itself; ok false means the
// response is done (an error step, or the client went away).
func (s *Server) openaiAnswer(rw http.ResponseWriter, r *http.Request, rec *Request, c *Conversation) (rendered, Step, bool) {
	rec.Model = c.Model
	rec.conv = c
	rec.Kind = KindMain
	p := s.picker.pick(c)
	rec.Rule = p.rule
	s.publish(rec)
	st := p.step
	if st.Delay > 0 && !sleepCtx(r.Context(), st.Delay.D()) {
		return rendered{}, st, false
	}
	if st.Error != nil {
		rec.Status = st.Error.Status
		openaiError(rw, *st.Error)
		return rendered{}, st, false
	}
	rec.Status = http.StatusOK
	return s.render(c.Model, &st, p.vars), st, true
}

// openaiError writes an OpenAI error body with the status (and
// Retry-After when the step has one).
func openaiError(rw http.ResponseWriter, e ErrorStep) {
	typ := e.Type
	var code any
	if typ == "" {
		switch {
		case e.Status == 401:
			typ, code = "invalid_request_error", "invalid_api_key"
		case e.Status == 404:
			typ, code = "invalid_request_error", "model_not_found"
		case e.Status == 429:
			typ, code = "rate_limit_error", "rate_limit_exceeded"
		case e.Status >= 500:
			typ = "server_error"
		default:
			typ = "invalid_request_error"
		}
	}
	writeError(rw, e, func(msg string) any {
		return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
	})
}

// openaiContent is an OpenAI content field: a string, null, or an array of
// parts ({type: input_text|output_text|text, text}).
func openaiContent(raw json.RawMessage) []string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return []string{s}
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text", "summary_text", "reasoning_text":
			out = append(out, p.Text)
		}
	}
	return out
}

// convAppend adds a part to the conversation, joining the last message
// when it has the same role (one assistant message per model response, as
// the scenario counts them; tool results with the user message they
// belong to).
func convAppend(c *Conversation, role string, p Part) {
	if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == role {
		c.Messages[n-1].Parts = append(c.Messages[n-1].Parts, p)
		return
	}
	c.Messages = append(c.Messages, Message{Role: role, Parts: []Part{p}})
}

// addSystem adds instructions (system and developer messages) to the
// conversation's system text.
func addSystem(c *Conversation, texts []string) {
	t := strings.Join(texts, "\n")
	if t == "" {
		return
	}
	if c.System != "" {
		c.System += "\n"
	}
	c.System += t
}

// finishReason maps a step's stop reason to Chat Completions'.
func finishReason(stop string) string {
	switch stop {
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	}
	return "stop"
}

// sseWriter writes server-sent events, flushing each; it reports false once
// the client is gone.
type sseWriter struct {
	r  *http.Request
	rw http.ResponseWriter
	fl http.Flusher
}

func newSSE(rw http.ResponseWriter, r *http.Request, id string) *sseWriter {
	h := rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("x-request-id", "req_mock_"+id)
	rw.WriteHeader(http.StatusOK)
	fl, _ := rw.(http.Flusher)
	return &sseWriter{r: r, rw: rw, fl: fl}
}

// send writes one event (an empty name writes a data line only).
func (w *sseWriter) send(event string, data []byte) bool {
	if w.r.Context().Err() != nil {
		return false
	}
	var b bytes.Buffer
	if event != "" {
		b.WriteString("event: " + event + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, err := w.rw.Write(b.Bytes()); err != nil {
		return false
	}
	if w.fl != nil {
		w.fl.Flush()
	}
	return true
}

// pacer waits a step's ChunkDelay before each text delta but the first.
type pacer struct {
	w     *sseWriter
	d     Duration
	first bool
}

func (p *pacer) wait() bool {
	if !p.first {
		p.first = true
		return true
	}
	return sleepCtx(p.w.r.Context(), p.d.D())
}

// openaiProbe answers the GETs OpenAI clients make besides model calls:
// the model list, and Codex's WebSocket probe of
// /v1/responses, whose 200 JSON answer sends it back to SSE.
func openaiProbe(rw http.ResponseWriter, path string) {
	rw.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(path, "/models") {
		_, _ = rw.Write([]byte(`{"object":"list","data":[{"id":"mock-model","object":"model","created":0,"owned_by":"modelmock"}]}`))
		return
	}
	_, _ = rw.Write([]byte(`{}`))
}
