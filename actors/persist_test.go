package actors

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// requireWholeLog checks a released session's log: gapless from seq 1, each
// seq once, `released` last with the given reason.
func requireWholeLog(t *testing.T, st store.Store, sid string, reason messages.ReleaseReason) []messages.PersistedEvent {
	t.Helper()
	evs, err := st.ReadEvents(context.Background(), sid, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq, "gapless, no seq reused")
	}
	last := evs[len(evs)-1].Event
	require.Equal(t, messages.EvReleased, last.Type)
	require.Equal(t, reason, last.ReleaseReason)
	for _, e := range evs[:len(evs)-1] {
		require.NotEqual(t, messages.EvReleased, e.Event.Type, "released only once, last")
	}
	return evs
}

// driveTwoTurns runs a session through two turns and a stop, returning its
// id and the acknowledged events the live seam saw.
func driveTwoTurns(t *testing.T, rt *Runtime, arm func()) string {
	t.Helper()
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, readKind(t, rt, "s", st.SessionID).Kind)
	arm()
	_, err = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "again"})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, readKind(t, rt, "s", st.SessionID).Kind)
	stop, err := rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	require.False(t, stop.AlreadyStopped)
	return st.SessionID
}

// seen collects what the live seam (the SSE feed's source) saw.
type seen struct {
	n    atomic.Int64
	last atomic.Uint64
}

func (s *seen) listener(string, messages.PersistedEvent) { s.n.Add(1) }

// TestStorePanicOnceLosesNothing: a store that panics inside Append once
// (the persist child's restart used to drop its held events and then be
// refused by the gap check forever).
func TestStorePanicOnceLosesNothing(t *testing.T) {
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("a"), script.Text("b"), script.Text("ok")}}}
	var sn seen
	rt := newRuntime(t, testConfig(t), sc, WithStore(faulty), WithEventListener(sn.listener))
	sid := driveTwoTurns(t, rt, func() { faulty.PanicAppends(1) })
	evs := requireWholeLog(t, faulty.Inner(), sid, messages.ReleaseExplicit)
	assert.Equal(t, int64(len(evs)), sn.n.Load(), "the feed saw exactly the stored events")
}

// TestUnknownOutcomeAppendDoesNotConflictForever: writes that land but
// report failure; the retry re-reads LastSeq instead of conflicting forever.
func TestUnknownOutcomeAppendDoesNotConflictForever(t *testing.T) {
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("a"), script.Text("ok")}}}
	rt := newRuntime(t, testConfig(t), sc, WithStore(faulty))
	sid := driveTwoTurns(t, rt, func() { faulty.LandThenFail(2) })
	requireWholeLog(t, faulty.Inner(), sid, messages.ReleaseExplicit)
}

// TestPartialWriteLosesNothing: a short write (half the batch landed).
func TestPartialWriteLosesNothing(t *testing.T) {
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("a"), script.Text("b"), script.Text("ok")}}}
	rt := newRuntime(t, testConfig(t), sc, WithStore(faulty))
	sid := driveTwoTurns(t, rt, func() { faulty.PartialAppends(3) })
	requireWholeLog(t, faulty.Inner(), sid, messages.ReleaseExplicit)
}

// TestOutageHoldsEverything: 100,000 events are produced while the store
// refuses every write. The session stops reading its backend (backpressure)
// instead of dropping anything, and when the store returns every event is
// written, in order.
func TestOutageHoldsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 events")
	}
	n := 100_000
	if v := os.Getenv("OUTAGE_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	steps := make([]script.Step, n)
	for i := range steps {
		steps[i] = script.Text("x")
	}
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{script.Text("ready")}}, {Steps: steps}}}
	var produced atomic.Int64
	rt := newRuntime(t, testConfig(t), sc, WithStore(faulty), WithPersistLimits(2048, 1<<30),
		WithEventListener(func(string, messages.PersistedEvent) { produced.Add(1) }))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)

	var outage atomic.Bool
	outage.Store(true)
	faulty.SetFailure(func(op, _ string) error {
		if outage.Load() && (op == store.OpAppend || op == store.OpPutMeta) {
			return store.ErrNoSpace(op, "")
		}
		return nil
	})
	guided := make(chan error, 1)
	go func() {
		// accepted, but its ok is an acknowledgement: it waits for the store
		_, err := rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "flood"})
		guided <- err
	}()
	time.Sleep(2 * time.Second) // the backend runs into the backpressure
	select {
	case err := <-guided:
		t.Fatalf("guide answered before its events were durable: %v", err)
	default:
	}
	seenDuring := produced.Load()
	outage.Store(false)

	r, err := rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: st.SessionID})
	for messages.IsCode(err, messages.CodeUnavailable) {
		time.Sleep(50 * time.Millisecond)
		r, err = rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: st.SessionID})
	}
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind)
	require.NoError(t, <-guided, "answered once the store took its events")
	_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	evs := requireWholeLog(t, faulty.Inner(), st.SessionID, messages.ReleaseExplicit)
	texts := 0
	for _, e := range evs {
		if e.Event.Type == messages.EvText && e.Event.Text == "x" {
			texts++
		}
	}
	// each text step is one or more events, the same number for every step
	require.GreaterOrEqual(t, texts, n, "every event of the flood is in the log")
	assert.Zero(t, texts%n, "every event of the flood is in the log, none twice")
	assert.Less(t, seenDuring, int64(100), "nothing reached the feed while the store was down")
}

