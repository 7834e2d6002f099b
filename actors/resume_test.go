package actors

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

func TestResumeAdoptsTheRecord(t *testing.T) {
	cfg := testConfig(t)
	ctx := ctxT(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("turn {{turn}}: {{input}}")}, CostUSD: 0.5}}
	rt := newRuntime(t, cfg, sc)
	st, err := rt.Start(ctx, "owner", messages.Start{Brief: "the task", Cwd: t.TempDir(), TaskTags: []string{"t"}})
	require.NoError(t, err)
	sid := st.SessionID
	readKind(t, rt, "owner", sid)

	_, err = rt.Resume(ctx, "owner", messages.Resume{SessionID: sid})
	assert.Equal(t, messages.CodeAlreadyLive, messages.ErrorCode(err), "a live session cannot be resumed")
	_, err = rt.Resume(ctx, "owner", messages.Resume{SessionID: messages.NewSessionID()})
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err))

	_, err = rt.Stop(ctx, "owner", messages.Stop{SessionID: sid, Outcome: messages.OutcomePartial})
	require.NoError(t, err)
	_, err = rt.Resume(ctx, "intruder", messages.Resume{SessionID: sid})
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err), "another scope cannot see it")

	res, err := rt.Resume(ctx, "owner", messages.Resume{SessionID: sid, Brief: "carry on"})
	require.NoError(t, err)
	assert.Equal(t, sid, res.SessionID)
	r := readKind(t, rt, "owner", sid)
	require.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, 2, r.Turn, "turns continue")
	assert.Contains(t, r.Text, "carry on")
	_, err = rt.Stop(ctx, "owner", messages.Stop{SessionID: sid})
	require.NoError(t, err)

	// the operator takes over with a scope of its own
	_, err = rt.Resume(ctx, "operator", messages.Resume{SessionID: sid, Takeover: true})
	require.NoError(t, err)
	r = readKind(t, rt, "operator", sid)
	assert.Equal(t, 3, r.Turn)
	_, err = rt.Guide(ctx, "owner", messages.Guide{SessionID: sid, Text: "x"})
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err), "the new run's scope owns it now")
	_, err = rt.Stop(ctx, "operator", messages.Stop{SessionID: sid})
	require.NoError(t, err)

	rec, err := rt.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	require.Len(t, rec.Runs, 3)
	assert.Equal(t, []string{"owner", "owner", "operator"}, []string{rec.Runs[0].OwnerScopeID, rec.Runs[1].OwnerScopeID, rec.Runs[2].OwnerScopeID})
	assert.Equal(t, rec.Runs[0].ExternalSessionID, rec.Runs[1].ExternalSessionID, "the backend resumed its own session")
	assert.Equal(t, 3, rec.RoundsElapsed)
	assert.InDelta(t, 1.5, rec.CostUSD, 1e-9)
	assert.Equal(t, "the task", rec.TaskBrief)
	assert.Equal(t, messages.StatusEnded, rec.Status)
	evs, err := rt.Store().ReadEvents(ctx, sid, 0, 0)
	require.NoError(t, err)
	var adopted, released int
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq, "one gapless log across three runs")
		switch e.Event.Type {
		case messages.EvAdopted:
			adopted++
		case messages.EvReleased:
			released++
		}
	}
	assert.Equal(t, 2, adopted)
	assert.Equal(t, 3, released)
	assert.Equal(t, messages.EvReleased, evs[len(evs)-1].Event.Type)
}

func TestResumeAnOrphanAfterARestart(t *testing.T) {
	cfg := testConfig(t)
	ctx := ctxT(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok {{turn}}")}}}
	rt := newRuntime(t, cfg, sc)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)
	before, err := rt.Store().LastSeq(ctx, st.SessionID)
	require.NoError(t, err)
	rt.closed.Store(true) // the process dies
	rt.lease.release()
	t.Cleanup(func() { rt.closed.Store(false) })

	rt2 := newRuntime(t, cfg, sc)
	rec, err := rt2.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	require.Equal(t, messages.StatusOrphaned, rec.Status)
	_, err = rt2.Resume(ctx, "s", messages.Resume{SessionID: st.SessionID})
	require.NoError(t, err)
	r := readKind(t, rt2, "s", st.SessionID)
	assert.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, 2, r.Turn)
	evs, err := rt2.Store().ReadEvents(ctx, st.SessionID, before, 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(evs), 3)
	assert.Equal(t, messages.EvOrphaned, evs[0].Event.Type)
	assert.Equal(t, before+1, evs[0].Seq)
	assert.Equal(t, messages.EvAdopted, evs[1].Event.Type)
	assert.Equal(t, before+2, evs[1].Seq)
}

// TestResumeClosesTheDanglingTurn: a runtime killed in the middle of turn
// 1 leaves turn 1 without a turn_end; the resume closes it with an
// interrupted turn_end that says it was orphaned, and the first turn after
// the resume is turn 2, so every turn number names one turn (on the old
// code the resumed turn was turn 1 again and turn 1 had no end).
func TestResumeClosesTheDanglingTurn(t *testing.T) {
	cfg := testConfig(t)
	ctx := ctxT(t)
	sc := &script.Scenario{
		Turns:    []script.Turn{{Match: "go", Steps: []script.Step{script.Text("working"), script.Delay(time.Hour), script.Text("late")}}},
		Fallback: &script.Turn{Steps: []script.Step{script.Text("ok {{turn}}")}},
	}
	rt := newRuntime(t, cfg, sc)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // turn 1's text is durable
		evs, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
		require.NoError(t, err)
		for _, e := range evs {
			if e.Turn == 1 && e.Event.Type == messages.EvText {
				return true
			}
		}
		return false
	}, time.Minute, 10*time.Millisecond)
	before, err := rt.Store().LastSeq(ctx, st.SessionID)
	require.NoError(t, err)
	rt.closed.Store(true) // the process dies mid-turn
	rt.lease.release()
	t.Cleanup(func() { rt.closed.Store(false) })

	rt2 := newRuntime(t, cfg, sc)
	_, err = rt2.Resume(ctx, "s", messages.Resume{SessionID: st.SessionID, Brief: "again"})
	require.NoError(t, err)
	r := readKind(t, rt2, "s", st.SessionID)
	assert.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, 2, r.Turn, "the first turn after the resume must not reuse the dangling turn's number")
	evs, err := rt2.Store().ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	ends := map[int]int{}
	var orphanEnd *messages.PersistedEvent
	for i, e := range evs {
		if e.Event.Type == messages.EvTurnEnd {
			ends[e.Turn]++
			if e.Turn == 1 {
				orphanEnd = &evs[i]
			}
		}
	}
	assert.Equal(t, map[int]int{1: 1, 2: 1}, ends, "one turn_end per turn")
	require.NotNil(t, orphanEnd, "turn 1 was never closed")
	assert.Greater(t, orphanEnd.Seq, before)
	assert.Equal(t, messages.TurnInterrupted, orphanEnd.Event.State)
	assert.Contains(t, orphanEnd.Event.Text, "orphaned")
	rec, err := rt2.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	assert.Equal(t, 2, rec.RoundsElapsed)
}
