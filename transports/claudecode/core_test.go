package claudecode

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
)

// The core on made-up lines: what the captures do not show.

func types(e effects) []messages.EventType {
	var out []messages.EventType
	for _, te := range e.Events {
		out = append(out, te.Ev.Type)
	}
	return out
}

func last(t *testing.T, e effects) cli.TurnEvent {
	t.Helper()
	require.NotEmpty(t, e.Events)
	return e.Events[len(e.Events)-1]
}

func running(t *testing.T, cfg coreConfig) *core {
	t.Helper()
	if cfg.outputCap == 0 {
		cfg.outputCap = 100
	}
	c := newCore(cfg)
	_, err := c.startTurn(1, "go")
	require.NoError(t, err)
	return c
}

func result(total float64, num int) Result {
	return Result{Subtype: "success", NumTurns: num, TotalCostUSD: total, HasTotal: true, Result: "done",
		Usage: messages.Usage{InputTokens: 10, OutputTokens: 2}}
}

func TestCoreTurnRules(t *testing.T) {
	c := newCore(coreConfig{})
	_, err := c.startTurn(0, "x")
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	_, err = c.steer("x")
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(err))
	assert.False(t, c.Interrupt(), "nothing to interrupt")
	e, err := c.startTurn(1, "hi")
	require.NoError(t, err)
	assert.Equal(t, [][]byte{userLine("hi")}, e.Writes)
	_, err = c.startTurn(2, "again")
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err))
	assert.True(t, c.Interrupt())
	assert.False(t, c.Interrupt(), "an interrupt is already on its way")
}

func TestCoreSteeringWaitsForIdle(t *testing.T) {
	c := running(t, coreConfig{})
	_, err := c.steer("also this")
	require.NoError(t, err)

	// the turn's own answer: with steering sent, wait
	e := c.Line(result(0.001, 1))
	assert.True(t, e.Settle)
	assert.Empty(t, e.Events)
	// the queued message starts a follow-up: the turn goes on
	assert.Empty(t, c.Line(SystemInit{SessionID: c.externalID}).Events)
	assert.False(t, c.settling)
	e = c.Line(result(0.003, 2))
	assert.True(t, e.Settle)
	// a stale settle timer of another turn does nothing
	assert.Empty(t, c.SettleTimeout(7).Events)
	// idle closes it, counting both results
	e = c.Line(SessionState{State: "idle"})
	end := last(t, e).Ev
	assert.True(t, e.Closed)
	assert.Equal(t, messages.EvTurnEnd, end.Type)
	assert.Equal(t, 3, end.NumTurns)
	assert.InDelta(t, 0.003, end.CostUSD, 1e-12)
	assert.Equal(t, messages.Usage{InputTokens: 20, OutputTokens: 4}, *end.Usage)

	// without an idle notice the settle timer closes it
	_, _ = c.startTurn(2, "next")
	_, _ = c.steer("x")
	c.Line(result(0.004, 1))
	e = c.SettleTimeout(2)
	assert.Equal(t, []messages.EventType{messages.EvTurnEnd}, types(e))
	assert.InDelta(t, 0.001, last(t, e).Ev.CostUSD, 1e-12)
	// a result after that belongs to no turn: a warning at turn 0
	e = c.Line(result(0.005, 1))
	assert.Equal(t, 0, last(t, e).Turn)
	assert.Equal(t, messages.EvWarning, last(t, e).Ev.Type)
	// and its cost is not charged to the next turn
	_, _ = c.startTurn(3, "x")
	assert.InDelta(t, 0.001, last(t, c.Line(result(0.006, 1))).Ev.CostUSD, 1e-12)
}

func TestCoreCostBaseline(t *testing.T) {
	r := result(0.05, 1)
	r.SinceLastCost, r.HasSinceLast = 0.002, true
	// a resumed session is charged what this process spent
	c := running(t, coreConfig{resumed: true})
	end := last(t, c.Line(r)).Ev
	assert.InDelta(t, 0.002, end.CostUSD, 1e-12)
	assert.InDelta(t, 0.05, end.TotalCostUSD, 1e-12)
	// without model_usage_since_last_result it is charged nothing rather than the history
	c = running(t, coreConfig{resumed: true})
	assert.Zero(t, last(t, c.Line(result(0.05, 1))).Ev.CostUSD)
	// a new session: the first total is the first turn's cost
	c = running(t, coreConfig{})
	assert.InDelta(t, 0.05, last(t, c.Line(result(0.05, 1))).Ev.CostUSD, 1e-12)
	// a result without a total reports none
	c = running(t, coreConfig{})
	end = last(t, c.Line(Result{Subtype: "success", NumTurns: 1})).Ev
	assert.Zero(t, end.CostUSD)
	assert.Zero(t, end.TotalCostUSD)
}

