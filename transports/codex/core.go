package codex

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

// The session's decisions, single-threaded: a parsed server message or an
// op in, events and stdin writes out. The shell (session.go) holds it under
// one mutex and carries out the effects; nothing here does I/O or reads a
// clock.

// DiffSourceBackend marks the diff a backend reported itself (Codex's
// turn/diff/updated), kept on EvTurnEnd beside the runtime's own git diff.
const DiffSourceBackend messages.DiffSource = "backend"

// approval is a server request waiting for an answer.
type approval struct {
	rpcID json.RawMessage
	turn  int
}

// change is one file of a fileChange item.
type change struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

type coreConfig struct {
	outputCap int
	posture   messages.Posture
	// ws is the workspace gate file changes pass before anyone sees them;
	// nil when the session has no working directory to hold them to.
	ws *gate.Workspace
}

// core is the pure session state machine; its turn bookkeeping is the
// kit's (Number, Running, Interrupting, Dead, Fatal).
type core struct {
	cli.Turn
	cfg coreConfig

	thread    string // Codex's thread, once thread/start or thread/resume named it
	codexTurn string // Codex's id of the running turn, once known

	turnOf map[string]int // Codex turn id -> our turn number

	deltaSeen map[string]bool
	cmdOut    map[string]*strings.Builder
	changes   map[string][]change
	diff      string

	usage     messages.Usage
	lastTotal *messages.Usage
	baseTotal *messages.Usage // thread total when the running turn began

	seq   int
	asked cli.Asked[approval]
}

func newCore(cfg coreConfig) *core {
	if cfg.posture == "" {
		cfg.posture = messages.PostureDefault
	}
	return &core{cfg: cfg, turnOf: map[string]int{}}
}

// beginTurn opens turn n; the shell then sends turn/start.
func (c *core) beginTurn(n int) {
	c.Number, c.Running, c.codexTurn, c.Interrupting = n, true, "", false
	c.deltaSeen, c.cmdOut, c.changes = map[string]bool{}, map[string]*strings.Builder{}, map[string][]change{}
	c.diff, c.usage = "", messages.Usage{}
	c.baseTotal = c.lastTotal
}

// turnStarted records Codex's id for the running turn (from turn/start's
// response or turn/started, whichever comes first).
func (c *core) turnStarted(id string) {
	if !c.Running || id == "" || c.codexTurn != "" {
		return
	}
	c.codexTurn = id
	c.turnOf[id] = c.Number
}

// evTurn is the turn a message about Codex turn id belongs to: a known
// turn's number; the running turn for its own id, for no id, or for any id
// while its own is not known yet; else 0 (a session-level event). Only
// turn/started and turn/start's response name a turn: a resumed thread
// sends its last turn's token usage before the new turn starts.
func (c *core) evTurn(id string) int {
	if n, ok := c.turnOf[id]; ok {
		return n
	}
	if c.Running && (id == "" || c.codexTurn == "") {
		return c.Number
	}
	return 0
}

// handle steps the core with one server message that is not a response.
func (c *core) handle(m message) cli.Effects {
	var fx cli.Effects
	switch m.Kind {
	case kindRequest:
		c.request(&fx, m)
	case kindNotification:
		c.notification(&fx, m)
	}
	return fx
}

// params common to most notifications.
type common struct {
	ThreadID string          `json:"threadId"`
	TurnID   string          `json:"turnId"`
	ItemID   string          `json:"itemId"`
	Delta    string          `json:"delta"`
	Item     json.RawMessage `json:"item"`
	Turn     *struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	} `json:"turn"`
}

