package session

import (
	"context"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// The tests in this file hold a session's first two appends in flight at
// once (persistDepth 2: the turn's last batch starts while the batch before
// it is still being synced) and fail them the ways a store really fails.
// Each ends the same way: every event in the store once, in order; the
// latest record in the store; the turn read.

// twoInFlight starts a session on g and returns the gates of its first two
// pipelined appends, the second started while the first is unanswered (a
// session that keeps one request in flight never starts it, and the test
// fails there), and stop, which reads the first turn and stops the session.
func twoInFlight(t *testing.T, g *gatedPipeliner, onChild ...func(persistReq)) (first, second chan error, toChild *childRequests, stop func()) {
	t.Helper()
	e, pid, toChild := directSession(t, g, onChild...)
	first = g.gateN(t, 0)
	second = g.gateN(t, 1)
	g.openFrom(2) // the batches after these two land at once
	return first, second, toChild, func() {
		readsTurnOne(t, e, pid)
		<-e.Poison(pid).Done()
	}
}

// readsTurnOne reads the first turn's result through the session.
func readsTurnOne(t *testing.T, e *actor.Engine, pid *actor.PID) {
	t.Helper()
	reply := make(chan Result[messages.TurnResult], 1)
	e.Send(pid, OpReadTurn{Token: 1, Op: messages.ReadTurn{SessionID: testSessionID}, Reply: reply})
	select {
	case r := <-reply:
		require.NoError(t, r.Err)
		assert.Equal(t, 1, r.Val.Turn)
		assert.Equal(t, "ok", r.Val.Text)
	case <-time.After(time.Minute):
		t.Fatal("read-turn was not answered")
	}
}

// requireIdleRecord waits for the store's record to say the turn ended.
func requireIdleRecord(t *testing.T, st store.Store) {
	t.Helper()
	require.Eventually(t, func() bool {
		rec, err := st.GetMeta(context.Background(), testSessionID)
		require.NoError(t, err)
		return rec.Status == messages.StatusIdle
	}, time.Minute, 5*time.Millisecond, "the latest record reaches the store")
}

// TestTwoAppendsInFlightFailTogether: the first of two appends in flight
// fails and the store fails the second with it (store.Pipeliner's
// contract: nothing after a gap is written), whether or not their bytes
// landed. The session retries once for both, through its persist child,
// which re-reads LastSeq and writes only what is missing: from the first
// event not acknowledged, every event once, and the record that rode with
// the failed batches.
func TestTwoAppendsInFlightFailTogether(t *testing.T) {
	unavailable := messages.Errorf(messages.CodeUnavailable, store.OpAppend, "disk full")
	for _, tc := range []struct {
		name          string
		first, second error
	}{
		{"the first fails, the second is refused after the gap", unavailable, nil},
		{"the first lands but fails, the second fails", landThenFail{unavailable}, unavailable},
		{"both land but fail", landThenFail{unavailable}, landThenFail{unavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gatedPipeliner{Store: store.NewMemory()}
			first, second, toChild, stop := twoInFlight(t, g)
			first <- tc.first
			second <- tc.second
			waitTurnEnd(t, g)
			requireIdleRecord(t, g)
			require.Eventually(t, func() bool { return toChild.count() >= 2 }, time.Minute, time.Millisecond,
				"the create, then the retry through the child")
			seqs := toChild.firstSeqs()
			assert.EqualValues(t, 1, seqs[1], "the retry starts from the first event not acknowledged")
			stop()
		})
	}
}

// TestSecondAppendCarriesWhatSomeoneWaitsOn: the append that starts
// beside one in flight is the turn's end, with the streamed output that
// waited for it; streamed output alone never takes the second slot.
func TestSecondAppendCarriesWhatSomeoneWaitsOn(t *testing.T) {
	g := &gatedPipeliner{Store: store.NewMemory()}
	first, second, _, stop := twoInFlight(t, g)
	g.mu.Lock()
	batch := g.batches[1]
	g.mu.Unlock()
	assert.Contains(t, eventTypes(batch), messages.EvTurnEnd)
	assert.Contains(t, eventTypes(batch), messages.EvText, "the turn's text waited for its end")
	first <- nil
	second <- nil
	waitTurnEnd(t, g)
	stop()
}

// TestStorePanicsWithAnAppendInFlight: the store panics in the session's
// second StartAppendThen (after queueing its batch) while the first is in
// flight. The panicked request goes to the persist child, which waits for
// the first's ack and then writes after a fresh LastSeq; the store's late
// report of the batch it queued before panicking is no second ack.
func TestStorePanicsWithAnAppendInFlight(t *testing.T) {
	g := &gatedPipeliner{Store: store.NewMemory(), panicAt: 2}
	first, panicked, toChild, stop := twoInFlight(t, g)
	require.Eventually(t, func() bool { return toChild.count() >= 2 }, time.Minute, time.Millisecond,
		"the panicked request goes to the child")
	first <- nil
	panicked <- nil // lands, or is refused if the child wrote its events first: no ack either way
	waitTurnEnd(t, g)
	requireIdleRecord(t, g)
	stop()
}

// TestPersistChildFailsWithAnAppendInFlight: the persist child itself
// fails (here on the request the store panicked on) while an append the
// session started is still in flight on the old path, and stays held: the
// old child's stop waits for it, so the restart comes once that stop is
// given up (the shutdown timeout, 5 s here). The session renews the path,
// sends again everything not acknowledged, the record that rode with the
// lost requests included, through a fresh writer (LastSeq re-read), and
// ignores the old path's late ack by its id.
func TestPersistChildFailsWithAnAppendInFlight(t *testing.T) {
	g := &gatedPipeliner{Store: store.NewMemory(), panicAt: 2}
	failOnce := make(chan struct{}, 1)
	failOnce <- struct{}{}
	first, panicked, _, stop := twoInFlight(t, g, func(req persistReq) {
		if req.create == nil {
			select {
			case <-failOnce:
				panic("the persist child broke")
			default:
			}
		}
	})
	require.Eventually(t, func() bool {
		last, err := g.LastSeq(context.Background(), testSessionID)
		require.NoError(t, err)
		return last > 0
	}, time.Minute, time.Millisecond, "the restarted child writes while the old path's first batch is held")
	first <- nil    // the old path's batch: refused (its events landed), its ack ignored
	panicked <- nil // the same
	waitTurnEnd(t, g)
	requireIdleRecord(t, g)
	stop()
}
