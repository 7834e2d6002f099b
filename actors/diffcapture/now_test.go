package diffcapture

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// BeginNow and FinishNow answer, with no git run, exactly when the witness
// holds and the answer needs no git; otherwise they do nothing and Begin
// and Finish take their way.
func TestBeginNowAndFinishNowRunNoGit(t *testing.T) {
	r := witnessRepo(t)
	cg := newCountingGit(t)
	g := witnessed(t, r, cg)
	ctx := testCtx(t)

	// a clean turn: the baseline is the current snapshot, the diff empty
	b, _, ok := g.BeginNow()
	require.True(t, ok, "the witness holds")
	assert.Same(t, g.sc.cur, b.(*gitBaseline).snap, "the baseline Begin would take")
	d, _, ok := g.FinishNow(b, nil)
	require.True(t, ok)
	assert.Equal(t, messages.DiffGit, d.Source)
	assert.Empty(t, d.Files)
	assert.Nil(t, cg.take(t), "neither ran git")

	// a change and no Prepare: FinishNow cannot say, Finish can
	b, _, ok = g.BeginNow()
	require.True(t, ok)
	r.write("a.txt", "changed\n")
	_, _, ok = g.FinishNow(b, nil)
	assert.False(t, ok, "the witness no longer holds")
	assert.Nil(t, cg.take(t))
	d = g.Finish(ctx, b, nil)
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "a.txt", Status: "M", Insertions: 1, Deletions: 1}}, d.Files)
	_, _, ok = g.BeginNow()
	assert.False(t, ok, "no witness until Settle makes one")
	g.Settle(ctx)
	_ = cg.take(t)

	// a change that Prepare diffed: FinishNow hands out Prepare's diff,
	// and leaves Settle the tree of the snapshot Prepare took
	b, settle, ok := g.BeginNow()
	require.True(t, ok)
	assert.False(t, settle, "nothing left to settle before the turn")
	r.write("new.txt", "n\n")
	g.prepEnd = time.Time{}
	g.Prepare(ctx, b)
	_ = cg.take(t)
	d, settle, ok = g.FinishNow(b, nil)
	require.True(t, ok)
	assert.Nil(t, cg.take(t))
	assert.Equal(t, []messages.FileChange{{Path: "new.txt", Status: "A", Insertions: 1}}, d.Files)
	assert.True(t, settle, "the next baseline's tree is still to write")
	g.Settle(ctx)
	assert.Equal(t, []string{"write-tree"}, cg.take(t))
	b, settle, ok = g.BeginNow()
	require.True(t, ok)
	assert.False(t, settle)

	// not while someone holds the snapshot (a Settle's add): never waited for
	g.smu.Lock()
	_, _, ok = g.BeginNow()
	assert.False(t, ok)
	_, _, ok = g.FinishNow(b, nil)
	assert.False(t, ok)
	g.smu.Unlock()

	// baselines of another kind are Finish's
	for _, other := range []Baseline{nil, "x", &gitBaseline{kind: kindBroken, why: "no"}} {
		_, _, ok = g.FinishNow(other, nil)
		assert.False(t, ok, "%v", other)
	}
	d, _, ok = g.FinishNow(b, nil)
	require.True(t, ok)
	assert.Empty(t, d.Files)

	// a config changed: discovery runs again, which is Begin's to do
	r.git("config", "core.quotePath", "false")
	_, _, ok = g.BeginNow()
	assert.False(t, ok, "the cached discovery is stale")
	assert.Nil(t, cg.take(t))
}

// A witness of more paths than a caller's turn should wait on stat calls
// for is left to Begin and Finish (on the differ's goroutine).
func TestBeginNowLeavesABigWorkTreeToBegin(t *testing.T) {
	r := newRepo(t)
	for i := range nowMaxPaths + 1 {
		r.write(fmt.Sprintf("f%03d.txt", i), "x\n")
	}
	r.commitAll("many")
	cg := newCountingGit(t)
	g := witnessed(t, r, cg)
	_, _, ok := g.BeginNow()
	assert.False(t, ok)
	b, err := g.Begin(testCtx(t))
	require.NoError(t, err)
	assert.Nil(t, cg.take(t), "Begin still runs no git: the witness holds")
	_, _, ok = g.FinishNow(b, nil)
	assert.False(t, ok)
}

// In a directory git found no repository around, BeginNow and FinishNow
// answer as Begin and Finish would (the tool-event fallback, from the
// turn's edit paths) with no git run, until a repository appears.
func TestBeginNowAndFinishNowWithNoRepository(t *testing.T) {
	requireGit(t)
	dir := t.TempDir()
	cg := newCountingGit(t)
	g := NewGit(dir, WithGitBinary(cg.bin))
	_, _, ok := g.BeginNow()
	assert.False(t, ok, "not before git was asked once")
	capture(t, g, nil)
	assert.Equal(t, []string{"rev-parse"}, cg.take(t))

	b, settle, ok := g.BeginNow()
	require.True(t, ok)
	assert.False(t, settle)
	d, settle, ok := g.FinishNow(b, []string{filepath.Join(dir, "x.txt"), "y.txt"})
	require.True(t, ok)
	assert.False(t, settle)
	assert.Equal(t, ToolEventDiff(dir, []string{filepath.Join(dir, "x.txt"), "y.txt"}, DefaultMaxFiles, whyNoRepository), d)
	assert.Equal(t, []messages.FileChange{{Path: "x.txt", Status: "M"}, {Path: "y.txt", Status: "M"}}, d.Files)
	b, _, ok = g.BeginNow()
	require.True(t, ok)
	d, _, ok = g.FinishNow(b, nil)
	require.True(t, ok)
	assert.Equal(t, messages.DiffNone, d.Source)
	assert.Nil(t, cg.take(t), "no git run")

	out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput()
	require.NoError(t, err, "%s", out)
	_, _, ok = g.BeginNow()
	assert.False(t, ok, "a repository appeared: Begin's to find")
}
