//go:build unix

package filestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

// The tests here fail an fsync of the store through its seam, go on, then
// crash: the home is rebuilt from what had reached the disk (disk_test.go)
// and reopened by a new Store, without the first one's memory. Every
// append that returned nil must be back, exactly once and in order.

// crashStore opens a store on home whose fsyncs go through d; it is never
// closed (the crash).
func crashStore(t *testing.T, home string, d *disk, opts ...filestore.Option) *filestore.Store {
	t.Helper()
	st, err := filestore.Open(home, append([]filestore.Option{d.option()}, opts...)...)
	require.NoError(t, err)
	// A crashed store is never closed by the test, but a checkpoint it
	// started may still be renaming and creating files in home when the
	// test ends, and t.TempDir's removal then fails ("directory not
	// empty"; 3 runs in 40 of TestFailedCheckpointRetriesAtTheNextThreshold).
	// Closing it after the test (cleanups run last-in first-out, so
	// before the removal) waits for that checkpoint; what it writes then
	// is past every assertion.
	t.Cleanup(func() {
		closed := make(chan struct{})
		go func() { _ = st.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(time.Minute): // only stops a hang
			t.Error("the crashed store did not close within a minute")
		}
	})
	return st
}

// writer appends one event at a time to a session, following the store's
// contract after a failure: re-read LastSeq, then write what is missing.
// acked is the last seq an Append acknowledged.
type writer struct {
	t     *testing.T
	st    *filestore.Store
	sid   string
	acked uint64
	fails int
}

func newWriter(t *testing.T, st *filestore.Store) *writer {
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(context.Background(), rec))
	return &writer{t: t, st: st, sid: rec.SessionID}
}

// next appends the event after the last acknowledged one; it returns the
// Append's error, which must be unavailable when not nil.
func (w *writer) next() error {
	ctx := context.Background()
	last, err := w.st.LastSeq(ctx, w.sid)
	require.NoError(w.t, err)
	require.GreaterOrEqual(w.t, last, w.acked, "LastSeq went below an acknowledged seq")
	err = w.st.Append(ctx, w.sid, storetest.NewEvents(last+1, 1))
	if err != nil {
		storetest.RequireCode(w.t, err, messages.CodeUnavailable)
		w.fails++
		return err
	}
	w.acked = last + 1
	return nil
}

// release ends the writer's record (the store takes appends all the same):
// a liveness change, so the store writes its meta.json.
func (w *writer) release() {
	ctx := context.Background()
	rec, err := w.st.GetMeta(ctx, w.sid)
	require.NoError(w.t, err)
	rec.Status = messages.StatusEnded
	require.NoError(w.t, w.st.PutMeta(ctx, rec))
}

// requireAll checks that st, opened on the crashed home, holds every
// acknowledged event of each writer, gapless, and each record.
func requireAll(t *testing.T, st *filestore.Store, ws ...*writer) {
	t.Helper()
	ctx := context.Background()
	for _, w := range ws {
		_, err := st.GetMeta(ctx, w.sid)
		require.NoError(t, err, "the record of %s survives", w.sid)
		evs, err := st.ReadEvents(ctx, w.sid, 0, 0)
		require.NoError(t, err, "session %s", w.sid)
		require.GreaterOrEqual(t, len(evs), int(w.acked), "session %s: every acknowledged event is back", w.sid)
		require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, len(evs))), storetest.NormalizeEvents(evs),
			"session %s: gapless, each once", w.sid)
	}
}

var errIO = &os.PathError{Op: "fsync", Path: "disk", Err: syscall.EIO}

