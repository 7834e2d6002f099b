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
	"github.com/codesession/codesession/transports/cli"
)

// effects is what the shell must do after a step of the core.
type effects = cli.Effects

// The session's decisions, single-threaded: a parsed line or an op in,
// events and stdin writes out. The shell (session.go) holds it under one
// mutex and carries out the effects; nothing here does I/O or reads a clock.

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

	cli.Turn
	settling bool // a result arrived while steering may still run
	steers   int  // steering messages sent during the running turn

	acc struct {
		num   int
		usage messages.Usage
		last  *Result
	}
	lastTotal float64
	haveTotal bool

	externalID string
	perms      cli.Asked[*perm]
	rules      []rule
}

func newCore(cfg coreConfig) *core {
	return &core{cfg: cfg, externalID: cfg.externalID}
}

// State is the turn bookkeeping (cli.Core).
func (c *core) State() *cli.Turn { return &c.Turn }

// startTurn sends input as turn number turn.
func (c *core) startTurn(turn int, input string) (effects, error) {
	var e effects
	if err := c.Begin(turn); err != nil {
		return e, err
	}
	c.settling, c.steers = false, 0
	c.acc.num, c.acc.usage, c.acc.last = 0, messages.Usage{}, nil
	e.Write(userLine(input))
	return e, nil
}

// steer sends text into the running turn: the CLI folds it in at the next
// tool boundary, or runs it right after the turn's own answer.
func (c *core) steer(text string) (effects, error) {
	var e effects
	if !c.Running {
		return e, messages.Errorf(messages.CodeNotLive, messages.OpGuide, "no turn is running to steer")
	}
	c.steers++
	e.Write(userLine(text))
	return e, nil
}

