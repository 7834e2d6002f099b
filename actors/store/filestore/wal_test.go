package filestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
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

// crashed opens a store on home that is never closed: what it wrote and did
// not checkpoint stays only in the WAL and the page cache, as after a
// SIGKILL. (Its goroutine idles until the test ends.)
func crashed(t *testing.T, home string) *filestore.Store {
	t.Helper()
	st, err := filestore.Open(home)
	require.NoError(t, err)
	return st
}

// TestReplayMakesFilesExact: after a crash that lost the unsynced tail of
// events.jsonl and meta.json (a power cut can), opening the home replays
// the WAL and both are exact again.
func TestReplayMakesFilesExact(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := crashed(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, 40)))
	idle := rec.Clone()
	idle.Status = messages.StatusIdle
	require.NoError(t, st.PutMeta(ctx, idle))
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(41, 30)))

	// a read writes the lines held back (writeLines): the file holds
	// everything before the damage
	_, err := st.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	// Damage what was never fsynced: the log loses its last 1000 bytes and
	// gains garbage, and meta.json is gone.
	lp := logPath(home, rec.SessionID)
	size := fileSize(t, lp)
	require.NoError(t, os.Truncate(lp, size-1000))
	appendFile(t, lp, []byte("\x00\x00garbage"))
	removeIfThere(t, metaPath(home, rec.SessionID)) // Create writes none: the WAL holds the record

	st2 := open(t, home)
	evs, err := st2.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 70)), storetest.NormalizeEvents(evs))
	got, err := st2.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusIdle, got.Status, "the record is the last one committed")
	assert.Equal(t, size, fileSize(t, lp), "the log file is byte for byte what was appended")
	// and the files alone (as users and tools read them) are right too
	data, err := os.ReadFile(metaPath(home, rec.SessionID))
	require.NoError(t, err)
	assert.Contains(t, string(data), `"status": "idle"`)
	require.NoError(t, st2.Append(ctx, rec.SessionID, storetest.NewEvents(71, 1)))
}

// removeIfThere removes path, which may never have been written.
func removeIfThere(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		require.ErrorIs(t, err, os.ErrNotExist)
	}
}

// sizeIfThere is the size of the file at path, 0 when there is none.
func sizeIfThere(t testing.TB, path string) int64 {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	require.NoError(t, err)
	return fi.Size()
}

// TestWALTornTail: a frame cut mid-write was never acknowledged; the rest
// replays.
func TestWALTornTail(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := crashed(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, 5)))
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(6, 5)))
	wal := filepath.Join(home, "wal", "log")
	require.NoError(t, os.Truncate(wal, walEnd(t, wal)-7))
	// the unacknowledged batch's lines went to the file too (a crash after
	// the page-cache write): replay cuts them back to what the WAL holds
	st2 := open(t, home)
	last, err := st2.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), last)
	require.NoError(t, st2.Append(ctx, rec.SessionID, storetest.NewEvents(6, 1)), "appends continue gaplessly")
}

// TestWALTornOnTheZerosAhead: a frame written over the zeros the log keeps
// ahead, whose last bytes never reached the disk, reads as zeros there,
// not as a shorter file. It was never acknowledged; the rest replays, and
// the log is not taken for torn when only zeros follow its frames.
func TestWALTornOnTheZerosAhead(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	var warned bytes.Buffer
	st := crashed(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	for i := range 4 {
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(uint64(5*i+1), 5)))
	}
	wal := filepath.Join(home, "wal", "log")
	end := walEnd(t, wal)
	require.Greater(t, fileSize(t, wal), end, "zeros are kept ahead of the frames")

	// a clean crash first: only zeros follow the frames
	st2 := open(t, home, filestore.WithLogger(slog.New(slog.NewTextHandler(&warned, nil))))
	last, err := st2.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, uint64(20), last)
	assert.NotContains(t, warned.String(), "torn", "zeros ahead are not a torn frame")
	require.NoError(t, st2.Close())

	st3 := crashed(t, home)
	require.NoError(t, st3.Append(ctx, rec.SessionID, storetest.NewEvents(21, 5)))
	require.NoError(t, st3.Append(ctx, rec.SessionID, storetest.NewEvents(26, 5)))
	end = walEnd(t, wal)
	require.Greater(t, fileSize(t, wal), end)
	f, err := os.OpenFile(wal, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 7), end-7)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	warned.Reset()
	st4 := open(t, home, filestore.WithLogger(slog.New(slog.NewTextHandler(&warned, nil))))
	last, err = st4.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, uint64(25), last, "the frame whose end is zeros was dropped")
	assert.Contains(t, warned.String(), "torn")
	require.NoError(t, st4.Append(ctx, rec.SessionID, storetest.NewEvents(26, 1)), "appends continue gaplessly")
}

