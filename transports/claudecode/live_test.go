package claudecode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
)

// The live tests run the real claude CLI (the pinned version) against
// modelmock on 127.0.0.1, each with its own workspace and HOME.

func TestLiveTextTurn(t *testing.T) {
	t.Parallel()
	l := newLive(t, nil, liveOpts{})
	started, _ := l.rec.wait(t, 10*time.Second, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted })
	assert.Equal(t, 0, started.turn)
	assert.Regexp(t, `^[0-9a-f-]{36}$`, started.ev.ExternalSessionID)
	assert.Equal(t, "claude-mock-1", started.ev.Model)

	require.NoError(t, l.sess.StartTurn(ctxFor(t, 10*time.Second), 1, "say pong"))
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.EvTurnEnd, end.Type, dump(l.rec.all()))
	assert.Equal(t, messages.TurnCompleted, end.State)
	assert.Equal(t, "PONG(model=claude-mock-1): say pong", end.Text)
	assert.Equal(t, 1, end.NumTurns)
	assert.Greater(t, end.CostUSD, 0.0)
	assert.Equal(t, end.CostUSD, end.TotalCostUSD, "the first turn's cost is the whole total")
	require.NotNil(t, end.Usage)
	assert.Equal(t, int64(100), end.Usage.InputTokens)
	texts := l.rec.ofType(1, messages.EvText)
	require.NotEmpty(t, texts)
	assert.Equal(t, "PONG(model=claude-mock-1): say pong", texts[len(texts)-1].Text)
	var deltas strings.Builder
	for _, ev := range texts {
		if ev.Delta {
			deltas.WriteString(ev.Text)
		}
	}
	assert.Equal(t, "PONG(model=claude-mock-1): say pong", deltas.String(), "the text streamed as deltas before the whole message")

	// a second turn: the cost is a delta of the cumulative total
	require.NoError(t, l.sess.StartTurn(ctxFor(t, 10*time.Second), 2, "again"))
	end2 := l.rec.turnEnd(t, 2)
	require.Equal(t, messages.TurnCompleted, end2.State, dump(l.rec.all()))
	assert.InDelta(t, end.TotalCostUSD+end2.CostUSD, end2.TotalCostUSD, 1e-9)

	// set_model: the next turn runs on the new model
	require.NoError(t, l.sess.(*session).SetModel(ctxFor(t, 20*time.Second), "claude-sonnet-mock-2", ""))
	require.NoError(t, l.sess.StartTurn(ctxFor(t, 10*time.Second), 3, "which model?"))
	end3 := l.rec.turnEnd(t, 3)
	assert.Equal(t, "PONG(model=claude-sonnet-mock-2): which model?", end3.Text, dump(l.rec.all()))

	// the model saw our session id and the request went where we said
	reqs := l.mock.MainRequests()
	require.Len(t, reqs, 3, "the model check after set_model is a side request")
	assert.Equal(t, "REDACTED", reqs[0].Header.Get("X-Api-Key"), "secrets are not recorded")
	assert.Contains(t, reqs[0].Header.Get("User-Agent"), "claude-cli/"+PinnedVersion)
	assert.Contains(t, string(reqs[0].Body), started.ev.ExternalSessionID)
}

