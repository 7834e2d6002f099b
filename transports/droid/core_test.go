package droid

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/gate"
	"github.com/codesession/codesession/transports/gate/gatetest"
)

func notif(n map[string]any) Line {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "type": "notification", "method": methodNotification,
		"params": map[string]any{"notification": n}})
	l, err := ParseLine(b)
	if err != nil {
		panic(err)
	}
	return l
}

func completed(reason string) Line {
	return notif(map[string]any{"type": "agent_turn_completed", "reason": reason,
		"tokenUsage": map[string]any{"inputTokens": 10, "outputTokens": 2}})
}

func assistant(text string) Line {
	return notif(map[string]any{"type": "create_message", "message": map[string]any{"id": "m", "role": "assistant",
		"content": []any{map[string]any{"type": "text", "text": text}}}})
}

func permReq(id, tool string, input map[string]any, filePath string) Line {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "type": "request", "id": id, "method": methodPermission,
		"params": map[string]any{
			"toolUses": []any{map[string]any{"toolUse": map[string]any{"id": "call_1", "name": tool, "input": input},
				"confirmationType": "create", "details": map[string]any{"filePath": filePath}}},
			"options": []any{map[string]any{"value": "proceed_once"}, map[string]any{"value": "proceed_always"}, map[string]any{"value": "cancel"}}}})
	l, err := ParseLine(b)
	if err != nil {
		panic(err)
	}
	return l
}

func newTestCore(t *testing.T, ws *gate.Workspace, p messages.Posture) *core {
	t.Helper()
	return newCore(coreConfig{outputCap: 1 << 10, lineCap: 1 << 20, ws: ws, posture: p, idPrefix: "t-"})
}

// written decodes the stdin lines of effects.
func written(t *testing.T, e effects) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, w := range e.Writes {
		var m map[string]any
		require.NoError(t, json.Unmarshal(w, &m))
		out = append(out, m)
	}
	return out
}

func types(e effects) []string {
	var out []string
	for _, te := range e.Events {
		out = append(out, fmt.Sprintf("%d:%s", te.Turn, te.Ev.Type))
	}
	return out
}

func TestCoreTextTurn(t *testing.T) {
	c := newTestCore(t, nil, messages.PostureDefault)
	e, err := c.startTurn(1, "say pong")
	require.NoError(t, err)
	w := written(t, e)
	require.Len(t, w, 1)
	assert.Equal(t, methodAddUserMessage, w[0]["method"])
	assert.Equal(t, map[string]any{"text": "say pong"}, w[0]["params"])
	_, err = c.startTurn(2, "again")
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err))

	e = c.Line(assistant("PONG"))
	assert.Equal(t, []string{"1:text"}, types(e))
	e = c.Line(completed("completed"))
	require.Equal(t, []string{"1:turn_end"}, types(e))
	end := e.Events[0].Ev
	assert.Equal(t, messages.TurnCompleted, end.State)
	assert.Equal(t, "PONG", end.Text)
	assert.Equal(t, &messages.Usage{InputTokens: 10, OutputTokens: 2}, end.Usage)
	assert.True(t, e.Closed)
}

func TestCoreToolEventsOnceEach(t *testing.T) {
	c := newTestCore(t, nil, messages.PostureDefault)
	_, _ = c.startTurn(1, "x")
	e := c.Line(notif(map[string]any{"type": "tool_call", "toolUse": map[string]any{"id": "c1", "name": "Execute", "input": map[string]any{}}}))
	assert.Empty(t, e.Events, "the first announcement has no input yet")
	e = c.Line(notif(map[string]any{"type": "tool_call", "toolUse": map[string]any{"id": "c1", "name": "Execute", "input": map[string]any{"command": "ls"}}}))
	require.Equal(t, []string{"1:tool_use"}, types(e))
	big := strings.Repeat("y", 5000)
	e = c.Line(notif(map[string]any{"type": "tool_result", "toolUseId": "c1", "content": big}))
	require.Equal(t, []string{"1:tool_result"}, types(e))
	assert.True(t, e.Events[0].Ev.Truncated)
	assert.Equal(t, 5000, e.Events[0].Ev.OriginalBytes)
	e = c.Line(notif(map[string]any{"type": "tool_result", "toolUseId": "c1", "content": "again"}))
	assert.Empty(t, e.Events, "droid repeats a cancelled call's result")
}

