package claudecode

// The stream-json protocol of `claude -p --input-format stream-json
// --output-format stream-json`: parsing one
// stdout line into a typed Line, and encoding the stdin messages. Pure
// functions only; the fixtures in testdata/ (the reference captures) feed
// the tests.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/subprocess"
)

// Line is one parsed stdout line: one of the types below.
type Line interface{ lineType() string }

// SystemInit is system/init: sent at the start of every turn.
type SystemInit struct {
	SessionID      string
	Model          string
	PermissionMode string
	Cwd            string
	Version        string
	Tools          []string
}

// SessionState is system/session_state_changed (running, requires_action,
// idle), emitted when CLAUDE_CODE_SDK_READS_SESSION_STATE=1.
type SessionState struct {
	SessionID string
	State     string
}

// SystemStatus is system/status (permissionMode after set_permission_mode).
type SystemStatus struct {
	PermissionMode string
}

// SystemOther is any other system message (task_started, informational,
// permission_denied, ...).
type SystemOther struct {
	Subtype string
	Content string // informational text, when present
}

// Block is one content block of an assistant or user message.
type Block struct {
	Type      string // text, thinking, tool_use, tool_result, image, ...
	Text      string // text; thinking; a tool result's output (flattened)
	ID        string // tool_use
	Name      string // tool_use
	Input     json.RawMessage
	ToolUseID string // tool_result
	IsError   bool   // tool_result
}

// Assistant is an assistant message (often one content block per line).
type Assistant struct {
	MessageID       string
	Model           string
	Content         []Block
	ParentToolUseID string // set for a subagent's messages
	Aborted         bool   // cut short by an interrupt
}

// User is a user message the CLI emits: tool results, interruption
// notices, or the replay of a local command.
type User struct {
	Content         []Block
	ParentToolUseID string
	IsReplay        bool
}

// Result closes one CLI turn.
type Result struct {
	Subtype        string // success, error_during_execution, error_max_turns, ...
	IsError        bool
	NumTurns       int
	TotalCostUSD   float64
	HasTotal       bool
	SinceLastCost  float64 // model_usage_since_last_result, summed
	HasSinceLast   bool
	Result         string
	Errors         []string
	TerminalReason string
	StopReason     string
	SessionID      string
	DurationMS     int64
	Usage          messages.Usage
}

// ControlRequest is a request from the CLI (can_use_tool, hook_callback,
// elicitation, ...).
type ControlRequest struct {
	RequestID   string
	Subtype     string
	ToolName    string
	Input       json.RawMessage
	ToolUseID   string
	Suggestions []json.RawMessage // permission_suggestions, as sent
	BlockedPath string
	Description string
}

// ControlResponse answers one of the host's control requests.
type ControlResponse struct {
	RequestID string
	OK        bool            // subtype success
	Response  json.RawMessage // the success payload
	Error     string          // subtype error: the message
	ErrorCode string          // subtype error: error_code, when given
}

// ControlCancel withdraws a control request the CLI sent.
type ControlCancel struct {
	RequestID string
}

// StreamEvent is a partial-message event (--include-partial-messages).
// Only text and thinking deltas of the main agent carry anything (Kind
// "text" or "thinking"); every other stream event, and those of a
// subagent (parent_tool_use_id set), has an empty Kind: the whole
// assistant message that follows says it all again.
type StreamEvent struct {
	Kind string
	Text string
}

// Unknown is a well-formed line of a type this package does not know.
type Unknown struct {
	Type string
}

func (SystemInit) lineType() string      { return "system/init" }
func (SessionState) lineType() string    { return "system/session_state_changed" }
func (SystemStatus) lineType() string    { return "system/status" }
func (l SystemOther) lineType() string   { return "system/" + l.Subtype }
func (Assistant) lineType() string       { return "assistant" }
func (User) lineType() string            { return "user" }
func (Result) lineType() string          { return "result" }
func (ControlRequest) lineType() string  { return "control_request" }
func (ControlResponse) lineType() string { return "control_response" }
func (ControlCancel) lineType() string   { return "control_cancel_request" }
func (StreamEvent) lineType() string     { return "stream_event" }
func (l Unknown) lineType() string       { return l.Type }