func TestCoreResultStates(t *testing.T) {
	c := running(t, coreConfig{})
	end := last(t, c.Line(Result{Subtype: "error_max_turns", IsError: true, Errors: []string{"Reached maximum number of turns (1)"}})).Ev
	assert.Equal(t, messages.TurnErrored, end.State)
	assert.Equal(t, "claude ended the turn with error_max_turns: Reached maximum number of turns (1)", end.Text)

	c = running(t, coreConfig{})
	end = last(t, c.Line(Result{Subtype: "error_during_execution", IsError: true, TerminalReason: "aborted_tools"})).Ev
	assert.Equal(t, messages.TurnInterrupted, end.State, "an abort the CLI reports is an interruption")

	c = running(t, coreConfig{})
	_, _ = c.steer("s")
	c.Interrupt()
	e := c.Line(Result{Subtype: "error_during_execution", IsError: true})
	assert.Equal(t, []messages.EventType{messages.EvWarning, messages.EvTurnEnd}, types(e), "no settling after an interrupt; the lost steering is reported")
	assert.Equal(t, messages.TurnInterrupted, last(t, e).Ev.State)
}

func ask(id, tool string, input string, suggestions ...string) ControlRequest {
	r := ControlRequest{RequestID: id, Subtype: "can_use_tool", ToolName: tool, Input: json.RawMessage(input), ToolUseID: "tu_" + id}
	for _, s := range suggestions {
		r.Suggestions = append(r.Suggestions, json.RawMessage(s))
	}
	return r
}

func TestCorePermissions(t *testing.T) {
	c := running(t, coreConfig{})
	e := c.Line(ask("r1", "Write", `{"file_path":"/w/a/one.txt","content":"x"}`, `{"type":"setMode","mode":"acceptEdits","destination":"session"}`))
	cl := last(t, e).Ev
	assert.Equal(t, messages.Event{Type: messages.EvClarification, ClarificationID: "r1", ToolName: "Write",
		Input: json.RawMessage(`{"file_path":"/w/a/one.txt","content":"x"}`)}, cl)
	_, err := c.Answer("r1", messages.Decision("maybe"), "")
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	_, err = c.Answer("nope", messages.DecisionAllowOnce, "")
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err))

	// allow_session without a rule offered: remembered by directory
	e, err = c.Answer("r1", messages.DecisionAllowSession, "")
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"control_response","response":{"subtype":"success","request_id":"r1","response":{"behavior":"allow","toolUseID":"tu_r1","updatedInput":{"file_path":"/w/a/one.txt","content":"x"}}}}`, string(e.Writes[0]))
	_, err = c.Answer("r1", messages.DecisionAllowOnce, "")
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err), "answered already")
	e = c.Line(ask("r2", "Write", `{"file_path":"/w/a/two.txt","content":"y"}`))
	assert.Empty(t, e.Events, "the same directory is answered by the rule")
	require.Len(t, e.Writes, 1)
	assert.Contains(t, string(e.Writes[0]), `"behavior":"allow"`)
	e = c.Line(ask("r3", "Write", `{"file_path":"/w/b/three.txt","content":"z"}`))
	assert.Equal(t, []messages.EventType{messages.EvClarification}, types(e), "another directory asks")

	// allow_session with an addRules suggestion: a session rule for the CLI
	e = c.Line(ask("r4", "Bash", `{"command":"echo hi > f"}`,
		`{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"echo hi *"}],"behavior":"allow","destination":"localSettings"}`,
		`{"type":"addDirectories","directories":["/w"],"destination":"session"}`))
	require.Len(t, e.Events, 1)
	e, err = c.Answer("r4", messages.DecisionAllowSession, "")
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"control_response","response":{"subtype":"success","request_id":"r4","response":{"behavior":"allow","toolUseID":"tu_r4","updatedInput":{"command":"echo hi > f"},
		"updatedPermissions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"echo hi *"}],"behavior":"allow","destination":"session"}]}}}`, string(e.Writes[0]))

	// deny carries the reason; cancel interrupts the turn
	e, err = c.Answer("r3", messages.DecisionDeny, "")
	require.NoError(t, err)
	assert.Contains(t, string(e.Writes[0]), `"message":"denied by the user"`)
	c.Line(ask("r5", "Bash", `{"command":"rm -rf /"}`))
	e, err = c.Answer("r5", messages.DecisionCancel, "too dangerous")
	require.NoError(t, err)
	assert.Contains(t, string(e.Writes[0]), `"interrupt":true`)
	assert.Contains(t, string(e.Writes[0]), `cancelled by the user: too dangerous`)
	assert.Equal(t, messages.TurnInterrupted, last(t, c.Line(Result{Subtype: "error_during_execution", IsError: true})).Ev.State)

	// a question left open when its turn ends is gone
	c = running(t, coreConfig{})
	c.Line(ask("r6", "Bash", `{"command":"ls"}`))
	c.Line(result(0.1, 1))
	_, err = c.Answer("r6", messages.DecisionAllowOnce, "")
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err))

	// a withdrawn question: a warning, and answering it is a conflict
	c = running(t, coreConfig{})
	c.Line(ask("r7", "Bash", `{"command":"ls"}`))
	assert.Equal(t, []messages.EventType{messages.EvWarning}, types(c.Line(ControlCancel{RequestID: "r7"})))
	_, err = c.Answer("r7", messages.DecisionAllowOnce, "")
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err))
	assert.Empty(t, c.Line(ControlCancel{RequestID: "unknown"}).Events)
}

