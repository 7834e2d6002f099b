package grok

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// Result is grok's one terminal object of a `-p --output-format json` run
// (seed 003, live-verified with grok 0.2.93): the success envelope
// {"text","stopReason","sessionId","requestId","thought"} without a type
// field, or the error envelope {"type":"error","message"}.
type Result struct {
	Text       string
	StopReason string
	SessionID  string
	RequestID  string
	Thought    string
	// IsError is set for the error envelope; Message is its message.
	IsError bool
	Message string
}

// ErrNoObject says the output held no JSON object at all.
var ErrNoObject = errors.New("grok printed no JSON object")

// ParseOutput parses a turn's whole stdout once, after the process
// exited: the object is pretty-printed over many lines, so it cannot be
// read line by line. Text before the object (a wrapper's banner, a stray
// line) is returned as junk, not an error; the first object that decodes
// is the result.
func ParseOutput(out []byte) (r Result, junk string, err error) {
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) == 0 {
		return r, "", ErrNoObject
	}
	for start := 0; start < len(trimmed); {
		i := bytes.IndexByte(trimmed[start:], '{')
		if i < 0 {
			break
		}
		at := start + i
		// an object starts a line (or the output): a brace inside a junk
		// line is not where grok's object begins
		if at == 0 || trimmed[at-1] == '\n' || trimmed[at-1] == '\r' {
			dec := json.NewDecoder(bytes.NewReader(trimmed[at:]))
			var raw map[string]json.RawMessage
			if dec.Decode(&raw) == nil {
				return fromRaw(raw), strings.TrimSpace(string(trimmed[:at])), nil
			}
		}
		start = at + 1
	}
	return r, "", ErrNoObject
}

// fromRaw reads the fields, tolerating a value of the wrong type. Text
// falls back to result/response/content/message for a future release, as
// the seed's transport does.
func fromRaw(raw map[string]json.RawMessage) Result {
	str := func(k string) string {
		var s string
		if v, ok := raw[k]; ok && json.Unmarshal(v, &s) == nil {
			return s
		}
		return ""
	}
	r := Result{StopReason: str("stopReason"), SessionID: str("sessionId"), RequestID: str("requestId"), Thought: str("thought")}
	if str("type") == "error" {
		r.IsError, r.Message = true, str("message")
		if r.Message == "" {
			r.Message = "no message given"
		}
		return r
	}
	for _, k := range []string{"text", "result", "response", "content", "message"} {
		if s := str(k); s != "" {
			r.Text = s
			break
		}
	}
	return r
}