// backend is claude-code as the kit drives it: the decoder, the interrupt
// request (cancelling queued steering), and Close's stop: stdin closed,
// SIGTERM after 3 s, SIGKILL after 2 s more.
var backend = cli.Backend[Line]{
	Name:   "claude",
	Decode: Decode,
	Interrupt: func(id string) []byte {
		return controlRequestLine(id, map[string]any{"subtype": "interrupt", "cancel_queued": true})
	},
	Stop: []subprocess.Step{{Wait: 3 * time.Second, Signal: syscall.SIGTERM}, {Wait: 2 * time.Second, Signal: syscall.SIGKILL}},
}

// Decode reads one stdout line for the kit; pure. A control response is
// the reply to a control request of the host (its error_code mapped to
// ours); any other line is a Line for the core, or why it cannot be read.
func Decode(line []byte) []cli.Event[Line] {
	l, err := ParseLine(line)
	if err != nil {
		return []cli.Event[Line]{{Err: err}}
	}
	if cr, ok := l.(ControlResponse); ok {
		r := &cli.Reply{ID: cr.RequestID, Result: cr.Response, Refused: !cr.OK, Message: cr.Error}
		if r.Refused {
			r.Code = controlErrorCode(cr.ErrorCode)
		}
		return []cli.Event[Line]{{Reply: r}}
	}
	return []cli.Event[Line]{{Msg: l}}
}

// controlErrorCode maps the CLI's error_code to ours.
func controlErrorCode(c string) messages.Code {
	switch {
	case strings.HasPrefix(c, "invalid"):
		return messages.CodeInvalid
	case strings.HasPrefix(c, "unsupported"):
		return messages.CodeUnsupported
	case strings.Contains(c, "not_found"):
		return messages.CodeNotFound
	}
	return messages.CodeInternal
}

// ErrNotJSON is wrapped by ParseLine's errors for a line that is not one
// JSON object.
var ErrNotJSON = errors.New("not a JSON object")

// ParseLine parses one stdout line. A line that is not a JSON object, or
// whose known fields have the wrong types, is an error; a well-formed line
// of an unknown type is Unknown. It never panics.
func ParseLine(b []byte) (Line, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: %s", ErrNotJSON, excerpt(b))
	}
	var head struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	var ok bool
	if head.Type, head.Subtype, ok = lineHead(b); !ok {
		if err := json.Unmarshal(b, &head); err != nil {
			return nil, fmt.Errorf("%w: %v: %s", ErrNotJSON, err, excerpt(b))
		}
	}
	var l Line
	var err error
	switch head.Type {
	case "system":
		l, err = parseSystem(head.Subtype, b)
	case "assistant":
		l, err = parseAssistant(b)
	case "user":
		l, err = parseUser(b)
	case "result":
		l, err = parseResult(b)
	case "control_request":
		l, err = parseControlRequest(b)
	case "control_response":
		l, err = parseControlResponse(b)
	case "control_cancel_request":
		var m struct {
			RequestID string `json:"request_id"`
		}
		err = json.Unmarshal(b, &m)
		l = ControlCancel{RequestID: m.RequestID}
	case "stream_event":
		l, err = parseStreamEvent(b)
	case "":
		return nil, fmt.Errorf("a line without a type: %s", excerpt(b))
	default:
		if ok && !json.Valid(b) {
			return nil, fmt.Errorf("%w: %s", ErrNotJSON, excerpt(b))
		}
		l = Unknown{Type: head.Type}
	}
	var se *json.SyntaxError
	switch {
	case err == nil:
		return l, nil
	case ok && errors.As(err, &se):
		// the head was read without decoding it: the body's decode is
		// the first to see that the line is not JSON
		return nil, fmt.Errorf("%w: %v: %s", ErrNotJSON, err, excerpt(b))
	default:
		return nil, fmt.Errorf("a %s line that does not parse: %v: %s", head.Type, err, excerpt(b))
	}
}

