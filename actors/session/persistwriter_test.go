package session

import (
	"context"
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
// in the inner store once the gate says nil.
type gatedPipeliner struct {
	store.Store
	gates []chan error
}

func (g *gatedPipeliner) StartAppend(ctx context.Context, sid string, evs []messages.PersistedEvent, rec *messages.SessionRecord) func() error {
	gate := make(chan error, 1)
	g.gates = append(g.gates, gate)
	return func() error {
		if err := <-gate; err != nil {
			return err
		}
		if rec != nil {
			return g.Store.AppendRecord(ctx, sid, evs, *rec)
		}
		return g.Store.Append(ctx, sid, evs)
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
	p1, ok := w.start(g, persistReq{events: storetest.NewEvents(1, 2), meta: &idle})
	require.True(t, ok)
	p2, ok := w.start(g, persistReq{events: storetest.NewEvents(1, 4)}) // 1 and 2 already started
	require.True(t, ok, "the next batch starts while the first is in flight")
	require.Len(t, g.gates, 2)
	_, ok = w.start(g, persistReq{events: storetest.NewEvents(6, 1)})
	assert.False(t, ok, "a batch that does not follow the last one started goes through write")

	g.gates[0] <- nil
	a1 := w.finish(p1)
	require.NoError(t, a1.err)
	assert.EqualValues(t, 2, a1.upTo)
	assert.False(t, a1.metaFailed)
	g.gates[1] <- messages.Errorf(messages.CodeUnavailable, store.OpAppend, "disk full")
	a2 := w.finish(p2)
	require.Error(t, a2.err)

	_, ok = w.start(g, persistReq{events: storetest.NewEvents(3, 2)})
	assert.False(t, ok, "after a failure the writer re-reads LastSeq first")
	a3 := w.write(persistReq{events: storetest.NewEvents(3, 2)})
	require.NoError(t, a3.err)
	assert.EqualValues(t, 4, a3.upTo)
	evs, err := g.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 4)), storetest.NormalizeEvents(evs))
}
