package filestore_test

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

// TestStartAppendPipelines: one session starts many batches without
// waiting for the previous ones; they commit in order and every one is
// in the log once, in order, after a reopen.
func TestStartAppendPipelines(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st, err := filestore.Open(home)
	require.NoError(t, err)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	var waits []func() error
	for i := range 50 {
		r := rec
		r.Status = messages.StatusRunning
		var meta *messages.SessionRecord
		if i%5 == 0 {
			meta = &r
		}
		waits = append(waits, st.StartAppend(ctx, rec.SessionID, storetest.NewEvents(uint64(2*i)+1, 2), meta))
	}
	for i, w := range waits {
		require.NoError(t, w(), "batch %d", i)
	}
	last, err := st.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	require.EqualValues(t, 100, last)
	storetest.RequireCode(t, st.StartAppend(ctx, rec.SessionID, storetest.NewEvents(100, 1), nil)(), messages.CodeConflict)
	require.NoError(t, st.Close())
	st2 := open(t, home)
	evs, err := st2.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 100)), storetest.NormalizeEvents(evs))
}

// TestStartAppendFailureLeavesNoGap: when a group fails, every batch of
// the session started after the failed one fails as well (stale, or
// refused as not following the tail), so nothing after the gap is
// written; the writer rereads LastSeq and carries on gaplessly.
func TestStartAppendFailureLeavesNoGap(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	var armed atomic.Bool
	var st *filestore.Store
	var sid string
	var w3, w4 func() error
	st, err := filestore.Open(home, filestore.WithWALFault(func() error {
		if !armed.CompareAndSwap(true, false) {
			return nil
		}
		// queued while the failing group is written: they go in the next
		w3 = st.StartAppend(ctx, sid, storetest.NewEvents(5, 2), nil)
		w4 = st.StartAppend(ctx, sid, storetest.NewEvents(7, 2), nil)
		return syscall.EIO
	}))
	require.NoError(t, err)
	rec := storetest.NewRecord(time.Now())
	sid = rec.SessionID
	require.NoError(t, st.Create(ctx, rec))
	require.NoError(t, st.Append(ctx, sid, storetest.NewEvents(1, 2)))
	armed.Store(true)
	w2 := st.StartAppend(ctx, sid, storetest.NewEvents(3, 2), nil)
	require.Error(t, w2(), "the batch of the failed group")
	require.NotNil(t, w3)
	assert.Error(t, w3(), "queued behind the failed one")
	assert.Error(t, w4(), "queued behind the failed one")
	last, err := st.LastSeq(ctx, sid)
	require.NoError(t, err)
	require.EqualValues(t, 2, last, "nothing after the gap")
	require.NoError(t, st.StartAppend(ctx, sid, storetest.NewEvents(3, 6), nil)())
	require.NoError(t, st.Close())
	st2 := open(t, home)
	evs, err := st2.ReadEvents(ctx, sid, 0, 0)
	require.NoError(t, err)
	require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 8)), storetest.NormalizeEvents(evs))
}
