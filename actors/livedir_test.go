package actors

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// TestStartSeesTheLiveSessionsOfItsDirectory: a start is warned (or, with
// exclusive, refused) about the live sessions working in its directory, or
// below or above it, and only those: the registry answers from the working
// directory each live session was spawned with.
func TestStartSeesTheLiveSessionsOfItsDirectory(t *testing.T) {
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, testConfig(t), sc)
	ctx := ctxT(t)
	root := t.TempDir()
	dir, sub, sibling := filepath.Join(root, "a"), filepath.Join(root, "a", "b"), filepath.Join(root, "ab")
	for _, d := range []string{dir, sub, sibling} {
		require.NoError(t, mkdir(d))
	}
	first, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: dir})
	require.NoError(t, err)
	assert.Empty(t, first.Warnings)

	for _, d := range []string{dir, sub, root} {
		st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: d})
		require.NoError(t, err, d)
		require.Len(t, st.Warnings, 1, d)
		assert.Contains(t, st.Warnings[0], "other live session(s) work in "+d)
		_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
		require.NoError(t, err)
		_, err = rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: d, Exclusive: true})
		assert.Equal(t, messages.CodeConflict, messages.AsError(messages.OpStart, err).Code, d)
	}
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: sibling, Exclusive: true})
	require.NoError(t, err, "a sibling whose name only starts like it")
	assert.Empty(t, st.Warnings)

	_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: first.SessionID})
	require.NoError(t, err)
	_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	st, err = rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: dir, Exclusive: true})
	require.NoError(t, err, "the stopped sessions no longer count")
	assert.Empty(t, st.Warnings)
}

func mkdir(d string) error { return os.MkdirAll(d, 0o700) }

// metaReads counts record reads.
type metaReads struct {
	store.Store
	n atomic.Int64
}

func (m *metaReads) GetMeta(ctx context.Context, sid string) (messages.SessionRecord, error) {
	m.n.Add(1)
	return m.Store.GetMeta(ctx, sid)
}

// TestStartReadsNoRecordPerLiveSession: the directory check of a start
// does not read the record of every live session (on the old code the
// 40 starts below read 859 records, N^2/2 and more; at 10,000 sessions
// that is 50 million reads on the sessions path).
func TestStartReadsNoRecordPerLiveSession(t *testing.T) {
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	mr := &metaReads{Store: store.NewMemory()}
	rt := newRuntime(t, testConfig(t), sc, WithStore(mr))
	ctx := ctxT(t)
	const n = 40
	for range n {
		_, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
		require.NoError(t, err)
	}
	assert.Less(t, mr.n.Load(), int64(3*n), "record reads for %d starts: a few each, not one per live session", n)
}
