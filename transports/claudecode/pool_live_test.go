package claudecode

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
	"github.com/codesession/codesession/transports/transporttest/pooltest"
)

// A start adopts the pooled process booted after the previous start: its
// model and posture are set through control requests, the pool refills,
// and draining the runtime's kit kills what is pooled, records included.
func TestLiveWarmPoolAdoptsSetsAndDrains(t *testing.T) {
	bin := claudeBinary(t)
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	kit, err := prockit.NewKit(t.TempDir(), "rt-warm-test")
	require.NoError(t, err)
	t.Cleanup(kit.Close) // last: after the sessions and the pool
	tr := New(WithBinary(bin), WithWarmPool(1))
	defer tr.DrainWarm(nil)
	cwd, home := t.TempDir(), t.TempDir()
	spec := func(id string, model string, p messages.Posture) transports.SessionSpec {
		return transports.SessionSpec{SessionID: id, Cwd: cwd, Home: home, Model: model, Posture: p, Procs: kit.Group(id),
			Env: []string{"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test"}}
	}
	open := func(sp transports.SessionSpec, rec *recorder) *session {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		s, err := tr.Open(ctx, sp, rec.sink)
		require.NoError(t, err)
		t.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			_ = s.Close(cctx)
		})
		return s.(*session)
	}

	specA := spec("cs_a", "claude-mock-1", messages.PostureDefault)
	recA := newRecorder()
	a := open(specA, recA)
	specB := spec("cs_b", "claude-sonnet-mock-2", messages.PostureAcceptEdits)
	require.Eventually(t, func() bool { return tr.WarmIdle(specB) == 1 }, 3*time.Minute, 50*time.Millisecond,
		"the start refilled the pool for its key (model and posture are not part of it)")
	pooled := proctest.WarmGroups(t, kit.Dir)
	require.Len(t, pooled, 1, "the pooled process is recorded for the boot sweep")
	// ready once it has stopped working on its own after initialize (the
	// watch gives up at warmpool.SettleMax; the deadline only stops a hang)
	require.Eventually(t, func() bool { return tr.WarmReady() == 1 }, 3*time.Minute, 50*time.Millisecond, "the pooled process settled")

	recB := newRecorder()
	b := open(specB, recB)
	b.Lock()
	pgid := b.Proc.Pgid
	b.Unlock()
	assert.Contains(t, pooled, pgid, "the start adopted the pooled process")
	startedA, _ := recA.wait(t, time.Minute, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted })
	startedB, _ := recB.wait(t, time.Minute, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted })
	assert.Regexp(t, `^[0-9a-f-]{36}$`, startedB.ev.ExternalSessionID)
	assert.NotEqual(t, startedA.ev.ExternalSessionID, startedB.ev.ExternalSessionID)
	assert.Equal(t, "claude-sonnet-mock-2", startedB.ev.Model)

	ctx := ctxFor(t, 3*time.Minute)
	require.NoError(t, b.StartTurn(ctx, 1, "which model?"))
	end := recB.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(recB.all()))
	assert.Equal(t, "PONG(model=claude-sonnet-mock-2): which model?", end.Text, "set_model reached the adopted process")
	assert.Contains(t, string(mock.MainRequests()[0].Body), startedB.ev.ExternalSessionID, "the model sees the session id EvStarted reported")
	target := filepath.Join(cwd, "accepted.txt")
	require.NoError(t, b.StartTurn(ctx, 2, "TOOL:WRITE "+target+" auto-accepted"))
	require.Equal(t, messages.TurnCompleted, recB.turnEnd(t, 2).State, dump(recB.all()))
	assert.Empty(t, recB.ofType(2, messages.EvClarification), "acceptEdits was set by set_permission_mode: the write was not asked")
	assert.FileExists(t, target)

	// A's own turn still runs on its own process and model.
	require.NoError(t, a.StartTurn(ctx, 1, "which model?"))
	assert.Equal(t, "PONG(model=claude-mock-1): which model?", recA.turnEnd(t, 1).Text)

	require.Eventually(t, func() bool { return tr.WarmIdle(specB) == 1 }, 3*time.Minute, 50*time.Millisecond, "the adoption refilled the pool")
	refilled := proctest.WarmGroups(t, kit.Dir)
	require.Len(t, refilled, 2, "the adopted process keeps its pool group's record until it ends; a new one is pooled")
	tr.DrainWarm(kit)
	assert.Equal(t, 0, tr.WarmIdle(specB))
	assert.Equal(t, 0, tr.WarmReady())
	pooltest.Drained(t, refilled, pgid)
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	require.NoError(t, b.Close(cctx))
	assert.Eventually(t, func() bool { return !proctest.GroupAlive(pgid) }, time.Minute, 20*time.Millisecond, "the adopted process ended with its session")
	assert.Empty(t, proctest.WarmGroups(t, kit.Dir), "no record of a pooled or adopted process is left")
}
