package codex

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
)

// The app-server wire: JSON-RPC 2.0 without the
// "jsonrpc" field, one JSON object per line in each direction. The server
// sends responses to our requests, notifications, and requests of its own
// (approvals), which we answer with a response carrying their id.

// msgKind says which of the three JSON-RPC shapes a line is.
type msgKind int

const (
	kindInvalid      msgKind = iota
	kindResponse             // id, and result or error
	kindNotification         // method, no id
	kindRequest              // method and id: the server asks us
)

func (k msgKind) String() string {
	switch k {
	case kindResponse:
		return "response"
	case kindNotification:
		return "notification"
	case kindRequest:
		return "request"
	}
	return "invalid"
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// message is one parsed line. ID is kept raw so a server request's id is
// echoed exactly (the server numbers its own requests from 0).
type message struct {
	Kind   msgKind
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *rpcError
}

// parseMessage parses one line of the server's stdout. Anything that is not
// one of the three shapes is an error that says why; the caller reports it
// and reads on.
func parseMessage(line []byte) (message, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return message{}, fmt.Errorf("not a JSON-RPC message (no JSON object): %q", clip(line, 120))
	}
	var raw struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return message{}, fmt.Errorf("not a JSON-RPC message: %v: %q", err, clip(line, 120))
	}
	m := message{ID: raw.ID, Params: raw.Params, Result: raw.Result}
	if string(m.ID) == "null" {
		m.ID = nil
	}
	if m.ID != nil && !validID(m.ID) {
		return message{}, fmt.Errorf("JSON-RPC id is neither a number nor a string: %s", clip(m.ID, 60))
	}
	switch {
	case raw.Method != nil:
		if *raw.Method == "" {
			return message{}, fmt.Errorf("JSON-RPC message with an empty method")
		}
		m.Method = *raw.Method
		m.Kind = kindNotification
		if m.ID != nil {
			m.Kind = kindRequest
		}
	case m.ID != nil:
		m.Kind = kindResponse
		if len(raw.Error) > 0 && string(raw.Error) != "null" {
			var e rpcError
			if err := json.Unmarshal(raw.Error, &e); err != nil {
				return message{}, fmt.Errorf("JSON-RPC error object does not parse: %v", err)
			}
			m.Error = &e
		} else if len(m.Result) == 0 {
			return message{}, fmt.Errorf("JSON-RPC response %s with neither result nor error", clip(m.ID, 60))
		}
	default:
		return message{}, fmt.Errorf("JSON-RPC message with neither method nor id: %q", clip(line, 120))
	}
	return m, nil
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		var s string
		return json.Unmarshal(id, &s) == nil
	}
	var n json.Number
	return json.Unmarshal(id, &n) == nil
}

// idKey is an id as a map key: numbers and strings with the same text are
// different ids.
func idKey(id json.RawMessage) string { return string(bytes.TrimSpace(id)) }

// encodeRequest is a client request line; id is the decimal number the
// session minted (Session.NewID), sent as a JSON number.
func encodeRequest(id, method string, params any) []byte {
	return line(map[string]any{"id": json.RawMessage(id), "method": method, "params": params})
}

// decodeWire is codex's Backend.Decode, pure: a response is the Reply of
// the host's request waiting for its id (a JSON-RPC error is a refusal),
// a notification or a server request goes to the core, and a line that is
// not JSON-RPC is the reason it cannot be read.
func decodeWire(line []byte) []cli.Event[*message] {
	m, err := parseMessage(line)
	switch {
	case err != nil:
		return []cli.Event[*message]{{Err: err}}
	case m.Kind == kindResponse:
		r := cli.Reply{ID: idKey(m.ID), Result: m.Result}
		if m.Error != nil {
			r.Refused, r.Message, r.Code = true, fmt.Sprintf("%s (JSON-RPC error %d)", m.Error.Message, m.Error.Code), messages.CodeInternal
		}
		return []cli.Event[*message]{{Reply: &r}}
	}
	return []cli.Event[*message]{{Msg: &m}}
}

// encodeNotification is a client notification line.
func encodeNotification(method string) []byte {
	return line(map[string]any{"method": method})
}

// encodeResult answers a server request.
func encodeResult(id json.RawMessage, result any) []byte {
	return line(map[string]any{"id": id, "result": result})
}

// encodeError refuses a server request.
func encodeError(id json.RawMessage, code int, msg string) []byte {
	return line(map[string]any{"id": id, "error": map[string]any{"code": code, "message": msg}})
}

func line(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own maps of plain values are encoded
	}
	return append(b, '\n')
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
