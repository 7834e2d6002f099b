package modelmock

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The Gemini wire: POST
// /v1beta/models/{model}:streamGenerateContent?alt=sse streams `data:
// {candidates:[{content:{role:"model",parts:[...]}}]}` lines, the last
// with finishReason and usageMetadata; POST .../{model}:generateContent
// answers one such object. Parts are {text}, {text, thought:true} or
// {functionCall:{name,args,id}}; tool results come back as user parts
// {functionResponse:{name,response,id}}. The key arrives in
// x-goog-api-key (redacted in the log).

// geminiPart is one part of a Gemini content.
type geminiPart struct {
	Text         string `json:"text,omitempty"`
	Thought      bool   `json:"thought,omitempty"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse,omitempty"`
}

// geminiRequest is the part of a generateContent request the mock reads.
type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	SystemInstruction *struct {
		Parts []geminiPart `json:"parts"`
	} `json:"systemInstruction"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

// decodeGemini turns a generateContent body into a Conversation; model and
// stream come from the path.
func decodeGemini(body []byte, model string, stream bool) (*Conversation, error) {
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("not a Gemini generateContent request: %w", err)
	}
	c := &Conversation{Model: model, Stream: stream}
	if req.SystemInstruction != nil {
		var texts []string
		for _, p := range req.SystemInstruction.Parts {
			texts = append(texts, p.Text)
		}
		addSystem(c, texts)
	}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			c.Tools = append(c.Tools, f.Name)
		}
	}
	for _, m := range req.Contents {
		role := "user"
		if m.Role == "model" {
			role = "assistant"
		}
		for _, p := range m.Parts {
			switch {
			case p.FunctionCall != nil:
				convAppend(c, "assistant", Part{Kind: PartToolUse, ToolUseID: p.FunctionCall.ID, ToolName: p.FunctionCall.Name, Input: p.FunctionCall.Args})
			case p.FunctionResponse != nil:
				out, isErr := geminiResult(p.FunctionResponse.Response)
				convAppend(c, "user", Part{Kind: PartToolResult, ToolUseID: p.FunctionResponse.ID, Text: out, IsError: isErr})
			case p.Thought:
				convAppend(c, role, Part{Kind: PartThinking, Text: p.Text})
			default:
				convAppend(c, role, Part{Kind: PartText, Text: p.Text})
			}
		}
	}
	return c, nil
}

// geminiResult reads a functionResponse's response: {"output": ...} or
// {"error": ...} as gemini-cli sends them, else the raw JSON.
func geminiResult(raw json.RawMessage) (string, bool) {
	var r struct {
		Output json.RawMessage `json:"output"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(raw, &r)
	str := func(v json.RawMessage) string {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v)
	}
	switch {
	case len(r.Error) > 0 && string(r.Error) != "null":
		return str(r.Error), true
	case len(r.Output) > 0:
		return str(r.Output), false
	}
	return string(raw), false
}

// geminiPath splits /v1beta/models/{model}:{method}.
func geminiPath(path string) (model, method string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v1beta/models/")
	if !ok {
		return "", "", false
	}
	model, method, ok = strings.Cut(rest, ":")
	return model, method, ok && model != ""
}

// geminiWire serves the Gemini side of a Server.
type geminiWire struct{ s *Server }

func (w geminiWire) serve(rw http.ResponseWriter, r *http.Request, rec *Request) {
	model, method, _ := geminiPath(strings.TrimSuffix(r.URL.Path, "/"))
	stream := method == "streamGenerateContent"
	if !stream && method != "generateContent" {
		if method == "countTokens" {
			rec.Kind, rec.Status = KindCountTokens, http.StatusOK
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write([]byte(`{"totalTokens":100}`))
			return
		}
		rec.Kind, rec.Status = KindUnknown, http.StatusNotFound
		geminiError(rw, ErrorStep{Status: http.StatusNotFound, Message: "modelmock does not serve " + method})
		return
	}
	c, err := decodeGemini(rec.Body, model, stream)
	if err != nil {
		rec.Kind, rec.Status = KindInvalid, http.StatusBadRequest
		geminiError(rw, ErrorStep{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	m, st, ok := w.s.answerSideOrMain(rw, r, rec, c, geminiError)
	if !ok {
		return
	}
	if !stream {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(geminiChunk(m, m.blocks, true))
		return
	}
	geminiStream(newSSE(rw, r, m.id), m, st)
}

// geminiChunk is one generateContent response object holding blocks; the
// last one carries finishReason and usageMetadata.
func geminiChunk(m rendered, blocks []renderedBlock, last bool) map[string]any {
	parts := []any{}
	for _, b := range blocks {
		switch b.kind {
		case PartThinking:
			parts = append(parts, map[string]any{"text": b.text, "thought": true})
		case PartText:
			parts = append(parts, map[string]any{"text": b.text})
		case PartToolUse:
			args := b.input
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			parts = append(parts, map[string]any{"functionCall": map[string]any{"id": b.id, "name": b.name, "args": args}})
		}
	}
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	out := map[string]any{"candidates": []any{cand}, "modelVersion": m.model, "responseId": m.id}
	if last {
		finish := "STOP"
		if m.stopReason == "max_tokens" {
			finish = "MAX_TOKENS"
		}
		cand["finishReason"] = finish
		out["usageMetadata"] = map[string]any{"promptTokenCount": m.in, "candidatesTokenCount": m.out, "totalTokenCount": m.in + m.out}
	}
	return out
}

// geminiStream writes text and thinking in the step's chunks, then the
// function calls with the finish reason and usage in a last chunk.
func geminiStream(w *sseWriter, m rendered, st Step) {
	send := func(blocks []renderedBlock, last bool) bool {
		b, _ := json.Marshal(geminiChunk(m, blocks, last))
		return w.send("", b)
	}
	pace := &pacer{w: w, d: st.ChunkDelay}
	var calls []renderedBlock
	for _, b := range m.blocks {
		if b.kind == PartToolUse {
			calls = append(calls, b)
			continue
		}
		for _, piece := range split(b.text, max(st.Chunks, 1)) {
			if !pace.wait() || !send([]renderedBlock{{kind: b.kind, text: piece}}, false) {
				return
			}
		}
	}
	send(calls, true)
}

// geminiError writes a Google API error body.
func geminiError(rw http.ResponseWriter, e ErrorStep) {
	status := "INVALID_ARGUMENT"
	switch {
	case e.Type != "":
		status = e.Type
	case e.Status == 401 || e.Status == 403:
		status = "PERMISSION_DENIED"
	case e.Status == 404:
		status = "NOT_FOUND"
	case e.Status == 429:
		status = "RESOURCE_EXHAUSTED"
	case e.Status >= 500:
		status = "INTERNAL"
	}
	writeError(rw, e, func(msg string) any {
		return map[string]any{"error": map[string]any{"code": e.Status, "message": msg, "status": status}}
	})
}