// TestOpenLaysTheZerosAhead: Open lays the log's zeros ahead, so no
// caller's commit waits for them: the first commit after Open, and every
// one after it while zeros are left, is an fdatasync over zeros already on
// disk (on a new log it was an fsync that grew the file, and the loop then
// held every later commit while it wrote the first 1 MiB of zeros). Where
// Open cannot lay them (the disk refuses their sync) it still succeeds,
// the first commit grows the file, and the loop lays them after it.
func TestOpenLaysTheZerosAhead(t *testing.T) {
	ctx := context.Background()
	for _, refuse := range []bool{false, true} {
		home := t.TempDir()
		var mu sync.Mutex
		var points []filestore.SyncPoint
		refused := false
		st := open(t, home, filestore.WithSyncFault(func(p filestore.SyncPoint) error {
			mu.Lock()
			defer mu.Unlock()
			points = append(points, p)
			if refuse && !refused && p.Kind == filestore.SyncWALZeros && filepath.Base(p.Path) == "log" {
				refused = true // Open's; the loop's later ones are made
				return syscall.ENOSPC
			}
			return nil
		}))
		wal := filepath.Join(home, "wal", "log")
		mu.Lock()
		opened := len(points)
		mu.Unlock()
		if refuse {
			assert.Equal(t, int64(0), fileSize(t, wal), "the zeros whose sync failed are cut off again")
		} else {
			assert.GreaterOrEqual(t, fileSize(t, wal), int64(1<<20), "the log is a megabyte of zeros when Open returns")
		}

		rec := storetest.NewRecord(time.Now())
		require.NoError(t, st.Create(ctx, rec))
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, 5)))
		mu.Lock()
		var commits []filestore.SyncPoint
		for _, p := range points[opened:] {
			if p.Kind == filestore.SyncWALCommit {
				commits = append(commits, p)
			}
		}
		mu.Unlock()
		require.Len(t, commits, 2, "the create and the append, one group commit each")
		for i, p := range commits {
			assert.Equal(t, !refuse || i > 0, p.DataOnly, "commit %d (zeros refused at Open: %v)", i, refuse)
		}
		last, err := st.LastSeq(ctx, rec.SessionID)
		require.NoError(t, err)
		assert.Equal(t, uint64(5), last)
	}
}

// walEnd is where the frames of the log at path end: the zeros the log
// keeps ahead of them follow.
func walEnd(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return int64(len(bytes.TrimRight(b, "\x00")))
}

// TestMetaWritesPerSession: status changes go through the WAL; meta.json is
// written at release (and checkpoints sync it, not rewrite it), not at
// create: the WAL holds a new record until then.
func TestMetaWritesPerSession(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st, err := filestore.Open(home)
	require.NoError(t, err)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	for i := range 6 {
		r := rec.Clone()
		r.Status = []messages.Status{messages.StatusIdle, messages.StatusRunning}[i%2]
		require.NoError(t, st.PutMeta(ctx, r))
		got, err := st.GetMeta(ctx, rec.SessionID)
		require.NoError(t, err)
		require.Equal(t, r.Status, got.Status, "GetMeta sees every committed change")
	}
	final := rec.Clone()
	final.Status = messages.StatusEnded
	require.NoError(t, st.PutMeta(ctx, final))
	require.NoError(t, st.Close())
	assert.Equal(t, int64(1), st.MetaFileWrites(), "meta.json writes: release only")
	st2 := open(t, home)
	got, err := st2.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, got.Status)
}

