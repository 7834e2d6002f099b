package actors

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

func testConfig(t *testing.T) config.Config {
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = "script"
	cfg.Supervision.ShutdownTimeout = config.Duration(2 * time.Second)
	return cfg
}

func newRuntime(t *testing.T, cfg config.Config, sc *script.Scenario, opts ...Option) *Runtime {
	t.Helper()
	opts = append([]Option{WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc))))}, opts...)
	rt, err := New(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		// only stops a hang: a Close cut short leaves goroutines that
		// TestMain's goleak then reports against the whole package
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rt.Close(ctx)
	})
	return rt
}

// ctxT bounds a test's ops: it only stops a hang, so it is generous (the
// race detector on a loaded two-core machine is slow; no test here waits
// for it to end).
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestEndToEndWithScriptBackend(t *testing.T) {
	work := t.TempDir()
	sc := &script.Scenario{Turns: []script.Turn{
		{Steps: []script.Step{
			script.Text("starting"),
			script.Write("hello.txt", "hi\n"),
			script.Tool("Bash", map[string]any{"command": "ls"}, "hello.txt").Asking(),
			script.Text("turn one done"),
		}, CostUSD: 0.01},
		{Steps: []script.Step{
			script.Write("denied.txt", "no\n").Asking(),
			script.Text("turn two done"),
		}, CostUSD: 0.02},
		{Steps: []script.Step{script.Delay(time.Minute), script.Text("never")}},
	}}
	cfg := testConfig(t)
	rt := newRuntime(t, cfg, sc)
	ctx := ctxT(t)
	const scope = "driver-1"

	st, err := rt.Start(ctx, scope, messages.Start{Brief: "write hello", Cwd: work, MaxPosture: messages.PostureAcceptEdits, TaskTags: []string{"demo"}})
	require.NoError(t, err)
	sid := st.SessionID
	assert.True(t, messages.ValidSessionID(sid))
	assert.Equal(t, messages.PostureDefault, st.Posture)

	// turn 1: the Bash call asks; allow it
	r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindClarification, r.Kind, "%+v", r)
	assert.Equal(t, "Bash", r.ToolName)
	_, err = rt.Answer(ctx, scope, messages.Answer{SessionID: sid, ClarificationID: "wrong", Decision: messages.DecisionAllowOnce})
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err))
	ans, err := rt.Answer(ctx, scope, messages.Answer{SessionID: sid, ClarificationID: r.ClarificationID, Decision: messages.DecisionAllowOnce})
	require.NoError(t, err)
	assert.Equal(t, messages.DecisionAllowOnce, ans.Clarification.Decision)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid, IncludeDiff: true})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, "turn one done", r.Text)
	assert.Equal(t, 1, r.Turn)
	require.NotNil(t, r.TurnDiff)
	assert.Equal(t, messages.DiffToolEvents, r.TurnDiff.Source, "not a git work tree: the edit-tool paths")
	assert.Equal(t, []messages.FileChange{{Path: "hello.txt", Status: "M"}}, r.TurnDiff.Files)
	b, err := os.ReadFile(filepath.Join(work, "hello.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hi\n", string(b))

	// turn 2 by guidance: the write asks; deny it with a reason
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "now the second file"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindClarification, r.Kind)
	_, err = rt.Answer(ctx, scope, messages.Answer{SessionID: sid, ClarificationID: r.ClarificationID, Decision: messages.DecisionDeny, Reason: "not that file"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, 2, r.Turn)
	assert.NoFileExists(t, filepath.Join(work, "denied.txt"))
	var sawDeny bool
	for _, h := range r.RoundHistory {
		if h.Kind == messages.HistDeny {
			sawDeny = h.Pinned
		}
	}
	assert.True(t, sawDeny, "the deny is pinned in the round history: %+v", r.RoundHistory)

	// posture: above the ceiling is rejected, below is fine
	_, err = rt.SetPosture(ctx, scope, messages.SetPosture{SessionID: sid, Posture: messages.PostureFull})
	assert.Equal(t, messages.CodeCeilingExceeded, messages.ErrorCode(err))
	p, err := rt.SetPosture(ctx, scope, messages.SetPosture{SessionID: sid, Posture: messages.PosturePlan})
	require.NoError(t, err)
	assert.Equal(t, messages.PosturePlan, p.Posture)

	// turn 3 runs a long delay: interrupt it
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "take your time"})
	require.NoError(t, err)
	readDone := make(chan messages.TurnResult, 1)
	go func() {
		for {
			r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
			if messages.ErrorCode(err) == messages.CodeConflict {
				continue // the probe below held the reader slot for a moment
			}
			assert.NoError(t, err)
			readDone <- r
			return
		}
	}()
	// a second concurrent read is a conflict
	require.Eventually(t, func() bool {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := rt.ReadTurn(short, scope, messages.ReadTurn{SessionID: sid})
		return messages.ErrorCode(err) == messages.CodeConflict
	}, time.Minute, 10*time.Millisecond)
	_, err = rt.Interrupt(ctx, scope, messages.Interrupt{SessionID: sid})
	require.NoError(t, err)
	r = <-readDone
	assert.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, messages.TurnInterrupted, r.State)

	// another scope cannot see the session at all
	_, err = rt.Stop(ctx, "someone-else", messages.Stop{SessionID: sid})
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err))

	stop, err := rt.Stop(ctx, scope, messages.Stop{SessionID: sid, Outcome: messages.OutcomeSuccess, Note: "done"})
	require.NoError(t, err)
	assert.False(t, stop.AlreadyStopped)
	assert.Equal(t, messages.OutcomeSuccess, stop.Outcome)
	stop, err = rt.Stop(ctx, scope, messages.Stop{SessionID: sid})
	require.NoError(t, err)
	assert.True(t, stop.AlreadyStopped)
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "more"})
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(err))

	require.NoError(t, rt.Close(ctx))

	// a fresh runtime on the same home sees the whole story
	rt2 := newRuntime(t, cfg, sc)
	rec, err := rt2.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, rec.Status)
	assert.Equal(t, messages.OutcomeSuccess, rec.Outcome)
	assert.Equal(t, 3, rec.RoundsElapsed)
	assert.InDelta(t, 0.03, rec.CostUSD, 1e-9)
	assert.Equal(t, messages.PosturePlan, rec.Posture)
	require.Len(t, rec.Runs, 1)
	assert.Equal(t, scope, rec.Runs[0].OwnerScopeID)
	assert.NotEmpty(t, rec.Runs[0].ExternalSessionID)
	evs, err := rt2.Store().ReadEvents(ctx, sid, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	for i, ev := range evs {
		require.Equal(t, uint64(i+1), ev.Seq, "gapless seq")
	}
	assert.Equal(t, messages.EvReleased, evs[len(evs)-1].Event.Type)
	assert.Equal(t, messages.ReleaseExplicit, evs[len(evs)-1].Event.ReleaseReason)
	// stop is still idempotent across runtimes
	stop, err = rt2.Stop(ctx, scope, messages.Stop{SessionID: sid})
	require.NoError(t, err)
	assert.True(t, stop.AlreadyStopped)
}
