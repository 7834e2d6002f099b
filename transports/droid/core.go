package droid

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/gate"
)

// The session's decisions, single-threaded: a parsed line or an op in,
// events and stdin writes out. The shell (session.go) holds it under one
// mutex and carries out the effects; nothing here does I/O or reads a clock.

// effects is what the shell must do after a step of the core.
type effects = cli.Effects

// perm is a request_permission waiting for an answer.
type perm struct {
	id      string
	use     PermissionToolUse
	options []string
}

type coreConfig struct {
	outputCap int
	lineCap   int
	// ws is the session's workspace for the gate; nil when the session
	// has no working directory (every file question is then refused).
	ws      *gate.Workspace
	posture messages.Posture
	// idPrefix makes the ids of our requests unique to the session.
	idPrefix string
}

// core is the pure session state machine.
type core struct {
	cfg coreConfig

	cli.Turn
	posture messages.Posture

	// followUps are messages droid must get once it ends its own turn: a
	// denied or refused call is answered "cancel", which ends droid's turn
	// without telling the model why, so the reason follows as a message
	// of the same codesession turn.
	followUps []string
	lastText  string
	// partial is the assistant text droid streamed (assistant_text_delta)
	// since its last whole message: an interrupted turn gets no
	// create_message for it, so the turn keeps it (keepPartial)
	partial string
	usage   messages.Usage
	rounds  int

	perms     cli.Asked[*perm]
	toolNames map[string]string // tool use id -> name, from tool_call
	usesSent  map[string]bool
	results   map[string]bool
	settings  Settings // as droid last reported them
	seq       int
	messages  map[string]bool // ids of our add_user_message requests
}

func newCore(cfg coreConfig) *core {
	return &core{cfg: cfg, posture: cfg.posture,
		toolNames: map[string]string{}, usesSent: map[string]bool{}, results: map[string]bool{}, messages: map[string]bool{}}
}

// nextID mints the id of a request of ours.
func (c *core) nextID() string {
	c.seq++
	return c.cfg.idPrefix + strconv.Itoa(c.seq)
}

// State is the turn bookkeeping (cli.Core).
func (c *core) State() *cli.Turn { return &c.Turn }

// startTurn sends input as turn number turn.
func (c *core) startTurn(turn int, input string) (effects, error) {
	var e effects
	if err := c.Begin(turn); err != nil {
		return e, err
	}
	c.followUps, c.lastText, c.partial, c.usage, c.rounds = nil, "", "", messages.Usage{}, 0
	c.userMessage(&e, input)
	return e, nil
}

func (c *core) userMessage(e *effects, text string) {
	id := c.nextID()
	c.messages[id] = true
	e.Write(requestLine(id, methodAddUserMessage, map[string]any{"text": text}))
}

// line maps one parsed stdout line (responses to the shell's own requests
// never get here).
func (c *core) Line(l Line) effects {
	var e effects
	switch l := l.(type) {
	case Response:
		c.response(l, &e)
	case PermissionRequest:
		c.permission(l, &e)
	case OtherRequest:
		e.Write(errorResponseLine(l.ID, "codesession does not handle "+l.Method))
		e.Emit(c.EvTurn(), messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("droid sent a %s request, which codesession does not handle: refused", l.Method)})
	case Notification:
		c.notification(l, &e)
	}
	return e
}

// response takes droid's answer to an add_user_message: an error fails the
// turn (droid will not run it).
func (c *core) response(r Response, e *effects) {
	if !c.messages[r.ID] {
		return
	}
	delete(c.messages, r.ID)
	if r.Err == nil || !c.Running {
		return
	}
	ev := messages.Event{Type: messages.EvTurnEnd, State: messages.TurnErrored,
		Text: fmt.Sprintf("droid refused the message (%d): %s", r.Err.Code, r.Err.Message)}
	c.endTurn(e)
	e.Emit(c.Number, ev)
}