// item is the part of a ThreadItem the core reads.
type item struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Text             string          `json:"text"`
	Summary          []string        `json:"summary"`
	Command          string          `json:"command"`
	Cwd              string          `json:"cwd"`
	Status           string          `json:"status"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            json.RawMessage `json:"error"`
	Query            string          `json:"query"`
}

func (c *core) notification(fx *cli.Effects, m message) {
	var p common
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			fx.Emit(c.evTurn(""), messages.Event{Type: messages.EvError, Text: fmt.Sprintf("codex %s: params do not parse: %v", m.Method, err)})
			return
		}
	}
	if p.TurnID == "" && p.Turn != nil {
		p.TurnID = p.Turn.ID
	}
	switch m.Method {
	case "turn/started":
		c.turnStarted(p.TurnID)
	case "turn/completed":
		c.turnCompleted(fx, p)
	case "item/agentMessage/delta":
		c.deltaSeen[p.ItemID] = true
		fx.Emit(c.evTurn(p.TurnID), messages.Event{Type: messages.EvText, Text: p.Delta, Delta: true})
	case "item/reasoning/summaryTextDelta", "item/reasoning/textDelta":
		c.deltaSeen[p.ItemID] = true
		fx.Emit(c.evTurn(p.TurnID), messages.Event{Type: messages.EvThinking, Text: p.Delta, Delta: true})
	case "item/commandExecution/outputDelta":
		if c.cmdOut[p.ItemID] == nil {
			c.cmdOut[p.ItemID] = &strings.Builder{}
		}
		if b := c.cmdOut[p.ItemID]; b.Len() < 4*c.cfg.outputCap+1 {
			b.WriteString(p.Delta)
		}
	case "item/started":
		c.itemStarted(fx, p)
	case "item/completed":
		c.itemCompleted(fx, p)
	case "turn/diff/updated":
		var d struct {
			Diff string `json:"diff"`
		}
		_ = json.Unmarshal(m.Params, &d)
		if n := c.evTurn(p.TurnID); n == c.Number && c.Running {
			c.diff = d.Diff
		}
	case "thread/tokenUsage/updated":
		c.tokenUsage(m.Params, p.TurnID)
	case "error":
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
			WillRetry bool `json:"willRetry"`
		}
		_ = json.Unmarshal(m.Params, &e)
		typ := messages.EvError
		if e.WillRetry {
			typ = messages.EvWarning
		}
		fx.Emit(c.evTurn(p.TurnID), messages.Event{Type: typ, Text: "codex: " + e.Error.Message})
	case "warning", "configWarning", "deprecationNotice", "guardianWarning":
		var w struct {
			Summary string `json:"summary"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(m.Params, &w)
		text := firstNonEmpty(w.Summary, w.Message, string(m.Params))
		if m.Method == "configWarning" && strings.Contains(text, bubblewrapWarning) {
			break // the same at every start on a host without bwrap: `backends` says it once (descriptor)
		}
		fx.Emit(c.evTurn(p.TurnID), messages.Event{Type: messages.EvWarning, Text: "codex " + m.Method + ": " + text})
	case "thread/started", "thread/status/changed", "serverRequest/resolved", "account/rateLimits/updated",
		"remoteControl/status/changed", "item/fileChange/outputDelta", "item/fileChange/patchUpdated",
		"item/reasoning/summaryPartAdded", "turn/plan/updated", "thread/settings/updated", "mcpServer/startupStatus/updated",
		"skills/changed", "thread/name/updated", "item/commandExecution/terminalInteraction", "thread/goal/cleared",
		"thread/goal/updated", "thread/readState/changed", "thread/queue/changed":
		// known, and nothing a session reports: the items and turn events carry what matters
	default:
		// kept, never dropped silently: a newer Codex may say something we
		// should learn to read
		fx.Emit(c.evTurn(p.TurnID), messages.Event{Type: messages.EvWarning, Text: "codex notification " + m.Method + " (not interpreted)", Input: rawParams(m.Params)})
	}
}

func rawParams(p json.RawMessage) json.RawMessage {
	if len(p) == 0 || !json.Valid(p) {
		return nil
	}
	return append(json.RawMessage(nil), p...)
}