func TestCoreAllowedToolsCeiling(t *testing.T) {
	c := running(t, coreConfig{allowed: []string{"Read", "Write", "Bash(git *)"}})
	e := c.Line(ask("r1", "Write", `{"file_path":"/w/x"}`))
	assert.Equal(t, []messages.EventType{messages.EvClarification}, types(e), "a bare entry: the CLI may ask")
	e = c.Line(ask("r2", "Bash", `{"command":"rm x"}`))
	assert.Equal(t, []messages.EventType{messages.EvWarning}, types(e), "Bash(git *) covers only git, which the CLI allows itself")
	assert.Contains(t, string(e.Writes[0]), `"behavior":"deny"`)
	assert.Contains(t, string(e.Writes[0]), "not among this session's allowed tools")
	e = c.Line(ask("r3", "WebFetch", `{}`))
	assert.Contains(t, string(e.Writes[0]), `"behavior":"deny"`)
	// no ceiling: anything may ask
	c = running(t, coreConfig{})
	assert.Equal(t, []messages.EventType{messages.EvClarification}, types(c.Line(ask("r4", "WebFetch", `{}`))))
}

func TestCoreOtherControlRequestsAreRefused(t *testing.T) {
	c := running(t, coreConfig{})
	e := c.Line(ControlRequest{RequestID: "h1", Subtype: "hook_callback"})
	assert.Equal(t, []messages.EventType{messages.EvWarning}, types(e))
	assert.JSONEq(t, `{"type":"control_response","response":{"subtype":"error","request_id":"h1","error":"codesession does not handle hook_callback requests"}}`, string(e.Writes[0]))
}

