package claudecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// The session's decisions, single-threaded: a parsed line or an op in,
// events and stdin writes out. The shell (session.go) holds it under one
// mutex and carries out the effects; nothing here does I/O or reads a clock.

// turnEvent is an event with the turn it belongs to.
type turnEvent struct {
	turn int
	ev   messages.Event
}

// effects is what the shell must do after a step of the core.
type effects struct {
	events []turnEvent
	writes [][]byte
	// settle asks for core.settleTimeout(turn) after the settle delay.
	settle bool
	// closed says the running turn was closed by one of events.
	closed bool
}

func (e *effects) emit(turn int, ev messages.Event) { e.events = append(e.events, turnEvent{turn, ev}) }
func (e *effects) write(b []byte)                   { e.writes = append(e.writes, b) }

// perm is a can_use_tool request waiting for an answer.
type perm struct {
	requestID   string
	toolName    string
	toolUseID   string
	input       json.RawMessage
	suggestions []json.RawMessage
}

// ruleKind says how a remembered allow_session rule matches an input.
type ruleKind int

const (
	ruleInvalid ruleKind = iota
	ruleCommand          // same first word of input.command
	ruleDir              // a path (file_path, notebook_path, path) in the same directory
	ruleExact            // the same input
)

func (k ruleKind) String() string {
	switch k {
	case ruleCommand:
		return "command"
	case ruleDir:
		return "dir"
	case ruleExact:
		return "exact"
	}
	return "invalid"
}

// rule is an allow_session answer the transport remembers because the CLI
// offered no session rule of its own.
type rule struct {
	tool  string
	kind  ruleKind
	value string
}

// exitKind says why the process ended, as far as the shell knows.
type exitKind int

const (
	exitInvalid   exitKind = iota
	exitOwn                // it exited by itself (or was killed by someone else)
	exitInterrupt          // the interrupt escalation signalled it
)

func (k exitKind) String() string {
	switch k {
	case exitOwn:
		return "own"
	case exitInterrupt:
		return "interrupt"
	}
	return "invalid"
}

type coreConfig struct {
	outputCap int
	lineCap   int
	// allowed is SessionSpec.AllowedTools; nil means no ceiling.
	allowed []string
	// resumed: the process continues a session whose earlier cost the
	// first result's total already holds.
	resumed    bool
	externalID string
	// posture is the session's posture: at full every question the gate
	// admits is allowed without asking.
	posture messages.Posture
	// gate checks a question's file paths against the workspace (seed 002);
	// nil admits everything. It reads the filesystem, so the shell gives it.
	gate func(tool string, input json.RawMessage) error
}

// core is the pure session state machine.
type core struct {
	cfg coreConfig

	turn         int  // the running turn, or the last one
	running      bool // a turn is open
	settling     bool // a result arrived while steering may still run
	interrupting bool // an interrupt (or a cancel answer) was sent
	steers       int  // steering messages sent during the running turn
	dead         bool // the process is gone
	fatal        bool // it died mid-turn: the session refuses further turns

	acc struct {
		num   int
		usage messages.Usage
		last  *Result
	}
	lastTotal float64
	haveTotal bool

	externalID string
	perms      map[string]*perm
	issued     map[string]bool
	rules      []rule
}

func newCore(cfg coreConfig) *core {
	return &core{cfg: cfg, externalID: cfg.externalID, perms: map[string]*perm{}, issued: map[string]bool{}}
}

// evTurn is the turn an event belongs to: the running one, else 0 (a
// session-level event).
func (c *core) evTurn() int {
	if c.running {
		return c.turn
	}
	return 0
}

// startTurn sends input as turn number turn.
func (c *core) startTurn(turn int, input string) (effects, error) {
	var e effects
	if turn < 1 {
		return e, messages.FieldError(messages.OpStart, "turn", "turn numbers start at 1, got %d", turn)
	}
	if c.running {
		return e, messages.Errorf(messages.CodeConflict, messages.OpStart, "turn %d is still running", c.turn)
	}
	c.turn, c.running, c.settling, c.interrupting, c.steers = turn, true, false, false, 0
	c.acc.num, c.acc.usage, c.acc.last = 0, messages.Usage{}, nil
	e.write(userLine(input))
	return e, nil
}

// steer sends text into the running turn: the CLI folds it in at the next
// tool boundary, or runs it right after the turn's own answer.
func (c *core) steer(text string) (effects, error) {
	var e effects
	if !c.running {
		return e, messages.Errorf(messages.CodeNotLive, messages.OpGuide, "no turn is running to steer")
	}
	c.steers++
	e.write(userLine(text))
	return e, nil
}

