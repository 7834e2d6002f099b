package session

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

// ackCollector spawns an actor that hands every persistAck it gets to the
// returned channel, in arrival order.
func ackCollector(t *testing.T, e *actor.Engine) (*actor.PID, chan persistAck) {
	t.Helper()
	acks := make(chan persistAck, 64)
	pid := e.SpawnFunc(func(c *actor.Context) {
		if a, ok := c.Message().(persistAck); ok {
			acks <- a
		}
	}, "collector")
	return pid, acks
}

func nextAck(t *testing.T, acks chan persistAck) persistAck {
	t.Helper()
	select {
	case a := <-acks:
		return a
	case <-time.After(time.Minute):
		t.Fatal("no ack")
		return persistAck{}
	}
}

// TestAckQueueSendsInRequestOrder: the store may report a session's
// appends from any goroutine and in any order; the acks still go out in
// request order, each once its append is both started and reported.
func TestAckQueueSendsInRequestOrder(t *testing.T) {
	e, err := actor.NewEngine(actor.NewEngineConfig())
	require.NoError(t, err)
	parent, acks := ackCollector(t, e)
	w := &persistWriter{sessionID: "s", synced: true}
	q := &ackQueue{w: w, parent: parent}
	a1, a2, a3 := q.add(e, 1), q.add(e, 2), q.add(e, 3)
	q.started(a1, pendingAppend{end: 2})
	q.started(a2, pendingAppend{end: 4})
	q.complete(a3, nil) // reported before it was started: held
	q.started(a3, pendingAppend{end: 6})
	q.complete(a2, nil)
	q.mu.Lock()
	assert.Len(t, q.q, 3, "nothing is sent while the first is unreported")
	q.mu.Unlock()
	q.complete(a1, nil)
	for i, want := range []uint64{2, 4, 6} {
		a := nextAck(t, acks)
		assert.EqualValues(t, i+1, a.id)
		assert.Equal(t, want, a.upTo)
		require.NoError(t, a.err)
	}
	q.wait() // returns: every ack is sent
}

// TestPersisterAcksFromTheStore: on a Pipeliner the persister starts
// each request at once and acks it from the store's report (no goroutine
// of its own waits): in request order, a failure reported as one (and the
// batch after it refused by the store with it), and the next request, which
// no longer follows the last one started, goes through write after a
// fresh LastSeq and lands.
func TestPersisterAcksFromTheStore(t *testing.T) {
	ctx := context.Background()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	require.NoError(t, err)
	parent, acks := ackCollector(t, e)
	g := &gatedPipeliner{Store: store.NewMemory()}
	rec := storetest.NewRecord(time.Now())
	pid := e.Spawn(newPersister(g, rec.SessionID, parent, nil), "persist")
	e.Send(pid, persistReq{id: 1, create: &rec})
	require.NoError(t, nextAck(t, acks).createErr)

	e.Send(pid, persistReq{id: 2, events: storetest.NewEvents(1, 2)})
	e.Send(pid, persistReq{id: 3, events: storetest.NewEvents(1, 4)})
	e.Send(pid, persistReq{id: 4, events: storetest.NewEvents(1, 6)})
	g.gateN(t, 2) // all three in flight at once
	g.gateN(t, 1) <- messages.Errorf(messages.CodeUnavailable, store.OpAppend, "disk full")
	g.gateN(t, 2) <- nil // the memory store refuses 5-6 after the gap: conflict
	g.gateN(t, 0) <- nil
	a := nextAck(t, acks)
	assert.EqualValues(t, 2, a.id)
	require.NoError(t, a.err)
	assert.EqualValues(t, 2, a.upTo)
	a = nextAck(t, acks)
	assert.EqualValues(t, 3, a.id)
	storetest.RequireCode(t, a.err, messages.CodeUnavailable)
	a = nextAck(t, acks)
	assert.EqualValues(t, 4, a.id)
	require.Error(t, a.err)

	e.Send(pid, persistReq{id: 5, events: storetest.NewEvents(1, 6)})
	a = nextAck(t, acks)
	assert.EqualValues(t, 5, a.id)
	require.NoError(t, a.err)
	assert.EqualValues(t, 6, a.upTo)
	evs, err := g.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 6)), storetest.NormalizeEvents(evs))
	<-e.Poison(pid).Done()
}