// TestCoreGateRefusesPathsOutside runs the seed 002 fixture's escaping
// paths through a permission question: each is refused without asking and
// the reason reaches the model as a follow-up once droid ends its turn.
func TestCoreGateRefusesPathsOutside(t *testing.T) {
	fx := gatetest.New(t)
	for _, viaLink := range []bool{false, true} {
		ws := fx.Workspace(t, viaLink)
		for _, rel := range []string{"link-out/x.txt", "escape.txt", "dangling.txt", "../other/x.txt", "sub/upup/other/x.txt"} {
			c := newTestCore(t, &ws, messages.PostureDefault)
			_, _ = c.startTurn(1, "write")
			p := filepath.Join(ws.Given(), rel)
			e := c.Line(permReq("p1", "Create", map[string]any{"file_path": p, "content": "x"}, p))
			assert.Equal(t, []string{"1:warning"}, types(e), rel)
			w := written(t, e)
			require.Len(t, w, 1)
			assert.Equal(t, "cancel", w[0]["result"].(map[string]any)["selectedOption"], rel)
			e = c.Line(completed("completed"))
			assert.Empty(t, e.Events, "the turn stays open for the follow-up")
			w = written(t, e)
			require.Len(t, w, 1)
			assert.Contains(t, w[0]["params"].(map[string]any)["text"], "codesession refused your Create call")
			e = c.Line(completed("completed"))
			assert.Equal(t, []string{"1:turn_end"}, types(e))
		}
		// inside: a clarification
		c := newTestCore(t, &ws, messages.PostureDefault)
		_, _ = c.startTurn(1, "write")
		p := filepath.Join(ws.Given(), "sub", "new.txt")
		e := c.Line(permReq("p2", "Create", map[string]any{"file_path": p}, p))
		require.Equal(t, []string{"1:clarification"}, types(e))
		assert.Equal(t, "p2", e.Events[0].Ev.ClarificationID)
		assert.Equal(t, "Create", e.Events[0].Ev.ToolName)
	}
}

func TestCoreAnswers(t *testing.T) {
	dir := t.TempDir()
	ws, err := gate.NewWorkspace(dir)
	require.NoError(t, err)
	p := filepath.Join(dir, "a.txt")
	for _, tc := range []struct {
		d      messages.Decision
		option string
		state  messages.TurnState
	}{
		{messages.DecisionAllowOnce, "proceed_once", messages.TurnCompleted},
		{messages.DecisionAllowSession, "proceed_always", messages.TurnCompleted},
		{messages.DecisionDeny, "cancel", messages.TurnCompleted},
		{messages.DecisionCancel, "cancel", messages.TurnInterrupted},
	} {
		c := newTestCore(t, &ws, messages.PostureDefault)
		_, _ = c.startTurn(1, "write")
		c.Line(permReq("p1", "Create", map[string]any{"file_path": p}, p))
		_, err := c.Answer("nope", tc.d, "")
		assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err))
		e, err := c.Answer("p1", tc.d, "not today")
		require.NoError(t, err)
		w := written(t, e)
		require.Len(t, w, 1)
		assert.Equal(t, "p1", w[0]["id"])
		assert.Equal(t, tc.option, w[0]["result"].(map[string]any)["selectedOption"], tc.d)
		_, err = c.Answer("p1", tc.d, "")
		assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err))
		e = c.Line(completed("completed"))
		if tc.d == messages.DecisionDeny {
			w := written(t, e)
			require.Len(t, w, 1, "the deny reason follows")
			assert.Contains(t, w[0]["params"].(map[string]any)["text"], "not today")
			e = c.Line(completed("completed"))
		}
		require.Equal(t, []string{"1:turn_end"}, types(e), tc.d)
		assert.Equal(t, tc.state, e.Events[0].Ev.State, tc.d)
	}
}

func TestCorePlanRefusesEveryQuestion(t *testing.T) {
	ws, err := gate.NewWorkspace(t.TempDir())
	require.NoError(t, err)
	c := newTestCore(t, &ws, messages.PosturePlan)
	_, _ = c.startTurn(1, "run")
	e := c.Line(permReq("p1", "Execute", map[string]any{"command": "rm -rf x", "riskLevel": "low"}, ""))
	assert.Equal(t, []string{"1:warning"}, types(e))
	assert.Contains(t, e.Events[0].Ev.Text, "plan posture")
	c.setPosture(messages.PostureDefault)
	e = c.Line(permReq("p2", "Execute", map[string]any{"command": "ls"}, ""))
	assert.Equal(t, []string{"1:clarification"}, types(e))
}