func (c *core) notification(n Notification, e *effects) {
	t := c.EvTurn()
	switch n.Type {
	case "assistant_text_delta":
		if c.Running {
			c.partial += n.TextDelta
		}
	case "create_message":
		if n.Role == "assistant" {
			c.partial = "" // the whole message replaces what streamed of it
		}
		if n.Role == "assistant" && n.Text != "" {
			c.lastText = n.Text
			c.rounds++
			e.Emit(t, messages.Event{Type: messages.EvText, Text: n.Text})
		}
	case "tool_call":
		if n.ToolName != "" {
			c.toolNames[n.ToolUseID] = n.ToolName
		}
		// droid announces a call first with empty input, then complete
		if !c.usesSent[n.ToolUseID] && string(n.Input) != "{}" {
			c.usesSent[n.ToolUseID] = true
			e.Emit(t, messages.Event{Type: messages.EvToolUse, ToolUseID: n.ToolUseID, ToolName: n.ToolName, Input: n.Input})
		}
	case "tool_result":
		if c.results[n.ToolUseID] {
			return // droid repeats the result of a cancelled call
		}
		c.results[n.ToolUseID] = true
		if !c.usesSent[n.ToolUseID] {
			c.usesSent[n.ToolUseID] = true
			e.Emit(t, messages.Event{Type: messages.EvToolUse, ToolUseID: n.ToolUseID, ToolName: c.toolNames[n.ToolUseID], Input: json.RawMessage(`{}`)})
		}
		out, truncated, original := transports.CapOutput(n.Content, c.cfg.outputCap)
		e.Emit(t, messages.Event{Type: messages.EvToolResult, ToolUseID: n.ToolUseID, Output: out, IsError: n.IsError,
			Truncated: truncated, OriginalBytes: original})
	case "agent_turn_completed":
		c.turnCompleted(n, e)
	case "settings_updated":
		if n.Settings != nil {
			c.settings = *n.Settings
		}
	case "error", "session_error", "agent_error":
		e.Emit(t, messages.Event{Type: messages.EvError, Text: "droid reported an error: " + firstNonEmpty(n.Message, "no detail given")})
	}
}

// turnCompleted takes droid's end of its turn: it closes ours, unless a
// follow-up (a deny reason) must reach the model first.
func (c *core) turnCompleted(n Notification, e *effects) {
	if !c.Running {
		return // a turn we already closed (an escalated interrupt)
	}
	c.usage.InputTokens += n.Usage.InputTokens
	c.usage.OutputTokens += n.Usage.OutputTokens
	c.usage.CacheReadTokens += n.Usage.CacheReadTokens
	c.usage.CacheWriteTokens += n.Usage.CacheCreationTokens
	if len(c.followUps) > 0 && !c.Interrupting && n.Reason != "cancelled" {
		msg := strings.Join(c.followUps, "\n")
		c.followUps = nil
		c.userMessage(e, msg)
		return
	}
	state, text := messages.TurnCompleted, c.lastText
	switch {
	case c.Interrupting || n.Reason == "cancelled" || n.Reason == "interrupted":
		state, text = messages.TurnInterrupted, c.keepPartial(e)
	case n.Reason != "" && n.Reason != "completed":
		state = messages.TurnErrored
		text = fmt.Sprintf("droid ended the turn: %s", n.Reason)
	}
	u := c.usage
	ev := messages.Event{Type: messages.EvTurnEnd, State: state, Text: text, NumTurns: c.rounds, Usage: &u}
	c.endTurn(e)
	e.Emit(c.Number, ev)
}

// keepPartial emits the text streamed of an unfinished assistant message
// as the turn's text and returns the turn's text (that, else the last
// whole message).
func (c *core) keepPartial(e *effects) string {
	if c.partial != "" {
		c.lastText, c.partial = c.partial, ""
		e.Emit(c.Number, messages.Event{Type: messages.EvText, Text: c.lastText})
	}
	return c.lastText
}

func (c *core) endTurn(e *effects) {
	c.End(e)
	c.followUps = nil
	c.perms.Clear()
}

// permission handles droid.request_permission: a file path must pass the
// workspace gate, plan posture refuses every call droid asks about, and
// what is left becomes a clarification.
func (c *core) permission(r PermissionRequest, e *effects) {
	t := c.EvTurn()
	if len(r.ToolUses) == 0 {
		e.Write(responseLine(r.ID, permissionAnswer{SelectedOption: optionCancel, Comment: "no tool call named"}))
		return
	}
	for _, tu := range r.ToolUses {
		for _, p := range filePaths(tu) {
			if c.cfg.ws == nil {
				c.refuse(r, tu, "the session has no working directory to check "+p+" against", e)
				return
			}
			if _, err := c.cfg.ws.Resolve(p); err != nil {
				c.refuse(r, tu, "the workspace gate "+err.Error(), e)
				return
			}
		}
	}
	if c.posture == messages.PosturePlan {
		c.refuse(r, r.ToolUses[0], "the session is in plan posture: nothing may be changed", e)
		return
	}
	if c.posture == messages.PostureAcceptEdits && allFileEdits(r.ToolUses) {
		// acceptEdits: an edit the gate let through runs without asking
		e.Write(responseLine(r.ID, permissionAnswer{SelectedOption: optionProceedOnce}))
		return
	}
	tu := r.ToolUses[0]
	c.perms.Ask(r.ID, &perm{id: r.ID, use: tu, options: r.Options})
	if len(r.ToolUses) > 1 {
		e.Emit(t, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("droid asks about %d tool calls at once; the clarification shows the first (%s), and the answer covers all", len(r.ToolUses), tu.ToolName)})
	}
	e.Emit(t, messages.Event{Type: messages.EvClarification, ClarificationID: r.ID, ToolName: tu.ToolName, Input: tu.Input})
}