// TestCrashAfterFailedCheckpoint: a checkpoint's fsync fails, and the
// writeback error drops the session files' pages it was to write. The
// retry at the next threshold must write those files again from the WAL
// before it syncs them and empties the WAL; a retry that only syncs again
// makes the zeros durable and empties the one copy of the events.
func TestCrashAfterFailedCheckpoint(t *testing.T) {
	for _, mode := range []struct {
		name string
		kind string // the fsync that fails
		opts []filestore.Option
	}{
		{"syncfs", filestore.SyncFS, nil},
		{"per-file log", filestore.SyncLog, []filestore.Option{filestore.WithoutSyncFS()}},
		{"per-file meta", filestore.SyncMeta, []filestore.Option{filestore.WithoutSyncFS()}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			home := t.TempDir()
			d := newDisk(t, home)
			st := crashStore(t, home, d, append(mode.opts, filestore.WithCheckpointBytes(4<<10))...)
			failed := false
			d.setFault(func(p filestore.SyncPoint) (error, bool) {
				if p.Kind == mode.kind && !failed {
					failed = true
					return errIO, false
				}
				return nil, false
			})
			a, b := newWriter(t, st), newWriter(t, st)
			if mode.kind == filestore.SyncMeta {
				// a meta.json for the checkpoint to sync: a release
				// writes one (a create does not)
				a.release()
				b.release()
			}
			resetsAtFailure := -1
			for i := 0; ; i++ {
				nextRetried(t, a)
				nextRetried(t, b)
				d.mu.Lock()
				f := failed
				d.mu.Unlock()
				if f && resetsAtFailure < 0 {
					resetsAtFailure = d.count(filestore.SyncWALReset)
				}
				if resetsAtFailure >= 0 && d.count(filestore.SyncWALReset) > resetsAtFailure {
					break // a later checkpoint emptied the WAL
				}
				require.Less(t, i, 2000, "no checkpoint succeeded after the failed one")
			}
			require.NoError(t, a.next())
			requireAll(t, open(t, d.crash()), a, b)
		})
	}
}

// nextRetried appends the next event, again after a refusal: a failed
// syncfs beside the load can drop a WAL commit's pages, and the disk then
// fails that commit's fsync (disk_test.go), which the store refuses.
func nextRetried(t *testing.T, w *writer) {
	t.Helper()
	for range 3 {
		if w.next() == nil {
			return
		}
	}
	require.NoError(t, w.next())
}

// TestCrashAfterWALCommitLandsThenFails: a group commit's write and fsync
// reach the disk but the fsync reports an error. The commit is refused, so
// the frame is cut back off the log: a crash right then does not replay
// it, and the next (shorter) commits land at the committed end with no
// leftover of it after them, so a replay reads each event once and finds
// no torn frame. The second case fails the cut's own fsync too: the next
// commit cuts again first.
func TestCrashAfterWALCommitLandsThenFails(t *testing.T) {
	ctx := context.Background()
	for _, failCut := range []bool{false, true} {
		name := map[bool]string{false: "cut synced", true: "cut fails once"}[failCut]
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			d := newDisk(t, home)
			st := crashStore(t, home, d)
			w := newWriter(t, st)
			for range 5 {
				require.NoError(t, w.next())
			}
			commits, cuts := 0, 0
			d.setFault(func(p filestore.SyncPoint) (error, bool) {
				switch p.Kind {
				case filestore.SyncWALCommit:
					if commits++; commits == 1 {
						return errIO, true
					}
				case filestore.SyncWALCut:
					if cuts++; failCut && cuts == 1 {
						return errIO, false
					}
				}
				return nil, false
			})
			err := st.Append(ctx, w.sid, storetest.NewEvents(6, 3))
			storetest.RequireCode(t, err, messages.CodeUnavailable)
			if !failCut {
				st2 := open(t, d.crash())
				last, err := st2.LastSeq(ctx, w.sid)
				require.NoError(t, err)
				require.EqualValues(t, 5, last, "the refused commit was cut off the log before it was refused")
			}
			for range 5 {
				require.NoError(t, w.next())
			}
			require.EqualValues(t, 10, w.acked)
			home2 := d.crash()
			var logs logBuf
			requireAll(t, open(t, home2, filestore.WithLogger(logs.logger())), w)
			assert.NotContains(t, logs.String(), "torn frame", "nothing of the refused frame is left after the committed ones")
		})
	}
}

