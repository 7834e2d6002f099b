package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

// writeLog records the store's write calls, in order.
type writeLog struct {
	store.Store
	calls []string
}

func (w *writeLog) Append(ctx context.Context, sid string, evs []messages.PersistedEvent) error {
	w.calls = append(w.calls, "Append")
	return w.Store.Append(ctx, sid, evs)
}

func (w *writeLog) AppendRecord(ctx context.Context, sid string, evs []messages.PersistedEvent, rec messages.SessionRecord) error {
	w.calls = append(w.calls, "AppendRecord")
	return w.Store.AppendRecord(ctx, sid, evs, rec)
}

func (w *writeLog) PutMeta(ctx context.Context, rec messages.SessionRecord) error {
	w.calls = append(w.calls, "PutMeta")
	return w.Store.PutMeta(ctx, rec)
}

// TestPersistWriterSendsTheRecordWithTheEvents: a request with events and
// a record is one AppendRecord; a record it could not write is reported
// unwritten (metaFailed) with the events, and the retry lands both; an
// adoption's record still follows its events in a call of its own.
func TestPersistWriterSendsTheRecordWithTheEvents(t *testing.T) {
	ctx := context.Background()
	faulty := store.NewFaulty(store.NewMemory())
	log := &writeLog{Store: faulty}
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, log.Create(ctx, rec))
	w := &persistWriter{store: log, sessionID: rec.SessionID}
	w.synced = true

	idle := rec.Clone()
	idle.Status = messages.StatusIdle
	ack := w.write(persistReq{events: storetest.NewEvents(1, 3), meta: &idle})
	require.NoError(t, ack.err)
	assert.Equal(t, uint64(3), ack.upTo)
	assert.False(t, ack.metaFailed)
	assert.Equal(t, []string{"AppendRecord"}, log.calls, "one store call for both")
	got, err := faulty.Inner().GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusIdle, got.Status)

	// the record's write fails: neither lands, both are held for the retry
	log.calls = nil
	faulty.FailMeta(1)
	running := idle.Clone()
	running.Status = messages.StatusRunning
	ack = w.write(persistReq{events: storetest.NewEvents(4, 2), meta: &running})
	require.Error(t, ack.err)
	assert.True(t, ack.metaFailed, "the record is sent again")
	assert.Equal(t, uint64(3), ack.upTo, "the store's own last seq")
	ack = w.write(persistReq{events: storetest.NewEvents(4, 2), meta: &running})
	require.NoError(t, ack.err)
	assert.Equal(t, uint64(5), ack.upTo)
	assert.False(t, ack.metaFailed)
	got, err = faulty.Inner().GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusRunning, got.Status)

	// an adoption: the events first, then the record says running
	log.calls = nil
	adopted := running.Clone()
	ack = w.write(persistReq{adopt: &adopted, events: storetest.NewEvents(6, 1)})
	require.NoError(t, ack.createErr)
	assert.Equal(t, []string{"Append", "PutMeta"}, log.calls)
}

// gatedPipeliner is a store.Pipeliner whose started appends wait for the
// test: each StartAppend takes the next gate, and its wait lands the batch
// in the inner store once the gate says nil. StartAppendThen reports the
// batches from one goroutine of its own, in the order they were started,
// as the file store's applier does.
type gatedPipeliner struct {
	store.Store
	mu    sync.Mutex
	gates []chan error
	// reports carries StartAppendThen's batches to the reporting goroutine
	reports chan func()
	// panicAt, when > 0, makes that StartAppendThen (counting from 1) panic
	// after it queued the batch
	panicAt int
	calls   int
	// batches are StartAppendThen's batches, in the order started
	batches [][]messages.PersistedEvent
	// open: every gate from openAt on lets its batch land at once
	open   bool
	openAt int
}

func (g *gatedPipeliner) StartAppend(ctx context.Context, sid string, evs []messages.PersistedEvent, rec *messages.SessionRecord) func() error {
	gate := g.gate()
	land := func() error {
		if rec != nil {
			return g.Store.AppendRecord(ctx, sid, evs, *rec)
		}
		return g.Store.Append(ctx, sid, evs)
	}
	return func() error {
		if err := <-gate; err != nil {
			var lf landThenFail
			if errors.As(err, &lf) {
				if werr := land(); werr != nil {
					return werr
				}
			}
			return err
		}
		return land()
	}
}