// TestWALFullDisk: ENOSPC for three commits, then space again. The failed
// appends are unavailable (naming the cause), wrote nothing, and the log
// continues gaplessly afterwards.
func TestWALFullDisk(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	var fail atomic.Int32
	st := open(t, home, filestore.WithWALFault(func() error {
		if fail.Add(-1) >= 0 {
			return &os.PathError{Op: "write", Path: "wal", Err: syscall.ENOSPC}
		}
		return nil
	}))
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, 3)))
	fail.Store(3)
	for range 3 {
		err := st.Append(ctx, rec.SessionID, storetest.NewEvents(4, 2))
		storetest.RequireCode(t, err, messages.CodeUnavailable)
		assert.Contains(t, err.Error(), "no space left on device")
		var e *messages.Error
		require.True(t, errors.As(err, &e))
		assert.True(t, e.Retryable)
		last, err := st.LastSeq(ctx, rec.SessionID)
		require.NoError(t, err)
		require.Equal(t, uint64(3), last, "a refused batch is not in the log")
	}
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(4, 2)))
	require.NoError(t, st.Close())
	st2 := open(t, home)
	evs, err := st2.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 5)), storetest.NormalizeEvents(evs))
}

// TestGroupCommit: concurrent appends of many sessions, each waiting for
// its own, all land, in order. That they share syncs is asserted where the
// test holds a commit (TestAppendsQueuedDuringACommitShareTheNext); here
// the count only reports it, as it depends on how the goroutines were
// scheduled.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	st := open(t, t.TempDir())
	const sessions, per = 32, 20
	ids := createSessions(t, st, sessions)
	before := st.WALCommits()
	var wg sync.WaitGroup
	for _, sid := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				assert.NoError(t, st.Append(ctx, sid, storetest.NewEvents(uint64(i)+1, 1)))
			}
		}()
	}
	wg.Wait()
	t.Logf("%d appends in %d group commits", sessions*per, st.WALCommits()-before)
	for _, sid := range ids {
		evs, err := st.ReadEvents(ctx, sid, 0, 0)
		require.NoError(t, err)
		require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, per)), storetest.NormalizeEvents(evs))
	}
}

// createSessions creates n records and returns their session ids.
func createSessions(t *testing.T, st *filestore.Store, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		rec := storetest.NewRecord(time.Now())
		require.NoError(t, st.Create(context.Background(), rec))
		ids[i] = rec.SessionID
	}
	return ids
}

// TestAppendsQueuedDuringACommitShareTheNext: every append queued while a
// group commit is in its sync goes out in the next commit, one write and
// one sync for all of them. The commit's sync is held (the sync seam)
// until the other sessions' appends are queued, so the count does not
// depend on how the machine schedules the goroutines (TestGroupCommit's
// assertion, from many goroutines at once, does).
func TestAppendsQueuedDuringACommitShareTheNext(t *testing.T) {
	ctx := context.Background()
	var hold atomic.Bool
	inSync, release := make(chan struct{}), make(chan struct{})
	st := open(t, t.TempDir(), filestore.WithSyncFault(func(p filestore.SyncPoint) error {
		if p.Kind == filestore.SyncWALCommit && hold.CompareAndSwap(true, false) {
			close(inSync)
			<-release
		}
		return nil
	}))
	ids := createSessions(t, st, 32)
	before := st.WALCommits()
	hold.Store(true)
	waits := []func() error{st.StartAppend(ctx, ids[0], storetest.NewEvents(1, 1), nil)}
	<-inSync // the first append's commit is in its sync
	for _, sid := range ids[1:] {
		waits = append(waits, st.StartAppend(ctx, sid, storetest.NewEvents(1, 3), nil))
	}
	close(release)
	for _, wait := range waits {
		require.NoError(t, wait())
	}
	assert.Equal(t, int64(2), st.WALCommits()-before, "the first append's commit, then one for the 31 queued behind it")
	for i, sid := range ids {
		evs, err := st.ReadEvents(ctx, sid, 0, 0)
		require.NoError(t, err)
		assert.Len(t, evs, min(i, 1)*2+1, sid)
	}
}