// TestSlowStoreNeverLeavesALiveRecord: store calls far slower than every
// deadline (the 10,000-session bench's final record writes timed out and
// left `idle` records after a successful stop).
func TestSlowStoreNeverLeavesALiveRecord(t *testing.T) {
	cfg := testConfig(t)
	cfg.Supervision.ShutdownTimeout = 100 * 1e6 // 100ms
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, cfg, sc, WithStore(faulty))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)
	faulty.SetFailure(func(op, _ string) error {
		if op == store.OpAppend || op == store.OpPutMeta {
			time.Sleep(400 * time.Millisecond) // 4x the shutdown timeout, per call
		}
		return nil
	})
	stop, err := rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	require.False(t, stop.AlreadyStopped)
	faulty.SetFailure(nil)
	rec, err := faulty.Inner().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, rec.Status, "stop answered: the final record is written")
	requireWholeLog(t, faulty.Inner(), st.SessionID, messages.ReleaseExplicit)
}

// TestFailingStoreIsUnavailableThenFailed: a full disk that stays full.
// Ops say unavailable (naming the cause); the session gives up; once the
// disk has room the record ends failed with reason store, and everything
// the session held is in the log.
func TestFailingStoreIsUnavailableThenFailed(t *testing.T) {
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, testConfig(t), sc, WithStore(faulty), WithPersistLimits(0, 3))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)
	faulty.NoSpace(1 << 30)
	guided := make(chan error, 1)
	go func() { // its events cannot be stored: its answer waits
		_, err := rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "more"})
		guided <- err
	}()
	var gerr error
	require.Eventually(t, func() bool {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, gerr = rt.ReadTurn(short, "s", messages.ReadTurn{SessionID: st.SessionID})
		return messages.IsCode(gerr, messages.CodeUnavailable) || messages.IsCode(gerr, messages.CodeNotLive)
	}, time.Minute, 20*time.Millisecond)
	if messages.IsCode(gerr, messages.CodeUnavailable) {
		assert.Contains(t, gerr.Error(), "no space left on device")
	}
	rec, err := faulty.Inner().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	assert.True(t, rec.Status.Live(), "nothing final is claimed while the store refuses")
	faulty.NoSpace(0)
	require.Eventually(t, func() bool {
		rec, err := faulty.Inner().GetMeta(ctx, st.SessionID)
		return err == nil && rec.Status == messages.StatusFailed
	}, time.Minute, 20*time.Millisecond)
	require.NoError(t, <-guided, "the guide's events are durable now")
	evs := requireWholeLog(t, faulty.Inner(), st.SessionID, messages.ReleaseStore)
	var inLog bool
	for _, e := range evs {
		inLog = inLog || (e.Event.Type == messages.EvGuidance && e.Event.Text == "more")
	}
	assert.True(t, inLog, "what was accepted while the disk was full is in the log")
}

// TestCloseNeverClosesTheStoreUnderASession: Close with a context that ends
// before a slow session is gone leaves the store open; a second Close waits
// for the one shutdown.
func TestCloseNeverClosesTheStoreUnderASession(t *testing.T) {
	cfg := testConfig(t)
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, cfg, sc, WithStore(faulty))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)
	var closedUnder atomic.Bool
	var inWrite atomic.Int32
	faulty.SetFailure(func(op, _ string) error {
		switch op {
		case store.OpAppend, store.OpPutMeta:
			inWrite.Add(1)
			time.Sleep(300 * time.Millisecond)
			inWrite.Add(-1)
		case store.OpClose:
			if inWrite.Load() > 0 {
				closedUnder.Store(true)
			}
		}
		return nil
	})
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = rt.Close(short)
	require.True(t, messages.IsCode(err, messages.CodeTimeout), "%v", err)
	_, err = faulty.Inner().LastSeq(context.Background(), st.SessionID)
	require.NoError(t, err, "the store is still open while the session stops")
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- rt.Close(context.Background()) }()
	}
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	assert.False(t, closedUnder.Load(), "the store was never closed under a write")
	rec, err := faulty.Inner().GetMeta(context.Background(), st.SessionID)
	if err == nil {
		assert.Equal(t, messages.StatusOrphaned, rec.Status)
	}
}

// callCounter counts the store's write calls.
type callCounter struct {
	store.Store
	appends, appendRecords, putMetas atomic.Int64
}

func (c *callCounter) Append(ctx context.Context, sid string, evs []messages.PersistedEvent) error {
	c.appends.Add(1)
	return c.Store.Append(ctx, sid, evs)
}

func (c *callCounter) AppendRecord(ctx context.Context, sid string, evs []messages.PersistedEvent, rec messages.SessionRecord) error {
	c.appendRecords.Add(1)
	return c.Store.AppendRecord(ctx, sid, evs, rec)
}

func (c *callCounter) PutMeta(ctx context.Context, rec messages.SessionRecord) error {
	c.putMetas.Add(1)
	return c.Store.PutMeta(ctx, rec)
}

// TestRecordRidesWithItsEvents: record changes go to the store in the same
// call as the events written with them (one durable write, not an append
// and then a PutMeta), and the stored record is the session's last.
func TestRecordRidesWithItsEvents(t *testing.T) {
	cc := &callCounter{Store: store.NewMemory()}
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, testConfig(t), sc, WithStore(cc))
	sid := driveTwoTurns(t, rt, func() {})
	requireWholeLog(t, cc.Store, sid, messages.ReleaseExplicit)
	rec, err := cc.Store.GetMeta(context.Background(), sid)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, rec.Status)
	assert.Positive(t, cc.appendRecords.Load(), "records went with events")
	// a record change with no event beside it (the one after create) is
	// the only kind written alone
	assert.Less(t, cc.putMetas.Load(), cc.appendRecords.Load())
}