// lineHead reads a line's type, and a system line's subtype, without
// decoding it: the CLI writes every line but its result line with "type"
// first, and a system line's "subtype" right after it; reading them here
// saves a whole pass over the line (the decode of its body checks all of
// it). ok is false for any other shape (keys in another order or spacing,
// a value with an escape or a byte that is not printable ASCII, an empty
// type), which is then decoded in full. (A line with a second "type" key,
// in any case, which the CLI never writes, reads as its first here and as
// its last in a decode.)
func lineHead(b []byte) (typ, subtype string, ok bool) {
	typ, rest, ok := leadingString(b, `{"type":"`)
	if !ok || typ == "" {
		return "", "", false
	}
	if typ != "system" {
		return typ, "", true
	}
	subtype, _, ok = leadingString(rest, `,"subtype":"`)
	return typ, subtype, ok
}

// leadingString reads the string value that follows prefix at the start
// of b, up to its closing quote; ok is false when b does not start with
// prefix or the value holds anything but printable ASCII.
func leadingString(b []byte, prefix string) (v string, rest []byte, ok bool) {
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return "", nil, false
	}
	b = b[len(prefix):]
	for i, c := range b {
		switch {
		case c == '"':
			return string(b[:i]), b[i+1:], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			// an escape, a control byte, or anything not ASCII (which
			// the decode would check as UTF-8): decoded in full
			return "", nil, false
		}
	}
	return "", nil, false
}

func parseStreamEvent(b []byte) (StreamEvent, error) {
	var m struct {
		Parent *string `json:"parent_tool_use_id"`
		Event  struct {
			Type  string `json:"type"`
			Delta struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				Thinking string `json:"thinking"`
			} `json:"delta"`
		} `json:"event"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return StreamEvent{}, err
	}
	if m.Parent != nil || m.Event.Type != "content_block_delta" {
		return StreamEvent{}, nil
	}
	switch m.Event.Delta.Type {
	case "text_delta":
		return StreamEvent{Kind: "text", Text: m.Event.Delta.Text}, nil
	case "thinking_delta":
		return StreamEvent{Kind: "thinking", Text: m.Event.Delta.Thinking}, nil
	}
	return StreamEvent{}, nil
}

// excerpt is the start of a line, for error messages.
func excerpt(b []byte) string {
	const n = 200
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + fmt.Sprintf("... (%d bytes)", len(b))
}

func parseSystem(subtype string, b []byte) (Line, error) {
	switch subtype {
	case "init":
		var m struct {
			SessionID      string   `json:"session_id"`
			Model          string   `json:"model"`
			PermissionMode string   `json:"permissionMode"`
			Cwd            string   `json:"cwd"`
			Version        string   `json:"claude_code_version"`
			Tools          []string `json:"tools"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		return SystemInit(m), nil
	case "session_state_changed":
		var m struct {
			SessionID string `json:"session_id"`
			State     string `json:"state"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		return SessionState(m), nil
	case "status":
		var m struct {
			PermissionMode string `json:"permissionMode"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		return SystemStatus(m), nil
	}
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	// content is optional and free-form: only a line that is not JSON
	// fails (ParseLine may have read the head without decoding the line)
	var se *json.SyntaxError
	if err := json.Unmarshal(b, &m); errors.As(err, &se) {
		return nil, err
	}
	var content string
	_ = json.Unmarshal(m.Content, &content)
	return SystemOther{Subtype: subtype, Content: content}, nil
}

// wireBlock is a content block as sent.
type wireBlock struct {
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

// blocks reads a content field: a string (one text block) or blocks.
func blocks(raw json.RawMessage) ([]Block, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []Block{{Type: "text", Text: s}}, nil
	}
	var ws []wireBlock
	if err := json.Unmarshal(raw, &ws); err != nil {
		return nil, err
	}
	out := make([]Block, 0, len(ws))
	for _, w := range ws {
		b := Block{Type: w.Type, Text: w.Text, ID: w.ID, Name: w.Name, Input: w.Input, ToolUseID: w.ToolUseID, IsError: w.IsError}
		switch w.Type {
		case "thinking":
			b.Text = w.Thinking
		case "tool_result":
			b.Text = flatten(w.Content)
		}
		out = append(out, b)
	}
	return out, nil
}