func (c *core) itemStarted(fx *cli.Effects, p common) {
	var it item
	if json.Unmarshal(p.Item, &it) != nil {
		return
	}
	n := c.evTurn(p.TurnID)
	switch it.Type {
	case "commandExecution":
		in, _ := json.Marshal(map[string]string{"command": it.Command, "cwd": it.Cwd})
		fx.Emit(n, messages.Event{Type: messages.EvToolUse, ToolUseID: it.ID, ToolName: ToolShell, Input: in})
	case "fileChange":
		ch := parseChanges(it.Changes)
		c.changes[it.ID] = ch
		fx.Emit(n, messages.Event{Type: messages.EvToolUse, ToolUseID: it.ID, ToolName: ToolApplyPatch, Input: changesInput(ch)})
	case "mcpToolCall":
		fx.Emit(n, messages.Event{Type: messages.EvToolUse, ToolUseID: it.ID, ToolName: "mcp__" + it.Server + "__" + it.Tool, Input: rawParams(it.Arguments)})
	case "webSearch":
		in, _ := json.Marshal(map[string]string{"query": it.Query})
		fx.Emit(n, messages.Event{Type: messages.EvToolUse, ToolUseID: it.ID, ToolName: "web_search", Input: in})
	case "dynamicToolCall":
		fx.Emit(n, messages.Event{Type: messages.EvToolUse, ToolUseID: it.ID, ToolName: it.Tool, Input: rawParams(it.Arguments)})
	}
}

func (c *core) itemCompleted(fx *cli.Effects, p common) {
	var it item
	if json.Unmarshal(p.Item, &it) != nil {
		return
	}
	n := c.evTurn(p.TurnID)
	switch it.Type {
	case "agentMessage":
		if !c.deltaSeen[it.ID] && it.Text != "" {
			fx.Emit(n, messages.Event{Type: messages.EvText, Text: it.Text, Delta: true})
		}
	case "reasoning":
		if !c.deltaSeen[it.ID] && len(it.Summary) > 0 {
			fx.Emit(n, messages.Event{Type: messages.EvThinking, Text: strings.Join(it.Summary, "\n"), Delta: true})
		}
	case "commandExecution":
		out := ""
		if it.AggregatedOutput != nil {
			out = *it.AggregatedOutput
		} else if b := c.cmdOut[it.ID]; b != nil {
			out = b.String()
		}
		isErr := it.Status != "completed" || (it.ExitCode != nil && *it.ExitCode != 0)
		if it.Status == "declined" && out == "" {
			out = "declined"
		}
		c.result(fx, n, it.ID, out, isErr)
	case "fileChange":
		ch := parseChanges(it.Changes)
		var paths []string
		for _, x := range ch {
			paths = append(paths, x.Kind+" "+x.Path)
		}
		c.result(fx, n, it.ID, it.Status+": "+strings.Join(paths, ", "), it.Status != "completed")
	case "mcpToolCall", "dynamicToolCall":
		out := string(it.Result)
		if len(it.Error) > 0 && string(it.Error) != "null" {
			out = string(it.Error)
		}
		c.result(fx, n, it.ID, out, it.Status != "completed")
	case "webSearch":
		c.result(fx, n, it.ID, it.Query, false)
	}
}

func (c *core) result(fx *cli.Effects, n int, id, out string, isErr bool) {
	out, cut, orig := transports.CapOutput(out, c.cfg.outputCap)
	fx.Emit(n, messages.Event{Type: messages.EvToolResult, ToolUseID: id, Output: out, IsError: isErr, Truncated: cut, OriginalBytes: orig})
}

// parseChanges reads a fileChange's changes; kind is {"type": "add"} in
// app-server v2 and a bare string in older shapes.
func parseChanges(raw json.RawMessage) []change {
	var xs []struct {
		Path string          `json:"path"`
		Kind json.RawMessage `json:"kind"`
	}
	_ = json.Unmarshal(raw, &xs)
	out := make([]change, 0, len(xs))
	for _, x := range xs {
		k := ""
		var obj struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(x.Kind, &obj) == nil && obj.Type != "" {
			k = obj.Type
		} else {
			_ = json.Unmarshal(x.Kind, &k)
		}
		out = append(out, change{Path: x.Path, Kind: k})
	}
	return out
}