func TestCoreEvents(t *testing.T) {
	c := running(t, coreConfig{outputCap: 10, externalID: "sid"})
	e := c.Line(Assistant{Content: []Block{{Type: "thinking", Text: "hmm"}, {Type: "thinking"}, {Type: "text", Text: "hi"},
		{Type: "tool_use", ID: "t1", Name: "Read", Input: json.RawMessage(`not json`)}}})
	assert.Equal(t, []messages.EventType{messages.EvThinking, messages.EvText, messages.EvToolUse}, types(e), "empty thinking is left out")
	assert.JSONEq(t, `{}`, string(e.Events[2].Ev.Input), "a broken input becomes {}")
	e = c.Line(User{Content: []Block{{Type: "tool_result", ToolUseID: "t1", Text: "0123456789abcdef", IsError: true}, {Type: "text", Text: "[Request interrupted by user]"}}})
	require.Equal(t, []messages.EventType{messages.EvToolResult}, types(e))
	r := e.Events[0].Ev
	assert.True(t, r.Truncated)
	assert.Equal(t, 16, r.OriginalBytes)
	assert.True(t, r.IsError)
	assert.Empty(t, c.Line(User{IsReplay: true, Content: []Block{{Type: "tool_result"}}}).Events, "a replay is not news")
	assert.Empty(t, c.Line(SystemInit{SessionID: "sid"}).Events, "the id it already knows")
	e = c.Line(SystemInit{SessionID: "other", Model: "m"})
	assert.Equal(t, messages.Event{Type: messages.EvStarted, ExternalSessionID: "other", Model: "m"}, last(t, e).Ev, "a new id is announced")
	for _, l := range []Line{SystemStatus{}, SystemOther{Subtype: "informational"}, StreamEvent{}, StreamEvent{Kind: "text"}, Unknown{Type: "x"}, SessionState{State: "running"}} {
		assert.Empty(t, c.Line(l).Events, "%T", l)
	}
	assert.Equal(t, messages.Event{Type: messages.EvText, Delta: true, Text: "par"}, last(t, c.Line(StreamEvent{Kind: "text", Text: "par"})).Ev)
	assert.Equal(t, messages.Event{Type: messages.EvThinking, Delta: true, Text: "hm"}, last(t, c.Line(StreamEvent{Kind: "thinking", Text: "hm"})).Ev)
	// between turns, events are session-level (turn 0)
	c.Line(result(0.1, 1))
	assert.Equal(t, 0, c.EvTurn(), "a bad line or a dropped one is reported for turn 0")
}

func TestCoreExits(t *testing.T) {
	c := running(t, coreConfig{})
	e := c.Exited(cli.ExitOwn, "exit status 1", "boom")
	assert.Equal(t, messages.Event{Type: messages.EvError, Fatal: true, Text: "claude exited mid-turn (exit status 1): boom"}, last(t, e).Ev)
	assert.Equal(t, 1, last(t, e).Turn)
	assert.True(t, c.Fatal)

	c = running(t, coreConfig{})
	c.Interrupt()
	e = c.Exited(cli.ExitInterrupt, "signal: interrupt", "")
	end := last(t, e).Ev
	assert.Equal(t, messages.EvTurnEnd, end.Type)
	assert.Equal(t, messages.TurnInterrupted, end.State)
	assert.False(t, c.Fatal, "a process stopped by the interrupt is started again")
	assert.True(t, c.Dead)

	c = running(t, coreConfig{})
	c.Line(result(0.1, 1))
	e = c.Exited(cli.ExitOwn, "exit status 0", "")
	assert.Equal(t, []messages.EventType{messages.EvWarning}, types(e))
	assert.Equal(t, 0, last(t, e).Turn)
	assert.False(t, c.Fatal)

	// its result was in: the turn completes, then the exit is between turns
	c = running(t, coreConfig{})
	_, _ = c.steer("s")
	c.Line(result(0.1, 1))
	e = c.Exited(cli.ExitOwn, "exit status 0", "")
	assert.Equal(t, []messages.EventType{messages.EvTurnEnd, messages.EvWarning}, types(e))
	assert.Equal(t, messages.TurnCompleted, e.Events[0].Ev.State)
}

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		tool, input string
		want        rule
	}{
		{"Bash", `{"command":"  git status --short"}`, rule{"Bash", ruleCommand, "git"}},
		{"Write", `{"file_path":"/w/a/../b/c.txt"}`, rule{"Write", ruleDir, "/w/b"}},
		{"NotebookEdit", `{"notebook_path":"/w/n.ipynb"}`, rule{"NotebookEdit", ruleDir, "/w"}},
		{"WebFetch", `{"url": "https://x"}`, rule{"WebFetch", ruleExact, `{"url":"https://x"}`}},
	} {
		assert.Equal(t, tc.want, ruleFor(tc.tool, json.RawMessage(tc.input)), tc.input)
	}
	assert.Equal(t, "dir", ruleDir.String())
	assert.Equal(t, "invalid", ruleKind(0).String())
	assert.Equal(t, "interrupt", cli.ExitInterrupt.String())
	assert.Equal(t, "invalid", cli.ExitKind(0).String())
}
