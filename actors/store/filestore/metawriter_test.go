//go:build unix

package filestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
)

// metaStatus is the status meta.json holds on disk in home.
func metaStatus(t *testing.T, home, sid string) messages.Status {
	t.Helper()
	b, err := os.ReadFile(filestore.MetaPath(home, sid))
	require.NoError(t, err)
	var rec messages.SessionRecord
	require.NoError(t, json.Unmarshal(b, &rec))
	return rec.Status
}

// TestReleaseMetaJSONHoldsBackNoAnswer: the meta.json a release writes is
// written off the WAL's applier, so while its creation is stuck in the
// kernel (here: held in the fault seam) the release itself and every
// other session's appends are answered. Before, the applier wrote it and
// every answer queued behind waited.
func TestReleaseMetaJSONHoldsBackNoAnswer(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	entered, unblock := make(chan struct{}, 1), make(chan struct{})
	st := open(t, home, filestore.WithMetaWriteFault(func() (error, bool) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-unblock
		return nil, true
	}))
	released := newWriter(t, st)
	other := newWriter(t, st)
	require.NoError(t, released.next())

	answered := make(chan error, 1)
	go func() {
		released.release()
		// the other session's appends commit and are answered while the
		// release's meta.json is still being written
		for range 3 {
			if err := other.next(); err != nil {
				answered <- err
				return
			}
		}
		answered <- nil
	}()
	select {
	case <-entered:
	case <-time.After(time.Minute): // only stops a hang
		t.Fatal("the release's meta.json was never written")
	}
	select {
	case err := <-answered:
		require.NoError(t, err)
	case <-time.After(time.Minute): // only stops a hang
		close(unblock)
		t.Fatal("the release and the other session's appends waited for the release's meta.json")
	}
	got, err := st.GetMeta(ctx, released.sid)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, got.Status, "GetMeta reads the released record before its meta.json is written")
	close(unblock)
	require.NoError(t, st.Close())
	assert.Equal(t, messages.StatusEnded, metaStatus(t, home, released.sid))
	// the released one by the writer, not again by Close; the other
	// (only ever created) by Close
	assert.Equal(t, int64(2), st.MetaFileWrites(), "one meta.json write per session")
	st2 := open(t, home)
	requireAll(t, st2, released, other)
}

// TestReleaseMetaJSONFailuresLoseNothing: the writer's meta.json fails (no
// space, nothing written), fails after it landed (replaced, error
// reported), or panics. The store goes on answering; the record stays
// dirty, so the checkpoints mid-load carry it forward, and a crash after
// them (files rebuilt from what the fsyncs made durable) still reads the
// released record; Close of a second store writes the file.
func TestReleaseMetaJSONFailuresLoseNothing(t *testing.T) {
	noSpace := &os.PathError{Op: "write", Path: "meta.json", Err: syscall.ENOSPC}
	for _, tc := range []struct {
		name  string
		fault func() (error, bool)
	}{
		{"no space", func() (error, bool) { return noSpace, false }},
		{"landed then failed", func() (error, bool) { return errIO, true }},
		{"panic", func() (error, bool) { panic("meta.json writer blew up") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			home := t.TempDir()
			d := newDisk(t, home)
			fault, consulted := signalling(tc.fault)
			st := crashStore(t, home, d, filestore.WithCheckpointBytes(4<<10), filestore.WithMetaWriteFault(fault))
			released := newWriter(t, st)
			other := newWriter(t, st)
			require.NoError(t, released.next())
			released.release()
			waitSignal(t, consulted, "the release's meta.json was never attempted")
			// the store goes on, through two checkpoints mid-load
			resets := d.count(filestore.SyncWALReset)
			for i := 0; d.count(filestore.SyncWALReset) < resets+2; i++ {
				require.NoError(t, other.next())
				require.Less(t, i, 5000, "two checkpoints never came")
			}
			got, err := st.GetMeta(ctx, released.sid)
			require.NoError(t, err)
			assert.Equal(t, messages.StatusEnded, got.Status)

			after := d.crash()
			st2, err := filestore.Open(after)
			require.NoError(t, err)
			got, err = st2.GetMeta(ctx, released.sid)
			require.NoError(t, err)
			assert.Equal(t, messages.StatusEnded, got.Status, "the released record survives the crash: carried forward, not lost with the failed meta.json")
			requireAll(t, st2, released, other)
			require.NoError(t, st2.Close())
			assert.Equal(t, messages.StatusEnded, metaStatus(t, after, released.sid))
		})
	}
}

// TestReleaseMetaJSONFailureThenClose: a failed meta.json write leaves the
// record for Close, which writes it (no crash).
func TestReleaseMetaJSONFailureThenClose(t *testing.T) {
	home := t.TempDir()
	fault, consulted := signalling(func() (error, bool) { return errors.New("no meta.json today"), false })
	st := open(t, home, filestore.WithMetaWriteFault(fault))
	w := newWriter(t, st)
	require.NoError(t, w.next())
	w.release()
	waitSignal(t, consulted, "the release's meta.json was never attempted")
	require.NoError(t, w.next(), "the store takes appends after the failed write")
	require.NoError(t, st.Close())
	assert.Equal(t, messages.StatusEnded, metaStatus(t, home, w.sid), "Close wrote the meta.json the writer could not")
}

// TestSessionDirtyAgainAfterEachCheckpoint: a session written before a
// checkpoint took the dirty set and written again after must be in the
// next one too (markDirty skips the store-wide lock for a session already
// in the current set), or the next checkpoint empties the WAL without its
// held lines in its file: a crash then loses acknowledged events. Only
// events, no record change (a carried record puts the session back in
// the set by itself, so the record is released and written first).
func TestSessionDirtyAgainAfterEachCheckpoint(t *testing.T) {
	for _, perFile := range []bool{false, true} {
		name := "syncfs"
		if perFile {
			name = "per file"
		}
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			d := newDisk(t, home)
			opts := []filestore.Option{filestore.WithCheckpointBytes(4 << 10)}
			if perFile {
				opts = append(opts, filestore.WithoutSyncFS())
			}
			st := crashStore(t, home, d, opts...)
			w := newWriter(t, st)
			// released, and its meta.json written: the record is not
			// carried, so nothing but markDirty puts the session back
			w.release()
			for deadline := time.Now().Add(time.Minute); st.MetaFileWrites() < 1; time.Sleep(time.Millisecond) {
				require.True(t, time.Now().Before(deadline), "the release's meta.json was never written") // only stops a hang
			}
			resets := d.count(filestore.SyncWALReset)
			for i := 0; d.count(filestore.SyncWALReset) < resets+3; i++ {
				require.NoError(t, w.next())
				require.Less(t, i, 5000, "three checkpoints never came")
			}
			require.NoError(t, w.next())
			st2 := open(t, d.crash())
			requireAll(t, st2, w)
		})
	}
}

// signalling wraps a meta.json write fault so that the test learns when
// the writer first consulted it.
func signalling(fault func() (error, bool)) (func() (error, bool), <-chan struct{}) {
	consulted := make(chan struct{}, 1)
	return func() (error, bool) {
		select {
		case consulted <- struct{}{}:
		default:
		}
		return fault()
	}, consulted
}

// waitSignal waits for ch, failing with why after a minute (which only
// stops a hang).
func waitSignal(t *testing.T, ch <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatal(why)
	}
}