// TestPersisterStorePanicsWithAppendsInFlight: a store that panics in
// StartAppendThen after queueing the batch, with an earlier append still in
// flight: the earlier one is acked first, the panicked request goes
// through write (a fresh LastSeq) and is acked once, and the store's late
// report of the batch it queued before panicking sends no second ack.
func TestPersisterStorePanicsWithAppendsInFlight(t *testing.T) {
	ctx := context.Background()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	require.NoError(t, err)
	parent, acks := ackCollector(t, e)
	g := &gatedPipeliner{Store: store.NewMemory(), panicAt: 2}
	rec := storetest.NewRecord(time.Now())
	pid := e.Spawn(newPersister(g, rec.SessionID, parent, nil), "persist")
	e.Send(pid, persistReq{id: 1, create: &rec})
	require.NoError(t, nextAck(t, acks).createErr)

	e.Send(pid, persistReq{id: 2, events: storetest.NewEvents(1, 2)})
	e.Send(pid, persistReq{id: 3, events: storetest.NewEvents(1, 4)}) // panics
	g.gateN(t, 1)
	g.gateN(t, 0) <- nil
	a := nextAck(t, acks)
	assert.EqualValues(t, 2, a.id)
	require.NoError(t, a.err)
	a = nextAck(t, acks)
	assert.EqualValues(t, 3, a.id)
	require.NoError(t, a.err, "written again through write")
	assert.EqualValues(t, 4, a.upTo)

	g.gateN(t, 1) <- nil // the batch queued before the panic: refused now (3 and 4 landed)
	e.Send(pid, persistReq{id: 4, events: storetest.NewEvents(5, 1)})
	g.gateN(t, 2) <- nil // pipelined again
	a = nextAck(t, acks)
	assert.EqualValues(t, 4, a.id, "no second ack for request 3")
	require.NoError(t, a.err)
	assert.EqualValues(t, 5, a.upTo)
	evs, err := g.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 5)), storetest.NormalizeEvents(evs))
	<-e.Poison(pid).Done()
}

// TestStoppedPersisterAnswersInFlightFirst: a persister stopped with a
// pipelined append in flight finishes stopping only once that append is
// reported and acked (the record it carries lands before whoever stopped
// the session writes the next one).
func TestStoppedPersisterAnswersInFlightFirst(t *testing.T) {
	e, err := actor.NewEngine(actor.NewEngineConfig())
	require.NoError(t, err)
	parent, acks := ackCollector(t, e)
	g := &gatedPipeliner{Store: store.NewMemory()}
	rec := storetest.NewRecord(time.Now())
	var reported atomic.Int64
	pid := e.Spawn(newPersister(g, rec.SessionID, parent, func(time.Duration, error) { reported.Add(1) }), "persist")
	e.Send(pid, persistReq{id: 1, create: &rec})
	require.NoError(t, nextAck(t, acks).createErr)
	idle := rec.Clone()
	idle.Status = messages.StatusIdle
	e.Send(pid, persistReq{id: 2, events: storetest.NewEvents(1, 2), meta: &idle})
	gate := g.gateN(t, 0)
	stopped := e.Poison(pid)
	go func() {
		time.Sleep(100 * time.Millisecond) // the stop is under way by then (if it did not wait)
		gate <- nil
	}()
	<-stopped.Done()
	assert.EqualValues(t, 1, reported.Load(), "the stop waited for the append in flight")
	a := nextAck(t, acks)
	assert.EqualValues(t, 2, a.id)
	require.NoError(t, a.err)
	assert.False(t, a.metaFailed)
}