// landThenFail, sent to a gatedPipeliner's gate, lands the batch and then
// reports the error anyway: a write that landed but returned an error.
type landThenFail struct{ error }

func (g *gatedPipeliner) gate() chan error {
	g.mu.Lock()
	defer g.mu.Unlock()
	gate := make(chan error, 1)
	if g.open && len(g.gates) >= g.openAt {
		gate <- nil
	}
	g.gates = append(g.gates, gate)
	return gate
}

// openFrom lets the nth batch (from 0) and every later one land without
// waiting for the test; the gates before n stay the test's to release.
func (g *gatedPipeliner) openFrom(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open, g.openAt = true, n
	for i := n; i < len(g.gates); i++ {
		g.gates[i] <- nil
	}
}

// gateN returns the nth gate made (from 0), waiting for it.
func (g *gatedPipeliner) gateN(t *testing.T, n int) chan error {
	var gate chan error
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.gates) > n {
			gate = g.gates[n]
			return true
		}
		return false
	}, time.Minute, time.Millisecond)
	return gate
}

func (g *gatedPipeliner) StartAppendThen(ctx context.Context, sid string, evs []messages.PersistedEvent, rec *messages.SessionRecord, done func(error)) {
	wait := g.StartAppend(ctx, sid, evs, rec)
	g.mu.Lock()
	g.batches = append(g.batches, evs)
	if g.reports == nil {
		g.reports = make(chan func(), 64)
		go func() {
			for r := range g.reports {
				r()
			}
		}()
	}
	g.calls++
	boom := g.calls == g.panicAt
	g.reports <- func() { done(wait()) }
	g.mu.Unlock()
	if boom {
		panic("the store broke after queueing the batch")
	}
}

// TestPersistWriterPipelines: on a Pipeliner the writer starts a second
// batch while the first is in flight (start never waits), reports each
// durable end in turn, and after a failure refuses to pipeline until write
// has re-read LastSeq.
func TestPersistWriterPipelines(t *testing.T) {
	ctx := context.Background()
	g := &gatedPipeliner{Store: store.NewMemory()}
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, g.Create(ctx, rec))
	w := &persistWriter{store: g, sessionID: rec.SessionID}
	w.synced = true

	idle := rec.Clone()
	idle.Status = messages.StatusIdle
	out1, out2 := make(chan error, 1), make(chan error, 1)
	p1, ok := w.start(g, persistReq{events: storetest.NewEvents(1, 2), meta: &idle}, func(err error) { out1 <- err })
	require.True(t, ok)
	p2, ok := w.start(g, persistReq{events: storetest.NewEvents(1, 4)}, func(err error) { out2 <- err }) // 1 and 2 already started
	require.True(t, ok, "the next batch starts while the first is in flight")
	require.Len(t, g.gates, 2)
	_, ok = w.start(g, persistReq{events: storetest.NewEvents(6, 1)}, func(error) { t.Error("a batch not started was reported") })
	assert.False(t, ok, "a batch that does not follow the last one started goes through write")

	g.gates[0] <- nil
	a1 := w.finish(p1, <-out1)
	require.NoError(t, a1.err)
	assert.EqualValues(t, 2, a1.upTo)
	assert.False(t, a1.metaFailed)
	g.gates[1] <- messages.Errorf(messages.CodeUnavailable, store.OpAppend, "disk full")
	a2 := w.finish(p2, <-out2)
	require.Error(t, a2.err)

	_, ok = w.start(g, persistReq{events: storetest.NewEvents(3, 2)}, func(error) { t.Error("a batch not started was reported") })
	assert.False(t, ok, "after a failure the writer re-reads LastSeq first")
	a3 := w.write(persistReq{events: storetest.NewEvents(3, 2)})
	require.NoError(t, a3.err)
	assert.EqualValues(t, 4, a3.upTo)
	evs, err := g.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 4)), storetest.NormalizeEvents(evs))
}