// changesInput is a file change as a tool input: the runtime's tool-event
// diff fallback reads file_path.
func changesInput(ch []change) json.RawMessage {
	m := map[string]any{"changes": ch}
	if len(ch) > 0 {
		m["file_path"] = ch[0].Path
	}
	b, _ := json.Marshal(m)
	return b
}

// tokenUsage keeps the thread's running total; a turn's usage is the total
// now less the total when it began (the server repeats an update on
// interrupt, so summing "last" would count a request twice).
func (c *core) tokenUsage(raw json.RawMessage, turnID string) {
	var u struct {
		TokenUsage struct {
			Total struct {
				InputTokens           int64 `json:"inputTokens"`
				CachedInputTokens     int64 `json:"cachedInputTokens"`
				CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
				OutputTokens          int64 `json:"outputTokens"`
			}
		} `json:"tokenUsage"`
	}
	if json.Unmarshal(raw, &u) != nil {
		return
	}
	t := u.TokenUsage.Total
	total := messages.Usage{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens, CacheReadTokens: t.CachedInputTokens, CacheWriteTokens: t.CacheWriteInputTokens}
	c.lastTotal = &total
	if !c.Running || turnID == "" || turnID != c.codexTurn {
		// the thread's total before this turn's requests (a resumed thread
		// restates its last turn's), or a stale turn's
		if c.Running && c.codexTurn == "" {
			c.baseTotal = &total
		}
		return
	}
	b := messages.Usage{}
	if c.baseTotal != nil {
		b = *c.baseTotal
	}
	c.usage = messages.Usage{InputTokens: total.InputTokens - b.InputTokens, OutputTokens: total.OutputTokens - b.OutputTokens,
		CacheReadTokens: total.CacheReadTokens - b.CacheReadTokens, CacheWriteTokens: total.CacheWriteTokens - b.CacheWriteTokens}
}

func (c *core) turnCompleted(fx *cli.Effects, p common) {
	n := c.evTurn(p.TurnID)
	if !c.Running || n != c.Number {
		return // an earlier turn's close: already closed here
	}
	ev := messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted, NumTurns: 1}
	status := ""
	if p.Turn != nil {
		status = p.Turn.Status
	}
	switch status {
	case "interrupted":
		ev.State = messages.TurnInterrupted
	case "failed":
		ev.State = messages.TurnErrored
		if p.Turn.Error != nil {
			ev.Text = "codex: " + p.Turn.Error.Message
		}
	}
	if c.Interrupting && ev.State == messages.TurnCompleted {
		ev.State = messages.TurnInterrupted
	}
	if u := c.usage; u != (messages.Usage{}) {
		ev.Usage = &u
	}
	ev.Diff = backendDiff(c.diff)
	c.closeTurn(fx, ev)
}

// closeTurn emits the running turn's end and forgets its open questions.
func (c *core) closeTurn(fx *cli.Effects, ev messages.Event) {
	c.End(fx)
	fx.Emit(c.Number, ev)
	c.asked.Clear()
}

