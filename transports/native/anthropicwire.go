package native

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"sync"
)

// anthropicWire encodes a session's requests for the Messages API.
//
// Every model call sends the whole conversation, and the SDK's reflective
// encoder, run over all of it on every call, cost more CPU than the rest
// of a turn (bench native's profile, bench/README.md). The conversation
// only grows: messages are appended, and only the last one gains blocks
// (session.appendUser). So the SDK encodes each message once, each tool
// definition once and the request's fixed fields once, and a call's body
// is those bytes joined, "stream": true first, handed to the SDK's
// client as the whole body (Post's params, a []byte), which it sends as it
// is. What goes on the wire is what NewStreaming would have sent for
// sdkParams (TestAnthropicWireMatchesSDK, TestAnthropicRequestMatchesSDK);
// if the SDK cannot encode a piece, the call fails with the SDK's error,
// as NewStreaming's did.
//
// It is owned by the session's goroutine, the only caller of its provider.
type anthropicWire struct {
	head    []byte // the request's fixed fields, encoded: "{...}"
	headKey headKey
	// sent are the conversation's messages encoded so far, by index
	sent []encodedMessage
	// tools are the tool definitions encoded so far, by name
	tools map[string]encodedTool
	size  int // the last body's length, to size the next one
}

// headKey is what the fixed fields of a request are made of.
type headKey struct {
	model, system string
	effort        string
	maxTokens     int64
}

// encodedMessage is one message as the SDK encoded it, with its role, its
// first block's address and its block count then: blocks are never
// rewritten in place, so a message at the same index that matches all
// three is the same message, unchanged. raw is nil when no block of it is
// sent (it is left out).
type encodedMessage struct {
	role    string
	first   *block
	nblocks int
	raw     []byte
}

// encodes says whether e is the encoding of m.
func (e encodedMessage) encodes(m message) bool {
	return e.role == m.role && e.nblocks == len(m.blocks) && (len(m.blocks) == 0 || e.first == &m.blocks[0])
}

// encodedTool is one tool definition as the SDK encoded it, with the
// description and the schema map it was encoded from: a tool of the same
// name from elsewhere (an MCP server's list refreshed) is encoded anew.
type encodedTool struct {
	description string
	schema      uintptr
	raw         []byte
}

// body encodes req as the body of a streamed call.
func (w *anthropicWire) body(req request) ([]byte, error) {
	key := headKey{model: req.model, system: req.system, effort: string(req.effort), maxTokens: req.maxTokens}
	if w.head == nil || w.headKey != key {
		fixed := sdkParams(request{model: req.model, system: req.system, effort: req.effort, maxTokens: req.maxTokens})
		head, err := fixed.MarshalJSON()
		if err != nil {
			return nil, err
		}
		head = bytes.TrimSpace(head)
		if len(head) < 2 || head[len(head)-1] != '}' {
			return nil, errNotAnObject
		}
		w.head, w.headKey = head, key
	}
	for i, m := range req.messages {
		if i < len(w.sent) && w.sent[i].encodes(m) {
			continue
		}
		e := encodedMessage{role: m.role, nblocks: len(m.blocks)}
		if len(m.blocks) > 0 {
			e.first = &m.blocks[0]
		}
		if raw, ok := encodeMessage(m); ok {
			e.raw = raw
		} else if mp, ok := sdkMessage(m); ok {
			raw, err := mp.MarshalJSON()
			if err != nil {
				w.sent = w.sent[:min(i, len(w.sent))]
				return nil, err
			}
			e.raw = raw
		}
		w.sent = append(w.sent[:min(i, len(w.sent))], e)
	}
	w.sent = w.sent[:len(req.messages)]

	// "stream" first: the SDK's NewStreaming sets it in the body it sends
	b := append(make([]byte, 0, w.size+len(w.head)+512), `{"stream":true`...)
	if len(w.head) > 2 {
		b = append(append(b, ','), w.head[1:len(w.head)-1]...)
	}
	sep := func() {
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
	}
	sent := false
	for _, e := range w.sent {
		if e.raw == nil {
			continue
		}
		if !sent {
			sep()
			b = append(b, `"messages":[`...)
			sent = true
		} else {
			b = append(b, ',')
		}
		b = append(b, e.raw...)
	}
	if sent {
		b = append(b, ']')
	}
	for i, t := range req.tools {
		raw, err := w.tool(t)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			sep()
			b = append(b, `"tools":[`...)
		} else {
			b = append(b, ',')
		}
		b = append(b, raw...)
	}
	if len(req.tools) > 0 {
		b = append(b, ']')
	}
	b = append(b, '}')
	w.size = len(b)
	return b, nil
}