func TestCoreInterruptAndExit(t *testing.T) {
	c := newTestCore(t, nil, messages.PostureDefault)
	assert.False(t, c.Interrupt(), "no turn runs")
	_, _ = c.startTurn(1, "slow")
	assert.True(t, c.Interrupt())
	assert.False(t, c.Interrupt(), "already interrupting")
	e := c.Line(completed("cancelled"))
	require.Equal(t, []string{"1:turn_end"}, types(e))
	assert.Equal(t, messages.TurnInterrupted, e.Events[0].Ev.State)

	_, _ = c.startTurn(2, "work")
	e = c.Exited(cli.ExitOwn, "exit status 1", "boom")
	require.Equal(t, []string{"2:error"}, types(e))
	assert.True(t, e.Events[0].Ev.Fatal)
	assert.Contains(t, e.Events[0].Ev.Text, "boom")
	assert.True(t, c.Fatal)

	c2 := newTestCore(t, nil, messages.PostureDefault)
	e = c2.Exited(cli.ExitOwn, "exit status 0", "")
	assert.Equal(t, []string{"0:warning"}, types(e))
	assert.False(t, c2.Fatal)
}

func TestCoreRefusesOtherRequests(t *testing.T) {
	c := newTestCore(t, nil, messages.PostureDefault)
	l, err := ParseLine([]byte(`{"type":"request","id":"q1","method":"droid.ask_user","params":{}}`))
	require.NoError(t, err)
	e := c.Line(l)
	w := written(t, e)
	require.Len(t, w, 1)
	assert.NotNil(t, w[0]["error"])
	assert.Equal(t, []string{"0:warning"}, types(e))
}

func TestCoreAcceptEditsApprovesGatedEditsOnly(t *testing.T) {
	dir := t.TempDir()
	ws, err := gate.NewWorkspace(dir)
	require.NoError(t, err)
	c := newTestCore(t, &ws, messages.PostureAcceptEdits)
	_, _ = c.startTurn(1, "work")
	p := filepath.Join(dir, "a.txt")
	e := c.Line(permReq("p1", "Create", map[string]any{"file_path": p}, p))
	assert.Empty(t, e.Events, "no clarification")
	w := written(t, e)
	require.Len(t, w, 1)
	assert.Equal(t, "proceed_once", w[0]["result"].(map[string]any)["selectedOption"])
	e = c.Line(permReq("p2", "Execute", map[string]any{"command": "ls", "riskLevel": "low"}, ""))
	assert.Equal(t, []string{"1:clarification"}, types(e), "commands are asked about")
	out := filepath.Join(t.TempDir(), "x")
	e = c.Line(permReq("p3", "Create", map[string]any{"file_path": out}, out))
	assert.Equal(t, []string{"1:warning"}, types(e), "the gate still refuses")
}

// TestCoreInterruptKeepsStreamedText: text droid streamed before an
// interrupt (assistant_text_delta, no create_message) is the interrupted
// turn's text and goes in the log; a whole message replaces its deltas
// (on the old code the interrupted turn's text was empty).
func TestCoreInterruptKeepsStreamedText(t *testing.T) {
	delta := func(s string) Line {
		return notif(map[string]any{"type": "assistant_text_delta", "messageId": "m", "textDelta": s})
	}
	c := newTestCore(t, nil, messages.PostureDefault)
	_, _ = c.startTurn(1, "slow")
	c.Line(delta("Starting "))
	c.Line(delta("a long job"))
	require.True(t, c.Interrupt())
	e := c.Line(completed("cancelled"))
	require.Equal(t, []string{"1:text", "1:turn_end"}, types(e))
	assert.Equal(t, "Starting a long job", e.Events[0].Ev.Text)
	assert.Equal(t, messages.TurnInterrupted, e.Events[1].Ev.State)
	assert.Equal(t, "Starting a long job", e.Events[1].Ev.Text)

	_, _ = c.startTurn(2, "work")
	c.Line(delta("half"))
	e = c.Line(assistant("whole"))
	assert.Equal(t, []string{"2:text"}, types(e))
	e = c.Line(completed("completed"))
	assert.Equal(t, "whole", e.Events[0].Ev.Text, "the deltas of a whole message are not kept twice")

	_, _ = c.startTurn(3, "stuck")
	c.Line(delta("streamed"))
	require.True(t, c.Interrupt())
	e = c.Exited(cli.ExitInterrupt, "signal: killed", "")
	require.Equal(t, []string{"3:text", "3:turn_end"}, types(e))
	assert.Contains(t, e.Events[1].Ev.Text, "streamed")
}