func TestLiveWriteAllowedAndBashDenied(t *testing.T) {
	t.Parallel()
	l := newLive(t, nil, liveOpts{})
	ws := l.spec.Cwd

	// Write, answered allow: the file appears
	target := filepath.Join(ws, "allowed.txt")
	require.NoError(t, l.sess.StartTurn(ctxFor(t, 10*time.Second), 1, "TOOL:WRITE "+target+" written-by-mock"))
	cl, _ := l.rec.wait(t, 60*time.Second, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvClarification })
	assert.Equal(t, 1, cl.turn)
	assert.Equal(t, "Write", cl.ev.ToolName)
	assert.JSONEq(t, `{"file_path":"`+target+`","content":"written-by-mock\n"}`, string(cl.ev.Input))
	require.NoError(t, l.sess.Answer(ctxFor(t, 10*time.Second), cl.ev.ClarificationID, messages.DecisionAllowOnce, ""))
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(l.rec.all()))
	assert.Equal(t, 2, end.NumTurns)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "written-by-mock\n", string(b))
	uses := l.rec.ofType(1, messages.EvToolUse)
	require.Len(t, uses, 1)
	assert.Equal(t, "Write", uses[0].ToolName)
	results := l.rec.ofType(1, messages.EvToolResult)
	require.Len(t, results, 1)
	assert.Equal(t, uses[0].ToolUseID, results[0].ToolUseID)
	assert.False(t, results[0].IsError)
	assert.Contains(t, results[0].Output, "File created successfully")

	// answering it again is a conflict; an unknown id is not found
	err = l.sess.Answer(ctxFor(t, 5*time.Second), cl.ev.ClarificationID, messages.DecisionAllowOnce, "")
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err))
	err = l.sess.Answer(ctxFor(t, 5*time.Second), "nope", messages.DecisionAllowOnce, "")
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err))

	// Bash, answered deny: nothing runs and the model receives the reason
	denied := filepath.Join(ws, "denied.txt")
	require.NoError(t, l.sess.StartTurn(ctxFor(t, 10*time.Second), 2, "TOOL:BASH echo hello-from-bash > "+denied))
	cl2, _ := l.rec.wait(t, 60*time.Second, 0, func(te turnEvent) bool {
		return te.turn == 2 && te.ev.Type == messages.EvClarification
	})
	assert.Equal(t, "Bash", cl2.ev.ToolName)
	require.NoError(t, l.sess.Answer(ctxFor(t, 10*time.Second), cl2.ev.ClarificationID, messages.DecisionDeny, "no shell today"))
	end2 := l.rec.turnEnd(t, 2)
	require.Equal(t, messages.TurnCompleted, end2.State, dump(l.rec.all()))
	assert.NoFileExists(t, denied)
	results = l.rec.ofType(2, messages.EvToolResult)
	require.Len(t, results, 1)
	assert.True(t, results[0].IsError)
	assert.Contains(t, results[0].Output, "no shell today")
	var sawDeny bool
	for _, tr := range l.mock.ToolResults() {
		if tr.ToolName == "Bash" && tr.IsError && strings.Contains(tr.Content, "no shell today") {
			sawDeny = true
		}
	}
	assert.True(t, sawDeny, "the model received the deny message: %+v", l.mock.ToolResults())
	assert.Equal(t, "TOOL_DONE: is_error=true result=no shell today", end2.Text)
}

func TestLiveInterruptSlowStream(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "SLOW"}, Steps: []modelmock.Step{
		{Text: strings.Repeat("slow chunk ", 30), Chunks: 30, ChunkDelay: modelmock.Duration(time.Second)},
	}}}}
	l := newLive(t, sc, liveOpts{})
	require.NoError(t, l.sess.StartTurn(ctxFor(t, 10*time.Second), 1, "SLOW please"))
	waitFor(t, 60*time.Second, func() bool { return len(l.mock.MainRequests()) == 1 })
	start := time.Now()
	require.NoError(t, l.sess.(*session).Interrupt(ctxFor(t, 20*time.Second)))
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.EvTurnEnd, end.Type, dump(l.rec.all()))
	assert.Equal(t, messages.TurnInterrupted, end.State)
	assert.Less(t, time.Since(start), 20*time.Second, "the interrupt ended the 30 s stream early")
	assert.Empty(t, l.rec.ofType(1, messages.EvError))

	// the session goes on
	require.NoError(t, l.sess.StartTurn(ctxFor(t, 10*time.Second), 2, "after the interrupt"))
	end2 := l.rec.turnEnd(t, 2)
	assert.Equal(t, messages.TurnCompleted, end2.State, dump(l.rec.all()))
	assert.Equal(t, "PONG(model=claude-mock-1): after the interrupt", end2.Text)
}

