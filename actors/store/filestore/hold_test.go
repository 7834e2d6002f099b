package filestore_test

import (
	"bytes"
	"context"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

// The applier holds a session's committed lines back from events.jsonl
// and writes them a few kilobytes at a time (writeLines). These tests
// pin what must hold whatever is held: every reader sees every
// acknowledged event, a checkpoint writes the held lines before the WAL
// drops them, a crash replays them, and a write the file refuses (or
// that lands but reports an error) neither loses nor doubles a line.

// lineCount is how many lines the file at path holds (0: no file).
func lineCount(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return bytes.Count(data, []byte{'\n'})
}

// requireGapless reads the session back and requires seq 1..n, once each.
func requireGapless(t *testing.T, st *filestore.Store, sid string, n int) {
	t.Helper()
	evs, err := st.ReadEvents(context.Background(), sid, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, n)
	require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, n)), storetest.NormalizeEvents(evs))
}

// TestHeldLinesReachEveryReader: lines held back are acknowledged, counted
// by LastSeq and read back by ReadEvents, which writes them to the file
// first; Close writes what is left.
func TestHeldLinesReachEveryReader(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st, err := filestore.Open(home)
	require.NoError(t, err)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	for seq := uint64(1); seq <= 10; seq++ {
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(seq, 1)))
	}
	assert.Equal(t, 1, lineCount(t, logPath(home, rec.SessionID)), "the first line creates the file; the next nine are held")
	assert.Positive(t, st.HeldBytes())
	last, err := st.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.EqualValues(t, 10, last)
	requireGapless(t, st, rec.SessionID, 10)
	assert.Equal(t, 10, lineCount(t, logPath(home, rec.SessionID)), "the read wrote the held lines")
	assert.Zero(t, st.HeldBytes())

	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(11, 1)))
	require.NoError(t, st.Close())
	assert.Equal(t, 11, lineCount(t, logPath(home, rec.SessionID)), "Close wrote the held line")
}

// TestHeldLinesAreWrittenPastTheirBound: a session writes its lines once
// it holds HoldBytes of them, whatever else happens.
func TestHeldLinesAreWrittenPastTheirBound(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := open(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	n := 0
	for st.HeldBytes() < filestore.HoldBytes/2 || lineCount(t, logPath(home, rec.SessionID)) <= 1 {
		n++
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(uint64(n), 1)))
		require.Less(t, n, 1000, "the held lines were never written")
	}
	assert.Less(t, st.HeldBytes(), int64(filestore.HoldBytes))
	requireGapless(t, st, rec.SessionID, n)
}

// TestHeldLinesFlushAlone: when a session's held lines would pass their
// bound, they are written on their own and the batch that passed it is
// held in the emptied buffer (appended to the full one first, the buffer
// was reallocated past holdBytes and never went back to its pool), and
// nothing is lost or doubled either way.
func TestHeldLinesFlushAlone(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := open(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	// the first lines create the file at once; the later ones are held
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, 1)))
	require.Equal(t, 1, lineCount(t, logPath(home, rec.SessionID)))
	n, flushes := 1, 0
	for lines := 1; flushes < 3; {
		n++
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(uint64(n), 1)))
		require.Less(t, n, 1000, "the held lines were never written")
		if now := lineCount(t, logPath(home, rec.SessionID)); now != lines {
			flushes++
			assert.Equal(t, n-1, now, "the flush wrote the lines held before this batch, and not the batch")
			assert.Positive(t, st.HeldBytes(), "the batch that passed the bound is held")
			lines = now
		}
	}
	requireGapless(t, st, rec.SessionID, n)
	require.NoError(t, st.Close())
	requireGapless(t, open(t, home), rec.SessionID, n)
}

// TestCrashWithHeldLinesReplaysThem: a crash loses the lines held back
// (they were in memory only); the WAL has them, and the replay writes
// them.
func TestCrashWithHeldLinesReplaysThem(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := crashed(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	for seq := uint64(1); seq <= 12; seq++ {
		require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(seq, 1)))
	}
	require.Less(t, lineCount(t, logPath(home, rec.SessionID)), 12, "some lines are held at the crash")
	requireGapless(t, open(t, home), rec.SessionID, 12)
}