// line maps one parsed stdout line.
func (c *core) Line(l Line) effects {
	var e effects
	switch l := l.(type) {
	case SystemInit:
		c.settling = false // a queued message goes on with the turn
		if l.SessionID != "" && l.SessionID != c.externalID {
			c.externalID = l.SessionID
			e.Emit(c.EvTurn(), messages.Event{Type: messages.EvStarted, ExternalSessionID: l.SessionID, Model: l.Model})
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
			e.Emit(c.EvTurn(), messages.Event{Type: messages.EvText, Delta: true, Text: l.Text})
		case l.Kind == "thinking":
			e.Emit(c.EvTurn(), messages.Event{Type: messages.EvThinking, Delta: true, Text: l.Text})
		}
	case Assistant:
		c.settling = false
		for _, b := range l.Content {
			switch b.Type {
			case "text":
				e.Emit(c.EvTurn(), messages.Event{Type: messages.EvText, Text: b.Text})
			case "thinking", "redacted_thinking":
				if b.Text != "" {
					e.Emit(c.EvTurn(), messages.Event{Type: messages.EvThinking, Text: b.Text})
				}
			case "tool_use", "server_tool_use":
				e.Emit(c.EvTurn(), messages.Event{Type: messages.EvToolUse, ToolUseID: b.ID, ToolName: b.Name, Input: validJSON(b.Input)})
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
			e.Emit(c.EvTurn(), messages.Event{Type: messages.EvToolResult, ToolUseID: b.ToolUseID, Output: out,
				IsError: b.IsError, Truncated: truncated, OriginalBytes: original})
		}
	case Result:
		c.result(l, &e)
	case ControlRequest:
		c.controlRequest(l, &e)
	case ControlCancel:
		if p, ok := c.perms.Withdraw(l.RequestID); ok {
			e.Emit(c.EvTurn(), messages.Event{Type: messages.EvWarning,
				Text: fmt.Sprintf("claude withdrew its permission question %s (%s): answering it now is a conflict", l.RequestID, p.toolName)})
		}
	}
	return e
}

// result takes a CLI result: it closes the turn, unless steering was sent
// (the CLI may then run it as a follow-up with a result of its own, and
// only session_state_changed{idle} says it is done).
func (c *core) result(r Result, e *effects) {
	if !c.Running {
		if r.HasTotal {
			c.noteTotal(r)
			c.lastTotal = r.TotalCostUSD
		}
		e.Emit(0, messages.Event{Type: messages.EvWarning,
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
	if c.steers > 0 && !c.Interrupting {
		c.settling = true
		e.Settle = true
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
func (c *core) SettleTimeout(turn int) effects {
	var e effects
	if c.Running && c.settling && c.Number == turn {
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
	interrupted := c.Interrupting || strings.HasPrefix(r.TerminalReason, "aborted")
	switch {
	case interrupted:
		state = messages.TurnInterrupted
	case r.IsError:
		state = messages.TurnErrored
		text = errorText(*r)
	}
	if interrupted && c.steers > 0 {
		e.Emit(c.Number, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("steering sent during turn %d may not have reached the agent: the turn was interrupted", c.Number)})
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
	e.Emit(c.Number, ev)
}

// endTurn resets the turn state; the caller emits the closing event.
func (c *core) endTurn(e *effects) {
	c.End(e)
	c.settling, c.steers = false, 0
	c.acc.last = nil
	c.perms.Clear()
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
		e.Write(errorResponseLine(r.RequestID, "codesession does not handle "+r.Subtype+" requests"))
		e.Emit(c.EvTurn(), messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("claude sent a %s control request, which codesession does not handle: refused", r.Subtype)})
		return
	}
	input := validJSON(r.Input)
	if !c.toolAllowed(r.ToolName) {
		e.Write(denyLine(r.RequestID, fmt.Sprintf("%s is not among this session's allowed tools (%s)", r.ToolName, strings.Join(c.cfg.allowed, ", ")), r.ToolUseID, false))
		e.Emit(c.EvTurn(), messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("denied %s without asking: it is not among the session's allowed tools", r.ToolName)})
		return
	}
	if c.cfg.gate != nil {
		if err := c.cfg.gate(r.ToolName, input); err != nil {
			// the agent sees the reason as its tool result; nobody is asked
			e.Write(denyLine(r.RequestID, "the workspace gate "+err.Error(), r.ToolUseID, false))
			e.Emit(c.EvTurn(), messages.Event{Type: messages.EvWarning,
				Text: fmt.Sprintf("the workspace gate denied %s without asking: %v", r.ToolName, err)})
			return
		}
	}
	if c.cfg.posture == messages.PostureFull || c.ruleAllows(r.ToolName, input) {
		e.Write(allowLine(r.RequestID, input, r.ToolUseID, nil))
		return
	}
	c.perms.Ask(r.RequestID, &perm{requestID: r.RequestID, toolName: r.ToolName, toolUseID: r.ToolUseID, input: input, suggestions: r.Suggestions})
	e.Emit(c.EvTurn(), messages.Event{Type: messages.EvClarification, ClarificationID: r.RequestID, ToolName: r.ToolName, Input: input})
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
func (c *core) Answer(id string, d messages.Decision, reason string) (effects, error) {
	var e effects
	p, err := c.perms.Take(id, d, "answered, withdrawn, or its turn ended")
	if err != nil {
		return e, err
	}
	switch d {
	case messages.DecisionAllowOnce:
		e.Write(allowLine(id, p.input, p.toolUseID, nil))
	case messages.DecisionAllowSession:
		rules := sessionRules(p.suggestions)
		if len(rules) == 0 {
			c.rules = append(c.rules, ruleFor(p.toolName, p.input))
		}
		e.Write(allowLine(id, p.input, p.toolUseID, rules))
	case messages.DecisionDeny:
		e.Write(denyLine(id, firstNonEmpty(reason, "denied by the user"), p.toolUseID, false))
	case messages.DecisionCancel:
		msg := "cancelled by the user"
		if reason != "" {
			msg += ": " + reason
		}
		c.Interrupting = true
		e.Write(denyLine(id, msg, p.toolUseID, true))
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

// exited takes the end of the process. status is how it ended ("exit
// status 1"), tail the end of its stderr.
func (c *core) Exited(how cli.ExitKind, status, tail string) effects {
	var e effects
	if c.Running && c.settling {
		c.close(&e) // its result was in: the turn is complete
	}
	interrupted := messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted, NumTurns: c.acc.num, Text: cli.Signalled("claude", status)}
	c.Exit(&e, "claude", how, status, tail, "", interrupted, c.endTurn)
	return e
}

// respawned says a new process runs the session again; resumed says it
// continues the transcript (so its first total includes earlier costs).
func (c *core) respawned(resumed bool) {
	c.Dead = false
	c.cfg.resumed = resumed
	c.haveTotal = false
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
