package actors

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/native"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// The live driver: a native driver (against modelmock) lists the
// backends, starts a claude-code session (the real pinned CLI, against the
// same modelmock), reads its turn and stops it with a verdict; the session
// is released when the driver ends, its outcome is recorded with the
// driver's verdict, and the code_specialist_* families count the
// delegation.
func TestLiveDriverDrivesClaudeCode(t *testing.T) {
	bin := subprocesstest.Find(t, claudecode.EnvBinary, "npm install @anthropic-ai/claude-code@"+claudecode.PinnedVersion, "claude")
	mock, err := modelmock.Start(t, driverScenario(map[string]any{"backend": claudecode.ID, "agentModel": "claude-mock-1"}))
	require.NoError(t, err)
	cfg := testConfig(t)
	cfg.DefaultBackend = claudecode.ID
	cfg.Env = map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test", "HOME": t.TempDir()}
	reg := prometheus.NewRegistry()
	loop := native.New(native.WithProcessEnv(nil))
	rt, err := New(cfg, WithBackends(transports.NewRegistry(claudecode.New(claudecode.WithBinary(bin)), loop)), WithMetrics(reg), WithDriverLoop(loop))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rt.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a claude boot on a loaded machine
	defer cancel()
	rec, err := rt.Delegate(ctx, driver.Request{Brief: "DRIVE claude-code through the task", Cwd: t.TempDir(),
		Overrides: driver.Overrides{Backend: claudecode.ID}})
	require.NoError(t, err)
	done, err := rt.WaitDelegation(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, driver.StateDone, done.State, "%+v", done)
	assert.Contains(t, done.Report, "REPORT: done")
	require.Len(t, done.Sessions, 1)
	sid := done.Sessions[0]
	assert.Equal(t, messages.OutcomeSuccess, done.Verdicts[sid])

	meta, err := rt.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	assert.Equal(t, claudecode.ID, meta.BackendID)
	assert.Equal(t, messages.StatusEnded, meta.Status)
	assert.Equal(t, messages.OutcomeSuccess, meta.Outcome)
	assert.Equal(t, messages.ReleaseExplicit, lastReleased(t, rt, sid).ReleaseReason)
	evs, err := rt.Store().ReadEvents(ctx, sid, 0, 0)
	require.NoError(t, err)
	sawPong := false
	for _, ev := range evs {
		if ev.Event.Type == messages.EvTurnEnd && strings.Contains(ev.Event.Text, "PONG") {
			sawPong = true
		}
	}
	assert.True(t, sawPong, "claude answered its brief from modelmock")
	live, err := rt.LiveSessions(ctx)
	require.NoError(t, err)
	assert.Empty(t, live, "the driven session is gone with its driver")

	require.Eventually(t, func() bool {
		log := rt.Learning().Outcomes()
		if log.Refresh() != nil {
			return false
		}
		outs, _ := log.All()
		return len(outs) == 1 && outs[0].SessionID == sid && outs[0].Outcome == messages.OutcomeSuccess && outs[0].BackendID == claudecode.ID
	}, time.Minute, 50*time.Millisecond, "one outcome, the driver's verdict")
	assert.Equal(t, 1.0, testutil.ToFloat64(rt.driverMetrics.Dispatched(claudecode.ID)))
	assert.Equal(t, 1.0, testutil.ToFloat64(rt.driverMetrics.Settled(claudecode.ID, driver.StateDone)))
	text := gatherText(t, reg)
	assert.Contains(t, text, `code_specialist_duration_ms_count{backend="claude-code"} 1`)
	assert.Contains(t, text, `code_specialist_rounds_count{backend="claude-code"} 1`)
}