// backendDiff is Codex's own unified diff of the turn as a TurnDiff.
func backendDiff(d string) *messages.TurnDiff {
	if strings.TrimSpace(d) == "" {
		return nil
	}
	var files []messages.FileChange
	var cur *messages.FileChange
	for _, l := range strings.Split(d, "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			files = append(files, messages.FileChange{Status: "M"})
			cur = &files[len(files)-1]
			if i := strings.LastIndex(l, " b/"); i >= 0 {
				cur.Path = l[i+3:]
			}
		case cur == nil:
		case strings.HasPrefix(l, "new file mode"):
			cur.Status = "A"
		case strings.HasPrefix(l, "deleted file mode"):
			cur.Status = "D"
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
			if p := strings.TrimPrefix(strings.TrimPrefix(l[4:], "b/"), "a/"); cur.Path == "" && p != "/dev/null" {
				cur.Path = p
			}
		case strings.HasPrefix(l, "+"):
			cur.Insertions++
		case strings.HasPrefix(l, "-"):
			cur.Deletions++
		}
	}
	if files == nil {
		files = []messages.FileChange{}
	}
	ins, del := 0, 0
	for _, f := range files {
		ins, del = ins+f.Insertions, del+f.Deletions
	}
	const max = 64 << 10
	out, cut, _ := transports.CapOutput(d, max)
	return &messages.TurnDiff{Source: DiffSourceBackend, Files: files, UnifiedDiff: out, Truncated: cut,
		Summary: fmt.Sprintf("%d files changed, %d insertions(+), %d deletions(-) (reported by codex)", len(files), ins, del)}
}

// request handles a server request: approvals become clarifications (file
// changes through the gate first); anything else is refused loudly.
func (c *core) request(fx *cli.Effects, m message) {
	var p struct {
		TurnID  string `json:"turnId"`
		ItemID  string `json:"itemId"`
		Reason  string `json:"reason"`
		Command string `json:"command"`
		Cwd     string `json:"cwd"`
	}
	_ = json.Unmarshal(m.Params, &p)
	n := c.evTurn(p.TurnID)
	switch m.Method {
	case "item/commandExecution/requestApproval":
		in, _ := json.Marshal(map[string]string{"command": p.Command, "cwd": p.Cwd, "reason": p.Reason})
		c.raise(fx, m, n, ToolShell, in)
	case "item/fileChange/requestApproval":
		ch := c.changes[p.ItemID]
		if c.cfg.ws != nil {
			for _, x := range ch {
				if _, err := c.cfg.ws.Resolve(x.Path); err != nil {
					// refused before anyone is asked: the path escapes the workspace
					fx.Write(encodeResult(m.ID, map[string]any{"decision": "decline"}))
					fx.Emit(n, messages.Event{Type: messages.EvWarning, Text: "codex file change declined by the workspace gate: " + err.Error()})
					return
				}
			}
		}
		if c.cfg.posture == messages.PostureAcceptEdits || c.cfg.posture == messages.PostureFull {
			fx.Write(encodeResult(m.ID, map[string]any{"decision": "accept"}))
			return
		}
		in := changesInput(ch)
		if p.Reason != "" {
			var obj map[string]any
			_ = json.Unmarshal(in, &obj)
			obj["reason"] = p.Reason
			in, _ = json.Marshal(obj)
		}
		c.raise(fx, m, n, ToolApplyPatch, in)
	default:
		fx.Write(encodeError(m.ID, -32601, "codesession does not answer "+m.Method))
		fx.Emit(n, messages.Event{Type: messages.EvWarning, Text: "codex asked " + m.Method + "; codesession cannot answer it and refused", Input: rawParams(m.Params)})
	}
}

func (c *core) raise(fx *cli.Effects, m message, n int, tool string, in json.RawMessage) {
	c.seq++
	id := "codex-" + strconv.Itoa(c.seq)
	c.asked.Ask(id, approval{rpcID: m.ID, turn: n})
	fx.Emit(n, messages.Event{Type: messages.EvClarification, ClarificationID: id, ToolName: tool, Input: in})
}

// DenyPrefix starts the steering that carries a deny's reason to the model.
const DenyPrefix = "The user denied that request: "