// refuse answers a permission request with cancel and queues the reason as
// a follow-up, so the model learns why.
func (c *core) refuse(r PermissionRequest, tu PermissionToolUse, why string, e *effects) {
	e.Write(responseLine(r.ID, permissionAnswer{SelectedOption: optionCancel, Comment: why}))
	c.followUps = append(c.followUps, fmt.Sprintf("codesession refused your %s call (%s): %s. Do not retry it; go on without it.", tu.ToolName, describe(tu), why))
	e.Emit(c.EvTurn(), messages.Event{Type: messages.EvWarning, Text: fmt.Sprintf("refused droid's %s call without asking: %s", tu.ToolName, why)})
}

// allFileEdits reports whether every call is a file tool's (it names a
// path and is not a command).
func allFileEdits(uses []PermissionToolUse) bool {
	for _, tu := range uses {
		if tu.ConfirmationType == "exec" || tu.Command != "" || len(filePaths(tu)) == 0 {
			return false
		}
	}
	return true
}

// filePaths are the paths a tool call names: details.filePath and the
// usual input fields.
func filePaths(tu PermissionToolUse) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	add(tu.FilePath)
	var in map[string]any
	if json.Unmarshal(tu.Input, &in) == nil {
		for _, k := range []string{"file_path", "filePath", "path", "notebook_path"} {
			if s, ok := in[k].(string); ok {
				add(s)
			}
		}
	}
	return out
}

func describe(tu PermissionToolUse) string {
	switch {
	case tu.Command != "":
		return tu.Command
	case tu.FilePath != "":
		return tu.FilePath
	}
	return string(tu.Input)
}

// answer answers a pending permission question.
func (c *core) Answer(id string, d messages.Decision, reason string) (effects, error) {
	var e effects
	p, err := c.perms.Take(id, d, "answered, or its turn ended")
	if err != nil {
		return e, err
	}
	switch d {
	case messages.DecisionAllowOnce:
		e.Write(responseLine(id, permissionAnswer{SelectedOption: optionProceedOnce}))
	case messages.DecisionAllowSession:
		opt := optionProceedAlways
		if !contains(p.options, optionProceedAlways) {
			opt = optionProceedOnce
			e.Emit(c.EvTurn(), messages.Event{Type: messages.EvWarning,
				Text: "droid offered no 'always' option for this call: allowed once"})
		}
		e.Write(responseLine(id, permissionAnswer{SelectedOption: opt}))
	case messages.DecisionDeny:
		why := firstNonEmpty(reason, "denied by the user")
		e.Write(responseLine(id, permissionAnswer{SelectedOption: optionCancel, Comment: why}))
		c.followUps = append(c.followUps, fmt.Sprintf("The user denied your %s call (%s): %s. Do not retry it; go on without it.", p.use.ToolName, describe(p.use), why))
	case messages.DecisionCancel:
		c.Interrupting = true
		e.Write(responseLine(id, permissionAnswer{SelectedOption: optionCancel, Comment: firstNonEmpty(reason, "cancelled by the user")}))
	}
	return e, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// setPosture records the posture the next permission question is judged by.
func (c *core) setPosture(p messages.Posture) { c.posture = p }

// exited takes the end of the process.
func (c *core) Exited(how cli.ExitKind, status, tail string) effects {
	var e effects
	interrupted := messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted, NumTurns: c.rounds, Text: cli.Signalled("droid", status)}
	if c.Running && how == cli.ExitInterrupt {
		if kept := c.keepPartial(&e); kept != "" {
			interrupted.Text = kept + "\n[" + interrupted.Text + "]"
		}
	}
	c.Exit(&e, "droid", how, status, tail, " with droid.load_session", interrupted, c.endTurn)
	return e
}