// line maps one parsed stdout line.
func (c *core) line(l Line) effects {
	var e effects
	switch l := l.(type) {
	case SystemInit:
		c.settling = false // a queued message goes on with the turn
		if l.SessionID != "" && l.SessionID != c.externalID {
			c.externalID = l.SessionID
			e.emit(c.evTurn(), messages.Event{Type: messages.EvStarted, ExternalSessionID: l.SessionID, Model: l.Model})
		}
	case SessionState:
		if l.State == "idle" && c.settling {
			c.close(&e)
		}
	case StreamEvent:
		// live text as it is generated; the whole message follows as an
		// Assistant line, which stays the turn's record of what was said
		switch {
		case l.Text == "":
		case l.Kind == "text":
			e.emit(c.evTurn(), messages.Event{Type: messages.EvText, Delta: true, Text: l.Text})
		case l.Kind == "thinking":
			e.emit(c.evTurn(), messages.Event{Type: messages.EvThinking, Delta: true, Text: l.Text})
		}
	case Assistant:
		c.settling = false
		for _, b := range l.Content {
			switch b.Type {
			case "text":
				e.emit(c.evTurn(), messages.Event{Type: messages.EvText, Text: b.Text})
			case "thinking", "redacted_thinking":
				if b.Text != "" {
					e.emit(c.evTurn(), messages.Event{Type: messages.EvThinking, Text: b.Text})
				}
			case "tool_use", "server_tool_use":
				e.emit(c.evTurn(), messages.Event{Type: messages.EvToolUse, ToolUseID: b.ID, ToolName: b.Name, Input: validJSON(b.Input)})
			}
		}
	case User:
		if l.IsReplay {
			return e
		}
		for _, b := range l.Content {
			if b.Type != "tool_result" {
				continue
			}
			out, truncated, original := transports.CapOutput(b.Text, c.cfg.outputCap)
			e.emit(c.evTurn(), messages.Event{Type: messages.EvToolResult, ToolUseID: b.ToolUseID, Output: out,
				IsError: b.IsError, Truncated: truncated, OriginalBytes: original})
		}
	case Result:
		c.result(l, &e)
	case ControlRequest:
		c.controlRequest(l, &e)
	case ControlCancel:
		if p := c.perms[l.RequestID]; p != nil {
			delete(c.perms, l.RequestID)
			e.emit(c.evTurn(), messages.Event{Type: messages.EvWarning,
				Text: fmt.Sprintf("claude withdrew its permission question %s (%s): answering it now is a conflict", l.RequestID, p.toolName)})
		}
	}
	return e
}

// result takes a CLI result: it closes the turn, unless steering was sent
// (the CLI may then run it as a follow-up with a result of its own, and
// only session_state_changed{idle} says it is done).
func (c *core) result(r Result, e *effects) {
	if !c.running {
		if r.HasTotal {
			c.noteTotal(r)
			c.lastTotal = r.TotalCostUSD
		}
		e.emit(0, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("claude reported a result with no turn open (%s): %s", r.Subtype, firstNonEmpty(r.Result, strings.Join(r.Errors, "; ")))})
		return
	}
	if r.HasTotal {
		c.noteTotal(r)
	}
	c.acc.num += r.NumTurns
	c.acc.usage.InputTokens += r.Usage.InputTokens
	c.acc.usage.OutputTokens += r.Usage.OutputTokens
	c.acc.usage.CacheReadTokens += r.Usage.CacheReadTokens
	c.acc.usage.CacheWriteTokens += r.Usage.CacheWriteTokens
	c.acc.last = &r
	if c.steers > 0 && !c.interrupting {
		c.settling = true
		e.settle = true
		return
	}
	c.close(e)
}

// noteTotal sets the cost baseline at the process's first result: zero for
// a new session; for a resumed one, the total less what this process spent
// (model_usage_since_last_result), so earlier runs are not charged again.
func (c *core) noteTotal(r Result) {
	if c.haveTotal {
		return
	}
	c.haveTotal = true
	switch {
	case !c.cfg.resumed:
		c.lastTotal = 0
	case r.HasSinceLast:
		c.lastTotal = math.Max(0, r.TotalCostUSD-r.SinceLastCost)
	default:
		c.lastTotal = r.TotalCostUSD // unknown: charge this turn nothing rather than the whole history
	}
}

// settleTimeout closes a settling turn whose idle notice never came.
func (c *core) settleTimeout(turn int) effects {
	var e effects
	if c.running && c.settling && c.turn == turn {
		c.close(&e)
	}
	return e
}