// TestCheckpointTruncatesWAL: past the checkpoint size the WAL is emptied
// once the session files are durable, and nothing is lost.
func TestCheckpointTruncatesWAL(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := open(t, home, filestore.WithCheckpointBytes(4<<10))
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	for i := range 100 {
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(uint64(i)+1, 1)))
	}
	assert.Less(t, fileSize(t, filepath.Join(home, "wal", "log")), int64(8<<10), "the WAL was truncated")
	evs, err := st.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 100)
}

// TestReadEventsIndex reads windows of a long log at every offset around
// the index stride.
func TestReadEventsIndex(t *testing.T) {
	ctx := context.Background()
	st := open(t, t.TempDir())
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	all := storetest.NewEvents(1, 300)
	for i := 0; i < 300; i += 7 {
		n := min(7, 300-i)
		require.NoError(t, st.Append(ctx, rec.SessionID, all[i:i+n]))
	}
	want := storetest.NormalizeEvents(all)
	for _, after := range []int{0, 1, 62, 63, 64, 65, 127, 128, 129, 250, 299, 300} {
		for _, limit := range []int{0, 1, 5, 100} {
			got, err := st.ReadEvents(ctx, rec.SessionID, uint64(after), limit)
			require.NoError(t, err)
			end := 300
			if limit > 0 {
				end = min(300, after+limit)
			}
			if after >= 300 {
				require.Empty(t, got)
				continue
			}
			require.Equal(t, want[after:end], storetest.NormalizeEvents(got), "after %d limit %d", after, limit)
		}
	}
}

// TestReadEventsStartsAtTheIndex: a read of the tail starts at the index
// entry before it, never at line 1. The file's first lines are damaged
// behind the store's back (two lines merged into one, which shifts every
// line number after them): a read that decoded from line 1 would find the
// wrong seq on every later line; one that starts at the index reads the
// tail as it is.
func TestReadEventsStartsAtTheIndex(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := open(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	all := storetest.NewEvents(1, 300)
	require.NoError(t, st.Append(ctx, rec.SessionID, all))
	_, err := st.ReadEvents(ctx, rec.SessionID, 0, 1) // the log is scanned and indexed
	require.NoError(t, err)

	path := logPath(home, rec.SessionID)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	first := bytes.IndexByte(data, '\n')
	data[first] = ' ' // lines 1 and 2 become one line; the size is unchanged
	require.NoError(t, os.WriteFile(path, data, 0o600))

	got, err := st.ReadEvents(ctx, rec.SessionID, 200, 0)
	require.NoError(t, err, "a read past the first index entry never touches line 1")
	require.Equal(t, storetest.NormalizeEvents(all[200:]), storetest.NormalizeEvents(got))
	_, err = st.ReadEvents(ctx, rec.SessionID, 0, 0)
	storetest.RequireCode(t, err, messages.CodeCorrupt, "the damage is there for a read from line 1")
}

// TestAppendRecordIsOneCommit: events and the record go to disk in one
// WAL commit (one fsync where Append and PutMeta take two), and both
// replay after a crash that lost every session file's unsynced write.
func TestAppendRecordIsOneCommit(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := crashed(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	idle := rec.Clone()
	idle.Status = messages.StatusIdle
	idle.CostUSD = 0.5
	before := st.WALCommits()
	require.NoError(t, st.AppendRecord(ctx, rec.SessionID, storetest.NewEvents(1, 4), idle))
	assert.Equal(t, int64(1), st.WALCommits()-before, "one commit for the events and the record")

	// the lines may still be held back from the file (writeLines)
	removeIfThere(t, logPath(home, rec.SessionID))
	removeIfThere(t, metaPath(home, rec.SessionID)) // Create writes none: the WAL holds the record
	st2 := open(t, home)
	evs, err := st2.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 4)), storetest.NormalizeEvents(evs))
	got, err := st2.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, storetest.NormalizeRecord(idle), storetest.NormalizeRecord(got))
}

