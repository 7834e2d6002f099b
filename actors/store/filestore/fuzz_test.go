package filestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
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