// TestCheckpointWritesHeldLines: a checkpoint beside the load drops the
// WAL's frames before its cut, so it must write the lines held from them
// first: after two checkpoints and a crash every event is back (without
// the write, the log ends before the WAL's first seq and reads corrupt).
func TestCheckpointWritesHeldLines(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	// The crash comes once the second checkpoint has made its spare
	// walNext, the last file it touches (zeros, then the directory's
	// fsync): a store opening the home while the first one still renames
	// and creates files there is two stores on one home, not a crash, and
	// its own checkpoint failed now and then (a few runs in thirty).
	var mu sync.Mutex
	switches, zeroed := 0, false
	spareMade := make(chan struct{})
	watch := filestore.WithSyncFault(func(p filestore.SyncPoint) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p.Kind == filestore.SyncWALSwitch:
			switches++
		case p.Kind == filestore.SyncWALZeros && switches == 2:
			zeroed = true
		case p.Kind == filestore.SyncWALDir && zeroed:
			zeroed = false
			close(spareMade)
		}
		return nil
	})
	st, err := filestore.Open(home, filestore.WithCheckpointBytes(4<<10), watch) // never closed: a crash
	require.NoError(t, err)
	var sids []string
	for range 3 {
		rec := storetest.NewRecord(time.Now())
		require.NoError(t, st.Create(ctx, rec))
		sids = append(sids, rec.SessionID)
	}
	n := 0
	deadline := time.Now().Add(2 * time.Minute) // only stops a hang
	// the second checkpoint starts only once the first one has ended
	for done, _ := st.LoopCheckpoints(); done < 2; done, _ = st.LoopCheckpoints() {
		n++
		for _, sid := range sids {
			require.NoError(t, st.Append(ctx, sid, storetest.NewEvents(uint64(n), 1)))
		}
		require.True(t, time.Now().Before(deadline), "no second checkpoint after %d appends each", n)
	}
	select {
	case <-spareMade:
	case <-time.After(time.Minute): // only stops a hang
		t.Fatal("the second checkpoint never made its spare walNext")
	}
	st2 := open(t, home)
	for _, sid := range sids {
		requireGapless(t, st2, sid, n)
	}
}

// TestRefusedLogWritesLoseNothing: while events.jsonl refuses writes (no
// space; or a write that lands and still reports the failure) appends are
// acknowledged from the WAL, the lines stay held, a read reports the
// failure; once the file takes writes again every event is there once,
// and a crash meanwhile replays them.
func TestRefusedLogWritesLoseNothing(t *testing.T) {
	for _, landed := range []bool{false, true} {
		name := "refused"
		if landed {
			name = "landed"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			home := t.TempDir()
			var mu sync.Mutex
			failing, faults := false, 0
			st := open(t, home, filestore.WithLogWriteFault(func() (error, bool) {
				mu.Lock()
				defer mu.Unlock()
				if !failing {
					return nil, false
				}
				faults++
				return syscall.ENOSPC, landed
			}))
			setFailing := func(v bool) { mu.Lock(); failing = v; mu.Unlock() }
			rec := storetest.NewRecord(time.Now())
			require.NoError(t, st.Create(ctx, rec))
			require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, 1)))

			setFailing(true)
			n := 1
			for ; n < 80; n++ { // past HoldBytes: writes are tried and refused
				require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(uint64(n+1), 1)), "acknowledged from the WAL")
			}
			_, err := st.ReadEvents(ctx, rec.SessionID, 0, 0)
			storetest.RequireCode(t, err, messages.CodeUnavailable, "a read cannot see the held lines")
			mu.Lock()
			assert.Greater(t, faults, 1, "the full hold was written, and the read tried again")
			mu.Unlock()
			assert.Equal(t, 1, lineCount(t, logPath(home, rec.SessionID)), "a refused write is cut back off the file")

			// a crash now: the WAL holds every acknowledged event
			crashHome := t.TempDir()
			require.NoError(t, os.CopyFS(crashHome, os.DirFS(home)))
			requireGapless(t, open(t, crashHome), rec.SessionID, n)

			setFailing(false)
			requireGapless(t, st, rec.SessionID, n)
			assert.Equal(t, n, lineCount(t, logPath(home, rec.SessionID)), "each line once")
			assert.Zero(t, st.HeldBytes())
			require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(uint64(n+1), 1)))
			requireGapless(t, st, rec.SessionID, n+1)
		})
	}
}
