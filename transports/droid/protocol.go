package droid

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
)

// The stream-jsonrpc wire: one JSON object per
// line each way, a JSON-RPC 2.0 envelope with droid's own "type" field
// (request, response, notification) and its API and protocol versions.

// Versions droid 0.215.0 speaks; sent on every message of ours.
const (
	factoryAPIVersion      = "1.0.0"
	factoryProtocolVersion = "1.206.0"
)

// Methods of the host and of droid.
const (
	methodInitialize     = "droid.initialize_session"
	methodLoad           = "droid.load_session"
	methodAddUserMessage = "droid.add_user_message"
	methodInterrupt      = "droid.interrupt_session"
	methodUpdateSettings = "droid.update_session_settings"
	methodNotification   = "droid.session_notification"
	methodPermission     = "droid.request_permission"
)

// Permission options droid offers (request_permission's options[].value).
const (
	optionProceedOnce   = "proceed_once"
	optionProceedAlways = "proceed_always"
	optionCancel        = "cancel"
)

// envelope is every line of the wire.
type envelope struct {
	JSONRPC         string          `json:"jsonrpc"`
	Type            string          `json:"type"`
	APIVersion      string          `json:"factoryApiVersion,omitempty"`
	ProtocolVersion string          `json:"factoryProtocolVersion,omitempty"`
	ID              json.RawMessage `json:"id,omitempty"`
	Method          string          `json:"method,omitempty"`
	Params          json.RawMessage `json:"params,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	Error           *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Line is one parsed stdout line: Response, PermissionRequest, OtherRequest
// or Notification.
type Line interface{ isLine() }

// Response answers one of our requests.
type Response struct {
	ID     string
	Result json.RawMessage
	Err    *RPCError
}

// PermissionRequest is droid.request_permission: droid asks before it runs
// the tool calls in ToolUses.
type PermissionRequest struct {
	ID       string
	ToolUses []PermissionToolUse
	Options  []string // the option values offered
}

// PermissionToolUse is one tool call a permission request is about.
type PermissionToolUse struct {
	ToolUseID        string
	ToolName         string
	Input            json.RawMessage
	ConfirmationType string // exec, create, edit, ...
	FilePath         string // details.filePath, for the file tools
	Command          string // details.fullCommand, for exec
	ImpactLevel      string // details.impactLevel: droid's reading of the model's riskLevel
}

// OtherRequest is a request of droid the host does not handle.
type OtherRequest struct {
	ID     string
	Method string
}

// Notification is droid.session_notification, its notification decoded
// into the fields the transport reads. Type names it; fields not used by
// that type are zero.
type Notification struct {
	Type string
	// droid_working_state_changed
	NewState string
	// assistant_text_delta
	TextDelta string
	MessageID string
	// tool_call
	ToolUseID string
	ToolName  string
	Input     json.RawMessage
	// tool_result (ToolUseID too)
	Content string
	IsError bool
	// agent_turn_completed
	Reason string
	Usage  TokenUsage
	// settings_updated
	Settings *Settings
	// create_message: the text of an assistant message
	Role string
	Text string
	// error-like notifications
	Message string
}

// TokenUsage is droid's tokenUsage.
type TokenUsage struct {
	InputTokens         int64 `json:"inputTokens"`
	OutputTokens        int64 `json:"outputTokens"`
	CacheCreationTokens int64 `json:"cacheCreationTokens"`
	CacheReadTokens     int64 `json:"cacheReadTokens"`
}

// Settings are the session settings droid reports (settings_updated and
// the initialize response).
type Settings struct {
	ModelID         string `json:"modelId"`
	ReasoningEffort string `json:"reasoningEffort"`
	AutonomyLevel   string `json:"autonomyLevel"`
	InteractionMode string `json:"interactionMode"`
}

func (Response) isLine()          {}
func (PermissionRequest) isLine() {}
func (OtherRequest) isLine()      {}
func (Notification) isLine()      {}

var errNotObject = errors.New("not a JSON object")

// Decode reads one stdout line for the kit; pure. A response is the reply
// to a request of the host (its JSON-RPC error mapped to ours) and, for a
// reply no request waits for (one to a turn's message), a Line for the
// core too; any other line is a Line for the core, or why it cannot be
// read.
func Decode(line []byte) []cli.Event[Line] {
	l, err := ParseLine(line)
	if err != nil {
		return []cli.Event[Line]{{Err: err}}
	}
	if r, ok := l.(Response); ok {
		reply := &cli.Reply{ID: r.ID, Result: r.Result}
		if r.Err != nil {
			reply.Refused, reply.Message, reply.Code = true, r.Err.Message, rpcErrorCode(r.Err.Code)
		}
		return []cli.Event[Line]{{Reply: reply, Msg: l}}
	}
	return []cli.Event[Line]{{Msg: l}}
}

// rpcErrorCode maps a JSON-RPC error code to ours.
func rpcErrorCode(c int) messages.Code {
	switch c {
	case -32602, -32600, -32700:
		return messages.CodeInvalid
	case -32601:
		return messages.CodeUnsupported
	}
	return messages.CodeInternal
}

// ParseLine decodes one stdout line. A line that is not a JSON object, or
// not an envelope codesession knows, is an error; an unknown notification
// type is a Notification with only Type set (droid adds them freely).
func ParseLine(b []byte) (Line, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, errNotObject
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	switch env.Type {
	case "response":
		id, err := rawID(env.ID)
		if err != nil {
			return nil, err
		}
		return Response{ID: id, Result: env.Result, Err: env.Error}, nil
	case "request":
		id, err := rawID(env.ID)
		if err != nil {
			return nil, err
		}
		if env.Method == methodPermission {
			return parsePermission(id, env.Params)
		}
		return OtherRequest{ID: id, Method: env.Method}, nil
	case "notification":
		if env.Method != methodNotification {
			return Notification{Type: "method:" + env.Method}, nil
		}
		return parseNotification(env.Params)
	}
	return nil, fmt.Errorf("unknown message type %q", env.Type)
}

// rawID reads a JSON-RPC id: droid uses strings; a number is taken as its
// text.
func rawID(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", errors.New("a request or response without an id")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), nil
	}
	return "", fmt.Errorf("an id that is neither a string nor a number: %s", raw)
}

func parsePermission(id string, params json.RawMessage) (Line, error) {
	var p struct {
		ToolUses []struct {
			ToolUse struct {
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"toolUse"`
			ConfirmationType string `json:"confirmationType"`
			Details          struct {
				FilePath    string `json:"filePath"`
				FullCommand string `json:"fullCommand"`
				ImpactLevel string `json:"impactLevel"`
			} `json:"details"`
		} `json:"toolUses"`
		Options []struct {
			Value string `json:"value"`
		} `json:"options"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("droid.request_permission: %w", err)
	}
	r := PermissionRequest{ID: id}
	for _, tu := range p.ToolUses {
		r.ToolUses = append(r.ToolUses, PermissionToolUse{ToolUseID: tu.ToolUse.ID, ToolName: tu.ToolUse.Name,
			Input: validJSON(tu.ToolUse.Input), ConfirmationType: tu.ConfirmationType, FilePath: tu.Details.FilePath,
			Command: tu.Details.FullCommand, ImpactLevel: tu.Details.ImpactLevel})
	}
	for _, o := range p.Options {
		r.Options = append(r.Options, o.Value)
	}
	return r, nil
}

func parseNotification(params json.RawMessage) (Line, error) {
	var p struct {
		Notification json.RawMessage `json:"notification"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("droid.session_notification: %w", err)
	}
	var n struct {
		Type      string `json:"type"`
		NewState  string `json:"newState"`
		TextDelta string `json:"textDelta"`
		MessageID string `json:"messageId"`
		ToolUse   struct {
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"toolUse"`
		ToolUseID  string          `json:"toolUseId"`
		Content    json.RawMessage `json:"content"`
		IsError    bool            `json:"isError"`
		Reason     string          `json:"reason"`
		TokenUsage TokenUsage      `json:"tokenUsage"`
		Settings   *Settings       `json:"settings"`
		Message    json.RawMessage `json:"message"`
		Error      json.RawMessage `json:"error"`
	}
	if len(p.Notification) == 0 {
		return nil, errors.New("droid.session_notification without a notification")
	}
	if err := json.Unmarshal(p.Notification, &n); err != nil {
		return nil, fmt.Errorf("droid.session_notification: %w", err)
	}
	out := Notification{Type: n.Type}
	switch n.Type {
	case "droid_working_state_changed":
		out.NewState = n.NewState
	case "assistant_text_delta":
		out.TextDelta, out.MessageID = n.TextDelta, n.MessageID
	case "tool_call":
		out.ToolUseID, out.ToolName, out.Input = n.ToolUse.ID, n.ToolUse.Name, validJSON(n.ToolUse.Input)
	case "tool_result":
		out.ToolUseID, out.IsError, out.Content = n.ToolUseID, n.IsError, contentText(n.Content)
	case "agent_turn_completed":
		out.Reason, out.Usage = n.Reason, n.TokenUsage
	case "settings_updated":
		out.Settings = n.Settings
	case "create_message":
		var m struct {
			ID      string `json:"id"`
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(n.Message, &m) == nil {
			out.Role, out.MessageID = m.Role, m.ID
			for _, c := range m.Content {
				if c.Type == "text" {
					out.Text += c.Text
				}
			}
		}
	default:
		// an error-like notification: keep what it says
		out.Message = firstNonEmpty(contentText(n.Message), contentText(n.Error))
	}
	return out, nil
}

// contentText reads a tool result's or a message's content: a string, or
// an array of {type:text,text} blocks, or an object with a message; else
// the raw JSON.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var b bytes.Buffer
		for _, bl := range blocks {
			b.WriteString(bl.Text)
		}
		return b.String()
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	return string(raw)
}

// validJSON returns raw when it is valid JSON, else raw as a JSON string,
// so an event's Input is always JSON.
func validJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	if json.Valid(raw) {
		return raw
	}
	b, _ := json.Marshal(string(raw))
	return b
}

// requestLine encodes a request of the host.
func requestLine(id, method string, params any) []byte {
	p, err := json.Marshal(params)
	if err != nil {
		p = []byte(`{}`)
	}
	idb, _ := json.Marshal(id)
	return encode(envelope{JSONRPC: "2.0", Type: "request", APIVersion: factoryAPIVersion,
		ProtocolVersion: factoryProtocolVersion, ID: idb, Method: method, Params: p})
}

// responseLine encodes the host's response to a request of droid.
func responseLine(id string, result any) []byte {
	r, err := json.Marshal(result)
	if err != nil {
		r = []byte(`{}`)
	}
	idb, _ := json.Marshal(id)
	return encode(envelope{JSONRPC: "2.0", Type: "response", APIVersion: factoryAPIVersion,
		ProtocolVersion: factoryProtocolVersion, ID: idb, Result: r})
}

// errorResponseLine refuses a request of droid.
func errorResponseLine(id, msg string) []byte {
	idb, _ := json.Marshal(id)
	return encode(envelope{JSONRPC: "2.0", Type: "response", APIVersion: factoryAPIVersion,
		ProtocolVersion: factoryProtocolVersion, ID: idb, Error: &RPCError{Code: -32601, Message: msg}})
}

func encode(env envelope) []byte {
	b, _ := json.Marshal(env) // only marshalable fields
	return append(b, '\n')
}

// permissionAnswer is the result of a request_permission response; the
// comment is droid's own field for the user's words.
type permissionAnswer struct {
	SelectedOption string `json:"selectedOption"`
	Comment        string `json:"comment,omitempty"`
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
