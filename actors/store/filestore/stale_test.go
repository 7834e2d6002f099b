package filestore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/storetest"
)

// TestWALStaleFrameAfterTheEndIsNeverReplayed: a whole, checksummed frame
// that a crash left past a hole (its group's earlier pages never reached
// the disk) was never acknowledged, and is never replayed: the log ends at
// the first frame that does not hold. Nor is it ever read later: Open
// empties the log, so the next frames are not written in front of it.
func TestWALStaleFrameAfterTheEndIsNeverReplayed(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	wal := filepath.Join(home, "wal", "log")
	st := crashed(t, home)
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, st.Create(ctx, rec))
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(1, 5)))
	e0 := walEnd(t, wal)
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(6, 5)))
	e1 := walEnd(t, wal)
	require.NoError(t, st.Append(ctx, rec.SessionID, storetest.NewEvents(11, 5)))
	e2 := walEnd(t, wal)
	data, err := os.ReadFile(wal)
	require.NoError(t, err)
	require.Less(t, e0, e1)
	// the crash: the frame of 6-10 never reached the disk (zeros where it
	// was written), the frame of 11-15 after it did, whole
	hole := append(append([]byte(nil), data[:e0]...), make([]byte, e1-e0)...)
	hole = append(hole, data[e1:e2]...)
	require.NoError(t, os.WriteFile(wal, hole, 0o600))
	st2 := crashed(t, home)
	last, err := st2.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, uint64(5), last, "nothing after the hole is replayed")
	require.NoError(t, st2.Append(ctx, rec.SessionID, storetest.NewEvents(6, 3)), "appends continue gaplessly")

	st3 := open(t, home) // after a second crash
	last, err = st3.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, uint64(8), last, "the stale frame of 11-15 never comes back")
	got, err := st3.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, 8)), storetest.NormalizeEvents(got))
}