func waitFor(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLiveSetPermissionMode(t *testing.T) {
	t.Parallel()
	l := newLive(t, nil, liveOpts{})
	ctx := ctxFor(t, 60*time.Second)
	// acceptEdits: a Write runs without asking
	require.NoError(t, l.sess.(*session).SetPosture(ctx, messages.PostureAcceptEdits))
	target := filepath.Join(l.spec.Cwd, "accepted.txt")
	require.NoError(t, l.sess.StartTurn(ctx, 1, "TOOL:WRITE "+target+" auto-accepted"))
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(l.rec.all()))
	assert.Empty(t, l.rec.ofType(1, messages.EvClarification))
	assert.FileExists(t, target)

	// back to default: it asks again
	require.NoError(t, l.sess.(*session).SetPosture(ctx, messages.PostureDefault))
	target2 := filepath.Join(l.spec.Cwd, "asked.txt")
	require.NoError(t, l.sess.StartTurn(ctx, 2, "TOOL:WRITE "+target2+" asked"))
	cl, _ := l.rec.wait(t, 60*time.Second, 0, func(te turnEvent) bool { return te.turn == 2 && te.ev.Type == messages.EvClarification })
	require.NoError(t, l.sess.Answer(ctx, cl.ev.ClarificationID, messages.DecisionDeny, "not now"))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 2).State)
	assert.NoFileExists(t, target2)

	// full asks nothing of the user: the transport allows what the gate admits
	require.NoError(t, l.sess.(*session).SetPosture(ctx, messages.PostureFull))
	target3 := filepath.Join(l.spec.Cwd, "bypass.txt")
	require.NoError(t, l.sess.StartTurn(ctx, 3, "TOOL:BASH echo bypassed > "+target3))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 3).State, dump(l.rec.all()))
	assert.Empty(t, l.rec.ofType(3, messages.EvClarification))
	assert.FileExists(t, target3)

	// an invalid posture never reaches the CLI
	err := l.sess.(*session).SetPosture(ctx, messages.Posture("bogus"))
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
}

func TestLivePlanModeClassifierSideRequest(t *testing.T) {
	t.Parallel()
	// With nonessential traffic allowed, plan mode asks the endpoint's
	// safety classifier; modelmock answers it without using the scenario.
	l := newLive(t, nil, liveOpts{posture: messages.PosturePlan, env: []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="}})
	target := filepath.Join(l.spec.Cwd, "plan.txt")
	require.NoError(t, l.sess.StartTurn(ctxFor(t, 10*time.Second), 1, "TOOL:BASH echo plan > "+target))
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(l.rec.all()))
	var kinds []modelmock.Kind
	for _, r := range l.mock.Requests() {
		kinds = append(kinds, r.Kind)
	}
	assert.Contains(t, kinds, modelmock.KindClassifier, "plan mode asked the classifier")
	assert.Len(t, l.mock.MainRequests(), 2, "side requests do not use the scenario: %v", kinds)
}

func TestLiveSteer(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "MULTI"}, Steps: []modelmock.Step{
			{Text: "running a slow command", Tool: &modelmock.ToolCall{Name: "Bash", Input: []byte(`{"command":"sleep 3; echo slept","description":"sleep"}`)}},
			{Text: "after bash: {{result}}"},
		}},
		{Match: modelmock.Match{Text: "STEER-MARK"}, Steps: []modelmock.Step{{Text: "I was steered: {{input}}"}}},
		{Match: modelmock.Match{Text: "SLOW"}, Steps: []modelmock.Step{{Text: "a b c d e f", Chunks: 6, ChunkDelay: modelmock.Duration(500 * time.Millisecond)}}},
	}}
	l := newLive(t, sc, liveOpts{})
	ctx := ctxFor(t, 90*time.Second)

	// steering while a tool runs is folded into the running turn
	require.NoError(t, l.sess.StartTurn(ctx, 1, "MULTI please"))
	l.rec.wait(t, 60*time.Second, 0, func(te turnEvent) bool { return te.turn == 1 && te.ev.Type == messages.EvToolUse })
	require.NoError(t, l.sess.(*session).Steer(ctx, "STEER-MARK one"))
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(l.rec.all()))
	assert.Equal(t, "I was steered: STEER-MARK one", end.Text)
	assert.Len(t, l.rec.ofType(1, messages.EvTurnEnd), 1)

	// steering while the model streams text runs right after the answer:
	// the CLI reports two results, the turn still ends once
	n := len(l.mock.MainRequests())
	require.NoError(t, l.sess.StartTurn(ctx, 2, "SLOW please"))
	waitFor(t, 60*time.Second, func() bool { return len(l.mock.MainRequests()) == n+1 })
	require.NoError(t, l.sess.(*session).Steer(ctx, "STEER-MARK two"))
	end2 := l.rec.turnEnd(t, 2)
	require.Equal(t, messages.TurnCompleted, end2.State, dump(l.rec.all()))
	assert.Equal(t, "I was steered: STEER-MARK two", end2.Text)
	assert.Equal(t, 2, end2.NumTurns, "both CLI results count")
	time.Sleep(DefaultSettleTimeout + 500*time.Millisecond)
	assert.Len(t, l.rec.ofType(2, messages.EvTurnEnd), 1, dump(l.rec.all()))
	assert.Empty(t, l.rec.ofType(2, messages.EvWarning), dump(l.rec.all()))

	// with no turn running there is nothing to steer
	err := l.sess.(*session).Steer(ctx, "late")
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(err))
}