// flatten turns a tool result's content (a string, or blocks) into text;
// a non-text block is shown as [type].
func flatten(raw json.RawMessage) string {
	bs, err := blocks(raw)
	if err != nil {
		return string(raw)
	}
	var parts []string
	for _, b := range bs {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "tool_result":
			parts = append(parts, b.Text)
		default:
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

func parseAssistant(b []byte) (Line, error) {
	var m struct {
		Message struct {
			ID      string          `json:"id"`
			Model   string          `json:"model"`
			Content json.RawMessage `json:"content"`
		} `json:"message"`
		ParentToolUseID *string `json:"parent_tool_use_id"`
		Aborted         bool    `json:"aborted"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	bs, err := blocks(m.Message.Content)
	if err != nil {
		return nil, err
	}
	a := Assistant{MessageID: m.Message.ID, Model: m.Message.Model, Content: bs, Aborted: m.Aborted}
	if m.ParentToolUseID != nil {
		a.ParentToolUseID = *m.ParentToolUseID
	}
	return a, nil
}

func parseUser(b []byte) (Line, error) {
	var m struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
		ParentToolUseID *string `json:"parent_tool_use_id"`
		IsReplay        bool    `json:"isReplay"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	bs, err := blocks(m.Message.Content)
	if err != nil {
		return nil, err
	}
	u := User{Content: bs, IsReplay: m.IsReplay}
	if m.ParentToolUseID != nil {
		u.ParentToolUseID = *m.ParentToolUseID
	}
	return u, nil
}

func parseResult(b []byte) (Line, error) {
	var m struct {
		Subtype        string          `json:"subtype"`
		IsError        bool            `json:"is_error"`
		NumTurns       int             `json:"num_turns"`
		TotalCostUSD   *float64        `json:"total_cost_usd"`
		Result         *string         `json:"result"`
		Errors         json.RawMessage `json:"errors"`
		TerminalReason *string         `json:"terminal_reason"`
		StopReason     *string         `json:"stop_reason"`
		SessionID      string          `json:"session_id"`
		DurationMS     int64           `json:"duration_ms"`
		Usage          *struct {
			Input       int64 `json:"input_tokens"`
			Output      int64 `json:"output_tokens"`
			CacheRead   int64 `json:"cache_read_input_tokens"`
			CacheCreate int64 `json:"cache_creation_input_tokens"`
		} `json:"usage"`
		SinceLast map[string]struct {
			CostUSD float64 `json:"costUSD"`
		} `json:"model_usage_since_last_result"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	r := Result{Subtype: m.Subtype, IsError: m.IsError, NumTurns: m.NumTurns, SessionID: m.SessionID, DurationMS: m.DurationMS}
	if m.TotalCostUSD != nil {
		r.TotalCostUSD, r.HasTotal = *m.TotalCostUSD, true
	}
	if m.SinceLast != nil {
		r.HasSinceLast = true
		for _, u := range m.SinceLast {
			r.SinceLastCost += u.CostUSD
		}
	}
	if m.Result != nil {
		r.Result = *m.Result
	}
	if m.TerminalReason != nil {
		r.TerminalReason = *m.TerminalReason
	}
	if m.StopReason != nil {
		r.StopReason = *m.StopReason
	}
	if m.Usage != nil {
		r.Usage = messages.Usage{InputTokens: m.Usage.Input, OutputTokens: m.Usage.Output,
			CacheReadTokens: m.Usage.CacheRead, CacheWriteTokens: m.Usage.CacheCreate}
	}
	// errors is a list of strings in this version; anything else is kept as text
	if len(m.Errors) > 0 && string(m.Errors) != "null" {
		var es []string
		if json.Unmarshal(m.Errors, &es) == nil {
			r.Errors = es
		} else {
			r.Errors = []string{string(m.Errors)}
		}
	}
	return r, nil
}

func parseControlRequest(b []byte) (Line, error) {
	var m struct {
		RequestID string `json:"request_id"`
		Request   struct {
			Subtype     string            `json:"subtype"`
			ToolName    string            `json:"tool_name"`
			Input       json.RawMessage   `json:"input"`
			ToolUseID   string            `json:"tool_use_id"`
			Suggestions []json.RawMessage `json:"permission_suggestions"`
			BlockedPath string            `json:"blocked_path"`
			Description string            `json:"description"`
		} `json:"request"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m.RequestID == "" {
		return nil, errors.New("no request_id")
	}
	r := m.Request
	return ControlRequest{RequestID: m.RequestID, Subtype: r.Subtype, ToolName: r.ToolName, Input: r.Input,
		ToolUseID: r.ToolUseID, Suggestions: r.Suggestions, BlockedPath: r.BlockedPath, Description: r.Description}, nil
}

func parseControlResponse(b []byte) (Line, error) {
	var m struct {
		Response struct {
			Subtype   string          `json:"subtype"`
			RequestID string          `json:"request_id"`
			Response  json.RawMessage `json:"response"`
			Error     string          `json:"error"`
			ErrorCode string          `json:"error_code"`
		} `json:"response"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	r := m.Response
	return ControlResponse{RequestID: r.RequestID, OK: r.Subtype == "success", Response: r.Response, Error: r.Error, ErrorCode: r.ErrorCode}, nil
}

// ---- stdin messages (host -> CLI) ----

func mustLine(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps of plain values and valid raw JSON are marshalled
	}
	return append(b, '\n')
}

// userLine is a user message: a turn's input, or steering.
func userLine(text string) []byte {
	return mustLine(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text},
		"parent_tool_use_id": nil, "session_id": ""})
}

// controlRequestLine is a control request from the host.
func controlRequestLine(id string, request map[string]any) []byte {
	return mustLine(map[string]any{"type": "control_request", "request_id": id, "request": request})
}

// validJSON returns raw when it is a JSON value, else {}.
func validJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !json.Valid(raw) {
		return json.RawMessage(`{}`)
	}
	return raw
}

// allowLine answers can_use_tool with allow, passing the input unchanged
// and, for allow_session, the permission rules to add.
func allowLine(requestID string, input json.RawMessage, toolUseID string, updates []json.RawMessage) []byte {
	resp := map[string]any{"behavior": "allow", "updatedInput": validJSON(input)}
	if toolUseID != "" {
		resp["toolUseID"] = toolUseID
	}
	if len(updates) > 0 {
		resp["updatedPermissions"] = updates
	}
	return mustLine(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": requestID, "response": resp}})
}

// denyLine answers can_use_tool with deny; interrupt also ends the turn.
func denyLine(requestID, message, toolUseID string, interrupt bool) []byte {
	resp := map[string]any{"behavior": "deny", "message": message}
	if toolUseID != "" {
		resp["toolUseID"] = toolUseID
	}
	if interrupt {
		resp["interrupt"] = true
	}
	return mustLine(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": requestID, "response": resp}})
}

// errorResponseLine refuses a control request of the CLI.
func errorResponseLine(requestID, message string) []byte {
	return mustLine(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "error", "request_id": requestID, "error": message}})
}

// sessionRules turns the CLI's permission suggestions into rules for this
// session only: addRules suggestions that allow, with their destination
// forced to "session" (never the workspace's settings files). Other
// suggestions (setMode, addDirectories) would widen the posture or the
// workspace and are left out.
func sessionRules(suggestions []json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	for _, raw := range suggestions {
		var s map[string]any
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		if s["type"] != "addRules" || s["behavior"] != "allow" {
			continue
		}
		if rules, ok := s["rules"].([]any); !ok || len(rules) == 0 {
			continue
		}
		s["destination"] = "session"
		b, err := json.Marshal(s)
		if err != nil {
			continue
		}
		out = append(out, b)
	}
	return out
}
