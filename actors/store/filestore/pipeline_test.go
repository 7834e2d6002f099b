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
	var fail atomic.Int32
	st, err := filestore.Open(home, filestore.WithWALFault(func() error {
		if fail.Add(-1) >= 0 {
			return syscall.EIO
		}
		return nil
	}))
	require.NoError(t, err)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, 2)))
	fail.Store(1)
	w2 := st.StartAppend(ctx, rec.SessionID, storetest.NewEvents(3, 2), nil)
	w3 := st.StartAppend(ctx, rec.SessionID, storetest.NewEvents(5, 2), nil)
	w4 := st.StartAppend(ctx, rec.SessionID, storetest.NewEvents(7, 2), nil)
	require.Error(t, w2(), "the batch of the failed group")
	assert.Error(t, w3(), "started after the failed one")
	assert.Error(t, w4(), "started after the failed one")
	last, err := st.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	require.EqualValues(t, 2, last, "nothing after the gap")
	require.NoError(t, st.StartAppend(ctx, rec.SessionID, storetest.NewEvents(3, 6), nil)())
	require.NoError(t, st.Close())
	st2 := open(t, home)
	evs, err := st2.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 8)), storetest.NormalizeEvents(evs))
}