// close emits the running turn's EvTurnEnd from its last result.
func (c *core) close(e *effects) {
	r := c.acc.last
	if r == nil {
		return
	}
	state, text := messages.TurnCompleted, r.Result
	interrupted := c.interrupting || strings.HasPrefix(r.TerminalReason, "aborted")
	switch {
	case interrupted:
		state = messages.TurnInterrupted
	case r.IsError:
		state = messages.TurnErrored
		text = errorText(*r)
	}
	if interrupted && c.steers > 0 {
		e.emit(c.turn, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("steering sent during turn %d may not have reached the agent: the turn was interrupted", c.turn)})
	}
	ev := messages.Event{Type: messages.EvTurnEnd, State: state, Text: text, NumTurns: c.acc.num}
	if r.HasTotal {
		ev.TotalCostUSD = r.TotalCostUSD
		ev.CostUSD = math.Max(0, math.Round((r.TotalCostUSD-c.lastTotal)*1e9)/1e9)
		c.lastTotal = r.TotalCostUSD
	}
	u := c.acc.usage
	ev.Usage = &u
	c.endTurn(e)
	e.emit(c.turn, ev)
}

// endTurn resets the turn state; the caller emits the closing event.
func (c *core) endTurn(e *effects) {
	c.running, c.settling, c.interrupting, c.steers = false, false, false, 0
	c.acc.last = nil
	for id := range c.perms {
		delete(c.perms, id)
	}
	e.closed = true
}

func errorText(r Result) string {
	msg := strings.Join(r.Errors, "; ")
	if msg == "" {
		msg = r.Result
	}
	if msg == "" {
		msg = "no detail given"
	}
	return fmt.Sprintf("claude ended the turn with %s: %s", firstNonEmpty(r.Subtype, "an error"), msg)
}

// controlRequest handles a request of the CLI.
func (c *core) controlRequest(r ControlRequest, e *effects) {
	if r.Subtype != "can_use_tool" {
		e.write(errorResponseLine(r.RequestID, "codesession does not handle "+r.Subtype+" requests"))
		e.emit(c.evTurn(), messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("claude sent a %s control request, which codesession does not handle: refused", r.Subtype)})
		return
	}
	input := validJSON(r.Input)
	if !c.toolAllowed(r.ToolName) {
		e.write(denyLine(r.RequestID, fmt.Sprintf("%s is not among this session's allowed tools (%s)", r.ToolName, strings.Join(c.cfg.allowed, ", ")), r.ToolUseID, false))
		e.emit(c.evTurn(), messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("denied %s without asking: it is not among the session's allowed tools", r.ToolName)})
		return
	}
	if c.cfg.gate != nil {
		if err := c.cfg.gate(r.ToolName, input); err != nil {
			// the agent sees the reason as its tool result; nobody is asked
			e.write(denyLine(r.RequestID, "the workspace gate "+err.Error(), r.ToolUseID, false))
			e.emit(c.evTurn(), messages.Event{Type: messages.EvWarning,
				Text: fmt.Sprintf("the workspace gate denied %s without asking: %v", r.ToolName, err)})
			return
		}
	}
	if c.cfg.posture == messages.PostureFull || c.ruleAllows(r.ToolName, input) {
		e.write(allowLine(r.RequestID, input, r.ToolUseID, nil))
		return
	}
	c.perms[r.RequestID] = &perm{requestID: r.RequestID, toolName: r.ToolName, toolUseID: r.ToolUseID, input: input, suggestions: r.Suggestions}
	c.issued[r.RequestID] = true
	e.emit(c.evTurn(), messages.Event{Type: messages.EvClarification, ClarificationID: r.RequestID, ToolName: r.ToolName, Input: input})
}

// toolAllowed reports whether the ceiling lets the CLI ask about a tool at
// all: only a bare entry allows every input (an entry such as "Bash(git *)"
// is pre-approved by the CLI itself, so an ask for Bash is outside it).
func (c *core) toolAllowed(name string) bool {
	if c.cfg.allowed == nil {
		return true
	}
	for _, a := range c.cfg.allowed {
		if a == name {
			return true
		}
	}
	return false
}