// TestCrashAfterNoSpaceThenRecovery: the WAL's fsync fails with ENOSPC for
// three commits, then the disk has room again. Each refused append is
// unavailable, retryable and names the cause; nothing of it is in the log;
// after the crash every acknowledged event is back.
func TestCrashAfterNoSpaceThenRecovery(t *testing.T) {
	home := t.TempDir()
	d := newDisk(t, home)
	st := crashStore(t, home, d)
	w := newWriter(t, st)
	for range 3 {
		require.NoError(t, w.next())
	}
	left := 3
	d.setFault(func(p filestore.SyncPoint) (error, bool) {
		if p.Kind == filestore.SyncWALCommit && left > 0 {
			left--
			return &os.PathError{Op: "fsync", Path: "wal", Err: syscall.ENOSPC}, false
		}
		return nil, false
	})
	for range 3 {
		err := w.next()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no space left on device")
		var e *messages.Error
		require.True(t, errors.As(err, &e))
		assert.True(t, e.Retryable)
		last, err := st.LastSeq(context.Background(), w.sid)
		require.NoError(t, err)
		require.Equal(t, uint64(3), last, "a refused batch is not in the log")
	}
	for range 3 {
		require.NoError(t, w.next())
	}
	requireAll(t, open(t, d.crash()), w)
}

// TestFailedCheckpointRetriesAtTheNextThreshold: a failed checkpoint keeps
// the WAL and is retried once the log has grown by the checkpoint size
// again; after a retry succeeds, checkpoints come at the configured size
// again, not at the size the failure moved the threshold to.
func TestFailedCheckpointRetriesAtTheNextThreshold(t *testing.T) {
	const every = 4 << 10
	home := t.TempDir()
	walPath := filepath.Join(home, "wal", "log")
	d := newDisk(t, home)
	st := crashStore(t, home, d, filestore.WithCheckpointBytes(every))
	var at []int64 // the WAL's committed end at each checkpoint after Open
	d.setFault(func(p filestore.SyncPoint) (error, bool) {
		if p.Kind != filestore.SyncFS {
			return nil, false
		}
		// a checkpoint beside the load (the first and the third) syncs
		// while the writer commits on into log.next: the log, frozen at
		// the cut, is its end. Counting log.next too made the figure
		// depend on how far the writer got during the syncfs, and the
		// test fail on a loaded machine. The retry of a failed one runs
		// on the loop, so no commit moves while it syncs, and its end is
		// both files'.
		end := walEnd(t, walPath)
		if len(at) == 1 {
			end += walNextEnd(t, walPath)
		}
		at = append(at, end)
		if len(at) == 1 {
			return errIO, false
		}
		return nil, false
	})
	w := newWriter(t, st)
	for i := 0; ; i++ {
		nextRetried(t, w)
		d.mu.Lock()
		n := len(at)
		d.mu.Unlock()
		if n == 3 {
			break
		}
		require.Less(t, i, 5000, "three checkpoints never came")
	}
	require.NoError(t, w.next())
	d.mu.Lock()
	defer d.mu.Unlock()
	assert.GreaterOrEqual(t, at[0], int64(every), "the first checkpoint at the size")
	assert.GreaterOrEqual(t, at[1], at[0]+every, "the retry once the log grew by the size again (the WAL kept everything)")
	assert.Less(t, at[1], at[0]+2*every, "the retry at the next threshold, not later")
	assert.Less(t, at[2], int64(2*every), "after a good checkpoint the next comes at the configured size")
}

// walNextEnd is the end of the frames in the log that follows the one at
// path while a checkpoint runs (0 when there is none): the WAL's committed
// end is both's.
func walNextEnd(t *testing.T, path string) int64 {
	t.Helper()
	if _, err := os.Stat(path + ".next"); os.IsNotExist(err) {
		return 0
	}
	return walEnd(t, path+".next")
}

