package filestore_test

import (
	"context"
	"fmt"
	"sync"
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

// TestStartAppendThenAnswersInOrder: StartAppendThen reports a session's
// batches in the order they were started, a failed group's and the stale
// ones after it included, even while the applier is behind: a failure is
// never reported before the commit started ahead of it (whose caller
// would otherwise re-read a LastSeq that does not have it yet). A batch
// refused by its checks is reported before the call returns.
func TestStartAppendThenAnswersInOrder(t *testing.T) {
	ctx := context.Background()
	var armed, fired atomic.Bool
	st, err := filestore.Open(t.TempDir(), filestore.WithWALFault(func() error {
		if armed.CompareAndSwap(true, false) {
			fired.Store(true)
			return syscall.EIO
		}
		return nil
	}))
	require.NoError(t, err)
	a, b := storetest.NewRecord(time.Now()), storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, a))
	require.NoError(t, st.Create(ctx, b))

	// b's report holds the applier, so everything after it queues there
	entered, release := make(chan struct{}), make(chan struct{})
	st.StartAppendThen(ctx, b.SessionID, storetest.NewEvents(1, 1), nil, func(err error) {
		assert.NoError(t, err)
		close(entered)
		<-release
	})
	<-entered

	var mu sync.Mutex
	var got []string
	report := func(name string) func(error) {
		return func(err error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%s:%v", name, err == nil))
		}
	}
	st.StartAppendThen(ctx, a.SessionID, storetest.NewEvents(1, 2), nil, report("a1"))
	require.Eventually(t, func() bool { return st.WALCommits() >= 4 }, time.Minute, time.Millisecond, "a1 committed (2 creates, b, a1)")
	armed.Store(true)
	st.StartAppendThen(ctx, a.SessionID, storetest.NewEvents(3, 2), nil, report("a2"))
	st.StartAppendThen(ctx, a.SessionID, storetest.NewEvents(5, 2), nil, report("a3"))
	require.Eventually(t, fired.Load, time.Minute, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // room for a failure reported out of turn (not a verdict: the order is)
	close(release)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 }, time.Minute, time.Millisecond)
	mu.Lock()
	assert.Equal(t, []string{"a1:true", "a2:false", "a3:false"}, got)
	mu.Unlock()

	var refused error
	called := false
	st.StartAppendThen(ctx, a.SessionID, storetest.NewEvents(9, 1), nil, func(err error) { refused, called = err, true })
	require.True(t, called, "a batch refused by its checks is reported at once")
	storetest.RequireCode(t, refused, messages.CodeConflict)
	require.NoError(t, st.Close())
}

// TestStartAppendThenKeepsTheRecordAsStarted: the record a batch carries
// is the store's as it was when StartAppendThen returned, whatever the
// caller does with it while the batch waits for its commit. The store
// copies it when it queues the batch, not on its applier (which answers
// every session's batches: the copy was most of its work per record); a
// copy made at apply time took the caller's later changes and cached a
// record other than the one the WAL holds.
func TestStartAppendThenKeepsTheRecordAsStarted(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	var hold atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	st, err := filestore.Open(home, filestore.WithWALFault(func() error {
		if hold.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil
	}))
	require.NoError(t, err)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	started := rec.Clone()
	started.Status = messages.StatusWaiting
	started.RoundsElapsed = 4
	r := started.Clone()
	hold.Store(true)
	answered := make(chan error, 1)
	st.StartAppendThen(ctx, rec.SessionID, storetest.NewEvents(1, 2), &r, func(err error) { answered <- err })
	select {
	case <-entered:
	case <-time.After(time.Minute): // only stops a hang
		t.Fatal("the batch's group was never written")
	}
	// the caller reuses its record while the batch waits for its commit
	r.RoundsElapsed = 99
	r.TaskTags[0] = "changed"
	r.Runs[0].OwnerScopeID = "changed"
	close(release)
	require.NoError(t, <-answered)
	got, err := st.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, storetest.NormalizeRecord(started), storetest.NormalizeRecord(got))
	require.NoError(t, st.Close())
	again, err := open(t, home).GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, storetest.NormalizeRecord(started), storetest.NormalizeRecord(again))
}