func TestLiveResumeAfterClose(t *testing.T) {
	t.Parallel()
	l := newLive(t, nil, liveOpts{})
	ctx := ctxFor(t, 90*time.Second)
	require.NoError(t, l.sess.StartTurn(ctx, 1, "remember the word BLUEBIRD"))
	first := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, first.State)
	started, _ := l.rec.wait(t, time.Second, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted })
	ext := started.ev.ExternalSessionID
	l.close()

	l.spec.ResumeExternalID = ext
	l.rec = newRecorder()
	l.open()
	again, _ := l.rec.wait(t, 10*time.Second, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted })
	assert.Equal(t, ext, again.ev.ExternalSessionID)
	require.NoError(t, l.sess.StartTurn(ctx, 1, "what was the word?"))
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(l.rec.all()))
	reqs := l.mock.MainRequests()
	last := reqs[len(reqs)-1]
	assert.Contains(t, string(last.Body), "remember the word BLUEBIRD", "the history was replayed to the model")
	assert.Contains(t, string(last.Body), ext)
	assert.Greater(t, end.TotalCostUSD, first.TotalCostUSD, "the total goes on across --resume")
	assert.InDelta(t, end.TotalCostUSD-first.TotalCostUSD, end.CostUSD, 1e-9, "the turn is charged only its own cost")
	assert.Empty(t, l.rec.ofType(1, messages.EvStarted), "no second started event: the id did not change")

	// resuming an id with no transcript under this HOME starts a new
	// conversation with the same id, and says so
	l.close()
	l.spec.ResumeExternalID = transports.NewUUID()
	l.rec = newRecorder()
	l.open()
	w, _ := l.rec.wait(t, 10*time.Second, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvWarning })
	assert.Contains(t, w.ev.Text, "keeps no transcript of session "+l.spec.ResumeExternalID)
	require.NoError(t, l.sess.StartTurn(ctx, 1, "fresh"))
	assert.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 1).State, dump(l.rec.all()))
}

func TestLiveExitMidTurnIsFatalWithStderrTail(t *testing.T) {
	t.Parallel()
	bin := claudeBinary(t)
	wrapper := filepath.Join(t.TempDir(), "claude-wrapper")
	require.NoError(t, os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\necho 'wrapper: starting claude' >&2\nexec %q \"$@\"\n", bin)), 0o755))
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "SLOW"}, Steps: []modelmock.Step{
		{Text: strings.Repeat("slow ", 30), Chunks: 30, ChunkDelay: modelmock.Duration(time.Second)},
	}}}}
	l := newLive(t, sc, liveOpts{topts: []Option{WithBinary(wrapper)}})
	ctx := ctxFor(t, 90*time.Second)
	require.NoError(t, l.sess.StartTurn(ctx, 1, "SLOW please"))
	waitFor(t, 60*time.Second, func() bool { return len(l.mock.MainRequests()) == 1 })
	s := l.sess.(*session)
	s.Lock()
	pid := s.Proc.Pid()
	s.Unlock()
	require.NoError(t, exec.Command("kill", "-9", fmt.Sprint(pid)).Run())
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.EvError, end.Type, dump(l.rec.all()))
	assert.True(t, end.Fatal)
	assert.Contains(t, end.Text, "claude exited mid-turn (signal: killed): ")
	assert.Contains(t, end.Text, "wrapper: starting claude", "the stderr tail rides along")
	assert.Empty(t, l.rec.ofType(1, messages.EvTurnEnd))

	// the session is dead: a new one resumes it (as the runtime does after a fatal error)
	err := l.sess.StartTurn(ctx, 2, "are you there?")
	assert.Equal(t, messages.CodeInternal, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), "backend exited")
	l.close()
	started, _ := l.rec.wait(t, time.Second, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted })
	l.spec.ResumeExternalID = started.ev.ExternalSessionID
	l.rec = newRecorder()
	l.open()
	require.NoError(t, l.sess.StartTurn(ctx, 2, "are you back?"))
	end2 := l.rec.turnEnd(t, 2)
	require.Equal(t, messages.TurnCompleted, end2.State, dump(l.rec.all()))
	assert.Equal(t, "PONG(model=claude-mock-1): are you back?", end2.Text)
}