// TestTornTailCutIsDurable: the torn tail found when a log is first
// touched is cut and the cut fsynced before it is reported, so a crash
// right after does not bring the tail back; when that fsync fails the call
// fails, nothing is reported, and the next call cuts again.
func TestTornTailCutIsDurable(t *testing.T) {
	ctx := context.Background()
	for _, failFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "synced", true: "sync fails once"}[failFirst], func(t *testing.T) {
			home := t.TempDir()
			sid := seed(t, home, 4)
			good := fileSize(t, logPath(home, sid))
			appendFile(t, logPath(home, sid), []byte(`{"seq":5,"at":"2026-`))
			d := newDisk(t, home)
			st := crashStore(t, home, d)
			if failFirst {
				d.setFault(func(p filestore.SyncPoint) (error, bool) {
					if p.Kind == filestore.SyncRepair && d.countLocked(filestore.SyncRepair) == 1 {
						return errIO, false
					}
					return nil, false
				})
				_, err := st.LastSeq(ctx, sid)
				require.Error(t, err, "a cut that is not durable is not done")
				assert.Empty(t, st.Repairs())
			}
			last, err := st.LastSeq(ctx, sid)
			require.NoError(t, err)
			require.EqualValues(t, 4, last)
			require.Len(t, st.Repairs(), 1)
			home2 := d.crash()
			assert.Equal(t, good, fileSize(t, logPath(home2, sid)), "the cut reached the disk before it was reported")
		})
	}
}

// TestCheckpointCarriesRecordsForward: the checkpoints the WAL runs
// mid-load write no meta.json for records that changed without a liveness
// change; those records go into the emptied WAL instead, and a crash after
// the checkpoint still reads the latest of each.
func TestCheckpointCarriesRecordsForward(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	d := newDisk(t, home)
	st := crashStore(t, home, d, filestore.WithCheckpointBytes(4<<10))
	w := newWriter(t, st)
	rec, err := st.GetMeta(ctx, w.sid)
	require.NoError(t, err)
	rec.Status = messages.StatusRunning
	require.NoError(t, st.PutMeta(ctx, rec))
	writesBefore := st.MetaFileWrites()
	resets := d.count(filestore.SyncWALReset)
	statuses := []messages.Status{messages.StatusRunning, messages.StatusIdle}
	for i := 0; d.count(filestore.SyncWALReset) < resets+2; i++ {
		require.NoError(t, w.next())
		rec.Status = statuses[i%2]
		require.NoError(t, st.PutMeta(ctx, rec))
		require.Less(t, i, 5000, "two checkpoints never came")
	}
	assert.Equal(t, writesBefore, st.MetaFileWrites(), "no meta.json written by the checkpoints mid-load")
	require.NoError(t, w.next())
	st2 := open(t, d.crash())
	got, err := st2.GetMeta(ctx, w.sid)
	require.NoError(t, err)
	assert.Equal(t, rec.Status, got.Status, "the latest record survives the crash")
	requireAll(t, st2, w)
}

// TestCrashAfterCreateKeepsTheRecord: Create writes no meta.json (the WAL
// is the record's only durable copy until a checkpoint or the release), so
// a crash right after it, and after a live status change, must bring the
// record back from the WAL: GetMeta, List and meta.json itself.
func TestCrashAfterCreateKeepsTheRecord(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	d := newDisk(t, home)
	st := crashStore(t, home, d)
	w := newWriter(t, st)
	fresh := storetest.NewRecord(time.Now()) // created, never changed
	require.NoError(t, st.Create(ctx, fresh))
	require.NoError(t, w.next())
	rec, err := st.GetMeta(ctx, w.sid)
	require.NoError(t, err)
	rec.Status = messages.StatusIdle
	require.NoError(t, st.PutMeta(ctx, rec))
	require.NoError(t, w.next())
	assert.Zero(t, st.MetaFileWrites(), "no meta.json written for records that are only live")
	_, err = os.Stat(filestore.MetaPath(home, fresh.SessionID))
	require.ErrorIs(t, err, os.ErrNotExist, "Create wrote no meta.json")

	after := d.crash()
	st2 := open(t, after)
	got, err := st2.GetMeta(ctx, w.sid)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusIdle, got.Status, "the latest record survives the crash")
	got, err = st2.GetMeta(ctx, fresh.SessionID)
	require.NoError(t, err, "a record only ever created survives the crash")
	assert.Equal(t, fresh.Status, got.Status)
	all, err := st2.List(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 2, "List finds both records")
	requireAll(t, st2, w)
	_, err = os.Stat(filestore.MetaPath(after, fresh.SessionID))
	require.NoError(t, err, "the replay wrote meta.json")
}