// TestAppendRecordTornKeepsTheEventsFirst: a crash that tore the commit's
// record frame replays the events and the previous record: the record
// never runs ahead of the log it describes.
func TestAppendRecordTornKeepsTheEventsFirst(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := crashed(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	ended := rec.Clone()
	ended.Status = messages.StatusEnded
	require.NoError(t, st.AppendRecord(ctx, rec.SessionID, storetest.NewEvents(1, 3), ended))
	wal := filepath.Join(home, "wal", "log")
	require.NoError(t, os.Truncate(wal, walEnd(t, wal)-5))
	removeIfThere(t, metaPath(home, rec.SessionID)) // Create writes none: the WAL holds the record

	st2 := open(t, home)
	last, err := st2.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), last, "the events frame was whole")
	got, err := st2.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, rec.Status, got.Status, "the torn record is not replayed")
}

// TestCheckpointWhoseSyncFailsLosesNothing: a checkpoint truncates the WAL
// and then its sync fails (EIO). The session files were made durable first,
// so the WAL's old frames are not needed; the appends that follow must land
// at the start of the emptied log, where a replay finds them, not past a
// hole of zeros a replay stops at. A crash then loses the unsynced tail of
// the session's log, and the replay brings it back.
func TestCheckpointWhoseSyncFailsLosesNothing(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	var rec messages.SessionRecord
	var failed atomic.Int32
	var syncedLog atomic.Int64 // the session log's size at the failed checkpoint: durable
	st, err := filestore.Open(home, filestore.WithCheckpointBytes(4<<10), filestore.WithWALResetFault(func() error {
		if rec.SessionID == "" {
			return nil // Open's own checkpoint
		}
		if failed.Add(1) > 1 {
			return nil
		}
		// none yet when every line is still held back (writeLines)
		syncedLog.Store(sizeIfThere(t, logPath(home, rec.SessionID)))
		return syscall.EIO
	}))
	require.NoError(t, err) // never closed: a crash
	rec = storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	seq := uint64(0)
	for failed.Load() == 0 {
		seq++
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(seq, 1)))
		require.Less(t, seq, uint64(1000), "the WAL never checkpointed")
	}
	for range 5 { // after the failed checkpoint, well under the next one
		seq++
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(seq, 1)))
	}
	require.EqualValues(t, 1, failed.Load())

	// the crash: what the session's log got after the checkpoint made it
	// durable never reached the disk
	if err := os.Truncate(logPath(home, rec.SessionID), syncedLog.Load()); err != nil {
		require.ErrorIs(t, err, os.ErrNotExist)
	}
	st2 := open(t, home)
	evs, err := st2.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, int(seq), "every acknowledged append is back")
	require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, int(seq))), storetest.NormalizeEvents(evs))
}

// TestRecordFramesAreCompactAndMetaJSONIndented: a record rides the WAL
// compact (the old frame was MarshalIndent's, twice the bytes and three
// times the CPU on every append that carries a record), and meta.json is
// still the indented record a person reads.
func TestRecordFramesAreCompactAndMetaJSONIndented(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := open(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	idle := rec.Clone()
	idle.Status = messages.StatusIdle
	require.NoError(t, st.AppendRecord(ctx, rec.SessionID, storetest.NewEvents(1, 3), idle))

	wal, err := os.ReadFile(filepath.Join(home, "wal", "log"))
	require.NoError(t, err)
	compact, err := json.Marshal(idle)
	require.NoError(t, err)
	assert.True(t, bytes.Contains(wal, compact), "the WAL holds the record compact")
	assert.False(t, bytes.Contains(wal, []byte("{\n  \"")), "no indented record in the WAL")

	require.NoError(t, st.Close())
	meta, err := os.ReadFile(metaPath(home, rec.SessionID))
	require.NoError(t, err)
	want, err := json.MarshalIndent(idle, "", "  ")
	require.NoError(t, err)
	assert.Equal(t, string(want)+"\n", string(meta))
	got, err := open(t, home).GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusIdle, got.Status)
}
