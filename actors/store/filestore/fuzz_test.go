package filestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

// FuzzTornTail appends arbitrary bytes after n good lines, as a crash in the
// middle of an append might, and checks that opening and reading never fail,
// return exactly the n events, report the cut, and let appends continue.
func FuzzTornTail(f *testing.F) {
	next := encodeLine(f, storetest.NewEvents(4, 1)[0])
	f.Add([]byte{}, uint8(3))
	f.Add(next[:len(next)/2], uint8(3))
	f.Add(next[:len(next)-1], uint8(3))
	f.Add([]byte("garbage\n"), uint8(3))
	f.Add(make([]byte, 512), uint8(3))
	f.Add([]byte("{}\nnull\n\n"), uint8(2))
	f.Add([]byte(`{"seq":99}`+"\n"), uint8(3))
	f.Add([]byte(`{"seq":3}`+"\n"), uint8(3))
	f.Add([]byte(`{"seq":2}`+"\n"+`{"seq":3}`+"\n"), uint8(0))
	f.Add([]byte("garbage\nmore\n{\"seq\":4,"), uint8(1))
	f.Add([]byte(`{"seq":4,"at":"yesterday"}`+"\n"), uint8(3))

	f.Fuzz(func(t *testing.T, tail []byte, n8 uint8) {
		n := int(n8 % 5)
		if forges(tail, n) {
			t.Skip("the tail holds a well-formed next event; without checksums it is indistinguishable from a real one")
		}
		ctx := context.Background()
		home := fastTempDir(t)
		quiet := filestore.WithLogger(slog.New(slog.DiscardHandler))
		st, err := filestore.Open(home, filestore.WithoutSync(), quiet)
		require.NoError(t, err)
		rec := storetest.NewRecord(time.Now())
		require.NoError(t, st.Create(ctx, rec))
		sid := rec.SessionID
		appended := storetest.NewEvents(1, n)
		require.NoError(t, st.Append(ctx, sid, appended))
		require.NoError(t, st.Close())
		good := int64(0)
		if n > 0 {
			good = fileSize(t, logPath(home, sid))
		}
		appendFile(t, logPath(home, sid), tail)

		st = open(t, home, filestore.WithoutSync(), quiet)
		evs, err := st.ReadEvents(ctx, sid, 0, 0)
		require.NoError(t, err)
		require.Equal(t, storetest.NormalizeEvents(appended), storetest.NormalizeEvents(evs))
		last, err := st.LastSeq(ctx, sid)
		require.NoError(t, err)
		require.Equal(t, uint64(n), last)
		if len(tail) == 0 {
			require.Empty(t, st.Repairs())
		} else {
			require.Equal(t, []store.Repair{{SessionID: sid, Offset: good, Bytes: int64(len(tail))}}, st.Repairs())
		}
		require.NoError(t, st.Append(ctx, sid, storetest.NewEvents(uint64(n)+1, 1)))
		evs, err = st.ReadEvents(ctx, sid, uint64(n), 0)
		require.NoError(t, err)
		require.Len(t, evs, 1)
	})
}

// forges reports whether tail, written after n good lines, holds a complete
// line that is intact where it stands: it decodes with the seq of its line
// number. Such a line after a bad one makes the log corrupt (reported, never
// cut); as the first line of the tail it is simply the next event.
func forges(tail []byte, n int) bool {
	lines := bytes.Split(tail, []byte("\n"))
	lines = lines[:len(lines)-1] // the part after the last newline is never a line
	for i, line := range lines {
		if seq, ok := decodes(line); ok && seq == uint64(n+1+i) {
			return true
		}
	}
	return false
}

func decodes(line []byte) (uint64, bool) {
	var ev messages.PersistedEvent
	if len(line) == 0 || len(line) > store.MaxEventBytes || json.Unmarshal(line, &ev) != nil || ev.Seq == 0 {
		return 0, false
	}
	return ev.Seq, true
}

// FuzzWALReplay writes the write-ahead log a crash may leave: whole frames
// (events 1-8), then where the next group was being written either a hole
// of zeros followed by any bytes (the group's first page never reached the
// disk, later pages did: whole frames among them), or that group's frame
// (events 9-10) torn at any point and followed by any bytes. Open must
// replay exactly the frames before the first that does not hold (the torn
// one counts as whole only when the bytes after it complete it exactly),
// appends must continue after them, and nothing past them may come back
// after the next crash.
func FuzzWALReplay(f *testing.F) {
	evs := storetest.NewEvents(1, 10)
	var first, second []byte
	for _, ev := range evs[:8] {
		first = append(first, encodeLine(f, ev)...)
	}
	for _, ev := range evs[8:] {
		second = append(second, encodeLine(f, ev)...)
	}
	sid := messages.NewSessionID() // every run's session: the seeds hold its frames
	next := filestore.EncodeEventsFrame(sid, second)
	f.Add(false, uint16(0), []byte{})
	f.Add(false, uint16(100), next)
	f.Add(false, uint16(1), append(next, next...))
	f.Add(true, uint16(0), next)
	f.Add(true, uint16(7), next[7:])
	f.Add(true, uint16(len(next)-1), next[len(next)-1:])
	f.Add(true, uint16(3), []byte("\x00\x00\x00"))
	f.Add(true, uint16(8), make([]byte, 64))

	f.Fuzz(func(t *testing.T, torn bool, n uint16, tail []byte) {
		ctx := context.Background()
		home := fastTempDir(t)
		quiet := filestore.WithLogger(slog.New(slog.DiscardHandler))
		st, err := filestore.Open(home, filestore.WithoutSync(), quiet)
		require.NoError(t, err)
		rec := storetest.NewRecord(time.Now())
		rec.SessionID = sid
		require.NoError(t, st.Create(ctx, rec))
		require.NoError(t, st.Close())
		// the log as a crash left it: frames written by hand after what
		// Close left in it (its records carried forward, or nothing)
		wal := filepath.Join(home, "wal", "log")
		log, err := os.ReadFile(wal)
		require.NoError(t, err)
		log = bytes.TrimRight(log, "\x00")
		log = append(log, filestore.EncodeEventsFrame(sid, first)...)
		whole := next
		var want uint64 = 8
		if torn {
			cut := int(n) % len(whole)
			if bytes.HasPrefix(tail, whole[cut:]) {
				want = 10 // the tail completes the frame: it was written whole
			}
			log = append(append(log, whole[:cut]...), tail...)
		} else {
			log = append(append(log, make([]byte, 8+int(n)%4096)...), tail...)
		}
		require.NoError(t, os.WriteFile(wal, log, 0o600))

		st, err = filestore.Open(home, filestore.WithoutSync(), quiet)
		require.NoError(t, err)
		last, err := st.LastSeq(ctx, sid)
		require.NoError(t, err)
		require.Equal(t, want, last)
		require.NoError(t, st.Append(ctx, sid, storetest.NewEvents(want+1, 1)), "appends continue after the replayed frames")
		got, err := st.ReadEvents(ctx, sid, 0, 0)
		require.NoError(t, err)
		require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, int(want)+1)), storetest.NormalizeEvents(got))
		require.NoError(t, st.Close())

		st = open(t, home, filestore.WithoutSync(), quiet)
		last, err = st.LastSeq(ctx, sid)
		require.NoError(t, err)
		require.Equal(t, want+1, last, "nothing past the replayed frames came back")
	})
}