// answer answers a clarification: allow_once is accept, allow_session
// acceptForSession, deny decline (its reason then steered into the turn),
// cancel cancel (Codex ends the turn).
func (c *core) answer(id string, d messages.Decision, reason string) (cli.Effects, error) {
	var fx cli.Effects
	a, err := c.asked.Take(id, d, "its turn ended or it was answered")
	if err != nil {
		return fx, err
	}
	decision := map[messages.Decision]string{messages.DecisionAllowOnce: "accept", messages.DecisionAllowSession: "acceptForSession",
		messages.DecisionDeny: "decline", messages.DecisionCancel: "cancel"}[d]
	reply := encodeResult(a.rpcID, map[string]any{"decision": decision})
	switch {
	case d == messages.DecisionDeny && reason != "" && c.Running && a.turn == c.Number && c.codexTurn != "":
		// the reason waits in the turn before Codex reads the decline
		fx.Followups = append(fx.Followups, cli.Followup{What: "turn/steer", Encode: c.steerRequest(DenyPrefix + reason), Then: [][]byte{reply}})
	default:
		fx.Write(reply)
	}
	if d == messages.DecisionCancel {
		c.Interrupting = true
	}
	return fx, nil
}

// pendingIDs lists the open clarifications, for tests and diagnostics.
func (c *core) pendingIDs() []string { return c.asked.Pending() }

// exited is the process ending. interrupt says the shell killed it to
// end an interrupt; then the turn ends interrupted and the session lives
// on (the next turn starts a new process resuming the thread).
func (c *core) exited(interrupt bool, why string) cli.Effects {
	var fx cli.Effects
	c.Dead = true
	c.asked.Clear()
	if !c.Running {
		if !interrupt {
			fx.Emit(0, messages.Event{Type: messages.EvWarning, Text: "codex app-server exited between turns (" + why + "); the next turn starts it again"})
		}
		return fx
	}
	if interrupt || c.Interrupting {
		c.closeTurn(&fx, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted, Text: "interrupted (codex app-server stopped: " + why + ")"})
		return fx
	}
	c.Fatal = true
	c.End(&fx)
	fx.Emit(c.Number, messages.Event{Type: messages.EvError, Fatal: true, Text: "codex app-server exited mid-turn: " + why})
	return fx
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// bubblewrapWarning is how codex 0.169's configWarning at every start
// begins on a host without bubblewrap on PATH (it then uses its bundled
// copy): the descriptor says it once instead of each session's log.
const bubblewrapWarning = "could not find bubblewrap on PATH"

// The core as the kit drives it (cli.Core, cli.InterruptAsker).
var (
	_ cli.Core[*message] = (*core)(nil)
	_ cli.InterruptAsker = (*core)(nil)
)

// Line steps the core with a server message that is not a response.
func (c *core) Line(m *message) cli.Effects { return c.step(*m) }

// Exited takes the end of the process: an exit the interrupt's escalation
// caused ends the running turn interrupted.
func (c *core) Exited(how cli.ExitKind, status, tail string) cli.Effects {
	why := "exit"
	if status != cleanExit {
		why = status
	}
	if tail != "" {
		why += "; stderr: " + tail
	}
	return c.exited(how == cli.ExitInterrupt, why)
}

// cleanExit is how the kit reports an exit with status 0.
const cleanExit = "exit status 0"

// Answer answers a clarification (see answer).
func (c *core) Answer(id string, d messages.Decision, reason string) (cli.Effects, error) {
	return c.answer(id, d, reason)
}

// State is the kit's turn bookkeeping.
func (c *core) State() *cli.Turn { return &c.Turn }

// InterruptRequest is turn/interrupt of the running turn; before Codex
// named the turn there is nothing to ask, and the escalation signals at
// once.
func (c *core) InterruptRequest() (func(id string) []byte, bool) {
	if c.codexTurn == "" {
		return nil, false
	}
	params := map[string]any{"threadId": c.thread, "turnId": c.codexTurn}
	return func(id string) []byte { return encodeRequest(id, "turn/interrupt", params) }, true
}

// steerRequest is turn/steer of text into the running turn.
func (c *core) steerRequest(text string) func(id string) []byte {
	params := map[string]any{"threadId": c.thread, "expectedTurnId": c.codexTurn, "input": textInput(text)}
	return func(id string) []byte { return encodeRequest(id, "turn/steer", params) }
}

func textInput(text string) []any {
	return []any{map[string]any{"type": "text", "text": text, "text_elements": []any{}}}
}