func TestLiveAllowSession(t *testing.T) {
	t.Parallel()
	l := newLive(t, nil, liveOpts{})
	ctx := ctxFor(t, 90*time.Second)
	ws := l.spec.Cwd
	// Write offers no rule of its own (only setMode): the transport
	// remembers the directory
	require.NoError(t, l.sess.StartTurn(ctx, 1, "TOOL:WRITE "+filepath.Join(ws, "one.txt")+" one"))
	cl, _ := l.rec.wait(t, 60*time.Second, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvClarification })
	require.NoError(t, l.sess.Answer(ctx, cl.ev.ClarificationID, messages.DecisionAllowSession, ""))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 1).State)
	require.NoError(t, l.sess.StartTurn(ctx, 2, "TOOL:WRITE "+filepath.Join(ws, "two.txt")+" two"))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 2).State, dump(l.rec.all()))
	assert.Empty(t, l.rec.ofType(2, messages.EvClarification), "the same directory is allowed for the session")
	assert.FileExists(t, filepath.Join(ws, "two.txt"))

	// Bash offers an addRules suggestion: it becomes a session rule in the CLI
	require.NoError(t, l.sess.StartTurn(ctx, 3, "TOOL:BASH echo first > "+filepath.Join(ws, "b1.txt")))
	cl3, _ := l.rec.wait(t, 60*time.Second, 0, func(te turnEvent) bool { return te.turn == 3 && te.ev.Type == messages.EvClarification })
	require.NoError(t, l.sess.Answer(ctx, cl3.ev.ClarificationID, messages.DecisionAllowSession, ""))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 3).State)
	assert.FileExists(t, filepath.Join(ws, "b1.txt"))
	assert.NoFileExists(t, filepath.Join(ws, ".claude", "settings.local.json"), "the rule never lands in the workspace's settings")
}

func TestLiveAllowedTools(t *testing.T) {
	t.Parallel()
	l := newLive(t, nil, liveOpts{allowed: []string{"Read", "Write"}})
	ctx := ctxFor(t, 60*time.Second)
	// a listed tool runs without asking (the CLI's meaning of allowedTools)
	target := filepath.Join(l.spec.Cwd, "listed.txt")
	require.NoError(t, l.sess.StartTurn(ctx, 1, "TOOL:WRITE "+target+" listed"))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 1).State, dump(l.rec.all()))
	assert.Empty(t, l.rec.ofType(1, messages.EvClarification))
	assert.FileExists(t, target)
	// a tool outside the list is not even offered to the model
	denied := filepath.Join(l.spec.Cwd, "bash.txt")
	require.NoError(t, l.sess.StartTurn(ctx, 2, "TOOL:BASH echo x > "+denied))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 2).State, dump(l.rec.all()))
	assert.Empty(t, l.rec.ofType(2, messages.EvClarification))
	assert.NoFileExists(t, denied)
	results := l.rec.ofType(2, messages.EvToolResult)
	require.Len(t, results, 1)
	assert.True(t, results[0].IsError)
	reqs := l.mock.MainRequests()
	offered := reqs[len(reqs)-1].Conversation().Tools
	assert.NotContains(t, offered, "Bash", "offered: %v", offered)
	assert.Contains(t, offered, "Write")
}