// answer answers a pending permission question.
func (c *core) answer(id string, d messages.Decision, reason string) (effects, error) {
	var e effects
	if !d.Valid() {
		return e, messages.FieldError(messages.OpAnswer, "decision", "unknown decision %q", d)
	}
	p := c.perms[id]
	if p == nil {
		if c.issued[id] {
			return e, messages.Errorf(messages.CodeConflict, messages.OpAnswer, "clarification %q is not pending (answered, withdrawn, or its turn ended)", id)
		}
		return e, messages.Errorf(messages.CodeNotFound, messages.OpAnswer, "no clarification %q was raised in this session", id)
	}
	delete(c.perms, id)
	switch d {
	case messages.DecisionAllowOnce:
		e.write(allowLine(id, p.input, p.toolUseID, nil))
	case messages.DecisionAllowSession:
		rules := sessionRules(p.suggestions)
		if len(rules) == 0 {
			c.rules = append(c.rules, ruleFor(p.toolName, p.input))
		}
		e.write(allowLine(id, p.input, p.toolUseID, rules))
	case messages.DecisionDeny:
		e.write(denyLine(id, firstNonEmpty(reason, "denied by the user"), p.toolUseID, false))
	case messages.DecisionCancel:
		msg := "cancelled by the user"
		if reason != "" {
			msg += ": " + reason
		}
		c.interrupting = true
		e.write(denyLine(id, msg, p.toolUseID, true))
	}
	return e, nil
}

// ruleFor builds the rule remembered for an allow_session answer.
func ruleFor(tool string, input json.RawMessage) rule {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	if cmd, ok := in["command"].(string); ok {
		return rule{tool: tool, kind: ruleCommand, value: firstWord(cmd)}
	}
	for _, k := range []string{"file_path", "notebook_path", "path"} {
		if p, ok := in[k].(string); ok && p != "" {
			return rule{tool: tool, kind: ruleDir, value: filepath.Dir(filepath.Clean(p))}
		}
	}
	return rule{tool: tool, kind: ruleExact, value: compact(input)}
}

func (c *core) ruleAllows(tool string, input json.RawMessage) bool {
	for _, r := range c.rules {
		if r.tool != tool {
			continue
		}
		var in map[string]any
		_ = json.Unmarshal(input, &in)
		switch r.kind {
		case ruleCommand:
			if cmd, ok := in["command"].(string); ok && firstWord(cmd) == r.value {
				return true
			}
		case ruleDir:
			for _, k := range []string{"file_path", "notebook_path", "path"} {
				if p, ok := in[k].(string); ok && p != "" && filepath.Dir(filepath.Clean(p)) == r.value {
					return true
				}
			}
		case ruleExact:
			if compact(input) == r.value {
				return true
			}
		}
	}
	return false
}

func firstWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// setPosture records a posture change the CLI acknowledged.
func (c *core) setPosture(p messages.Posture) { c.cfg.posture = p }

// interrupt marks the running turn as interrupted; false when no turn runs
// or one is already being interrupted.
func (c *core) interrupt() bool {
	if !c.running || c.interrupting || c.dead {
		return false
	}
	c.interrupting = true
	return true
}

// exited takes the end of the process. status is how it ended ("exit
// status 1"), tail the end of its stderr.
func (c *core) exited(how exitKind, status, tail string) effects {
	var e effects
	c.dead = true
	detail := "(" + status + ")"
	if tail != "" {
		detail += ": " + tail
	}
	if c.running && c.settling {
		c.close(&e) // its result was in: the turn is complete
	}
	switch {
	case c.running && how == exitInterrupt:
		ev := messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted, NumTurns: c.acc.num,
			Text: "the turn was interrupted: claude did not stop in time and was signalled (" + status + ")"}
		c.endTurn(&e)
		e.emit(c.turn, ev)
	case c.running:
		c.fatal = true
		c.endTurn(&e)
		e.emit(c.turn, messages.Event{Type: messages.EvError, Fatal: true, Text: "claude exited mid-turn " + detail})
	default:
		e.emit(0, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("claude exited between turns %s; the next turn starts it again", detail)})
	}
	return e
}

// respawned says a new process runs the session again; resumed says it
// continues the transcript (so its first total includes earlier costs).
func (c *core) respawned(resumed bool) {
	c.dead = false
	c.cfg.resumed = resumed
	c.haveTotal = false
}

// overCap reports a stdout line that was dropped for its size.
func (c *core) overCap(n int) effects {
	var e effects
	e.emit(c.evTurn(), messages.Event{Type: messages.EvError,
		Text: fmt.Sprintf("claude wrote a stdout line of %d bytes, over the %d-byte cap: the line was dropped", n, c.cfg.lineCap)})
	return e
}

// badLine reports a stdout line that does not parse.
func (c *core) badLine(err error) effects {
	var e effects
	e.emit(c.evTurn(), messages.Event{Type: messages.EvError, Text: "claude wrote a stdout line codesession cannot read: " + err.Error()})
	return e
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