// tool is t's definition, encoded once per session.
func (w *anthropicWire) tool(t ToolSpec) ([]byte, error) {
	schema := reflect.ValueOf(t.Schema).Pointer()
	if e, ok := w.tools[t.Name]; ok && e.description == t.Description && e.schema == schema {
		return e.raw, nil
	}
	raw := builtinTool(t, schema)
	if raw == nil {
		var err error
		if raw, err = sdkTool(t).MarshalJSON(); err != nil {
			return nil, err
		}
	}
	if w.tools == nil {
		w.tools = map[string]encodedTool{}
	}
	w.tools[t.Name] = encodedTool{description: t.Description, schema: schema, raw: raw}
	return raw, nil
}

// builtinTools are the built-in tools' definitions (tools) as the SDK
// encodes them, made once per process: their specs never change and
// every session offers most of them, so a session's first call need not
// encode them again. The bytes are only ever copied into bodies.
var builtinTools = sync.OnceValues(func() (map[string][]byte, error) {
	out := make(map[string][]byte, len(tools))
	for name, def := range tools {
		raw, err := sdkTool(def.spec).MarshalJSON()
		if err != nil {
			return nil, err
		}
		out[name] = raw
	}
	return out, nil
})

// builtinTool is t's definition from builtinTools when t is a built-in
// tool's own spec (the same name and description, the same schema map:
// its address, the map living as long as the process); nil otherwise,
// or when the built-in tools do not encode (the SDK's error then comes
// from t's own encoding).
func builtinTool(t ToolSpec, schema uintptr) []byte {
	def, ok := tools[t.Name]
	if !ok || def.spec.Description != t.Description || reflect.ValueOf(def.spec.Schema).Pointer() != schema {
		return nil
	}
	enc, err := builtinTools()
	if err != nil {
		return nil
	}
	return enc[t.Name]
}

// encodeMessage encodes m byte for byte as the SDK's MessageParam would
// be (the fields in the SDK's order, strings and tool inputs as its
// encoding/json escapes and compacts them; TestAnthropicMessageEncoding
// holds the bytes to the SDK's): its reflective encoder was most of a
// call's encoding. It encodes the blocks a conversation is made of (text,
// thinking, tool_use, tool_result); false for a message with another
// block (an opaque one), which the SDK encodes, or with none to send.
func encodeMessage(m message) ([]byte, bool) {
	b := make([]byte, 0, 64+messageSize(m))
	b = append(b, `{"content":[`...)
	n := 0
	for _, bl := range m.blocks {
		if bl.kind == blockText && bl.text == "" {
			continue // the SDK leaves an empty text out
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		switch bl.kind {
		case blockText:
			b = append(b, `{"text":`...)
			b = appendJSONString(b, bl.text)
			b = append(b, `,"type":"text"}`...)
		case blockThinking:
			b = append(b, `{"signature":`...)
			b = appendJSONString(b, bl.signature)
			b = append(b, `,"thinking":`...)
			b = appendJSONString(b, bl.text)
			b = append(b, `,"type":"thinking"}`...)
		case blockToolUse:
			input, err := json.Marshal(json.RawMessage(orEmptyObject(bl.input)))
			if err != nil {
				return nil, false
			}
			b = append(b, `{"id":`...)
			b = appendJSONString(b, bl.id)
			b = append(b, `,"input":`...)
			b = append(b, input...)
			b = append(b, `,"name":`...)
			b = appendJSONString(b, bl.name)
			b = append(b, `,"type":"tool_use"}`...)
		case blockToolResult:
			b = append(b, `{"tool_use_id":`...)
			b = appendJSONString(b, bl.id)
			b = append(b, `,"is_error":`...)
			b = strconv.AppendBool(b, bl.isError)
			b = append(b, `,"content":[{"text":`...)
			b = appendJSONString(b, bl.text)
			b = append(b, `,"type":"text"}],"type":"tool_result"}`...)
		default:
			return nil, false
		}
	}
	if n == 0 {
		return nil, false
	}
	if m.role == roleAssistant {
		return append(b, `],"role":"assistant"}`...), true
	}
	return append(b, `],"role":"user"}`...), true
}

// messageSize is about the length of m's text, to size its encoding.
func messageSize(m message) int {
	n := 0
	for _, bl := range m.blocks {
		n += 48 + len(bl.text) + len(bl.signature) + len(bl.id) + len(bl.name) + len(bl.input)
	}
	return n
}

// appendJSONString appends s as encoding/json encodes a string (HTML
// characters, U+2028 and U+2029 escaped; invalid UTF-8 as U+FFFD), as
// the SDK's encoder does.
func appendJSONString(b []byte, s string) []byte {
	raw, _ := json.Marshal(s) // a string always encodes
	return append(b, raw...)
}

// errNotAnObject: the SDK encoded a request as something other than a JSON
// object (never seen; the call then fails with it).
var errNotAnObject = errors.New("the SDK did not encode the request as a JSON object")
