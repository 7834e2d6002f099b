package diffcapture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// What the session snapshot relies on git for: add -v prints nothing for a
// change of stat data alone (the snapshot's tree is then reused), a line
// for a change of content.
func TestStatOnlyChangeIsNoChange(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	cg := newCountingGit(t)
	g := NewGit(r.dir, WithGitBinary(cg.bin))
	_, d := countedTurn(t, g, cg, func() { r.write("a.txt", "a\nb\n") })
	require.Len(t, d.Files, 1)

	// between turns: the same content written again, and a later mtime
	r.write("a.txt", "a\nb\n")
	later := time.Now().Add(2 * time.Second)
	require.NoError(t, os.Chtimes(r.path("a.txt"), later, later))
	runs, d := countedTurn(t, g, cg, nil)
	require.Empty(t, d.Warning)
	assert.Empty(t, d.Files)
	assert.Equal(t, runsOfTurn{begin: []string{"add"}, finish: []string{"add"}}, runs,
		"a touched file is no change: the last snapshot's tree is the baseline (and, dated ahead of the clock, no witness vouches for it)")

	// a change of content between turns is not the turn's; the turn's is
	r.write("a.txt", "a\nb\nbetween\n")
	runs, d = countedTurn(t, g, cg, func() { r.write("a.txt", "a\nb\nbetween\nturn\n") })
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, messages.FileChange{Path: "a.txt", Status: "M", Insertions: 1}, d.Files[0])
	assert.Equal(t, []string{"write-tree", "add"}, runs.afterBegin, "the baseline's tree, and the witness")
}

// A path the snapshot holds that an ignore rule covers later stays out
// from the turn after, as with status -uall; in the turn that adds the
// rule, a file already untracked at Begin still shows its change.
func TestFileIgnoredLaterStaysOut(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	g := NewGit(r.dir)
	d := capture(t, g, func() { r.write("notes.log", "1\n") })
	require.Equal(t, []messages.FileChange{{Path: "notes.log", Status: "A", Insertions: 1}}, d.Files)

	d = capture(t, g, func() {
		r.write(".gitignore", "*.log\n")
		r.write("notes.log", "1\n2\n")
	})
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{
		{Path: ".gitignore", Status: "A", Insertions: 1},
		{Path: "notes.log", Status: "M", Insertions: 1},
	}, d.Files)

	d = capture(t, g, func() {
		r.write("notes.log", "1\n2\n3\n")
		r.remove("a.txt")
	})
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "a.txt", Status: "D", Deletions: 1}}, d.Files)

	// a rule added between turns: seen at the next Begin
	r.write("keep.tmp", "k\n")
	d = capture(t, g, func() { r.write("other.txt", "o\n") })
	require.Len(t, d.Files, 1)
	r.write(".gitignore", "*.log\n*.tmp\n")
	d = capture(t, g, func() { r.write("keep.tmp", "k\nchanged\n") })
	require.Empty(t, d.Warning)
	assert.Empty(t, d.Files)
}

// A repository with a gitlink in its index takes the status way: refreshing
// a gitlink, add would run git status inside the submodule, under that
// repository's own configuration. A nested repository the agent makes is
// an addition (a gitlink), and later turns take the status way too; no git
// ever runs inside it.
func TestGitlinkTakesTheStatusWay(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	cg := newCountingGit(t)
	// git finds the wrapper on PATH too: a git that git itself starts is
	// logged
	t.Setenv("PATH", filepath.Dir(cg.bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	g := NewGit(r.dir, WithGitBinary(cg.bin))
	var sub *testRepo
	runs, d := countedTurn(t, g, cg, func() {
		sub = r.nested("sub")
		_ = cg.take(t) // the test's own runs
	})
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, "sub", d.Files[0].Path)
	assert.Equal(t, "A", d.Files[0].Status)
	assert.Equal(t, []string{"add", "diff-index"}, runs.finish)

	for turn := range 2 {
		runs, d = countedTurn(t, g, cg, func() {
			r.write("a.txt", "a\n"+strings.Repeat("x\n", turn+1))
			sub.write("s.txt", "dirty inside\n")
		})
		require.Empty(t, d.Warning)
		assert.Equal(t, []messages.FileChange{{Path: "a.txt", Status: "M", Insertions: 1}}, d.Files)
		assert.NotContains(t, runs.begin, "add", "turn %d", turn)
		assert.Equal(t, 1, count(runs.begin, "status"), "turn %d: Begin's own status only, none inside the submodule", turn)
		assert.Equal(t, 1, count(runs.finish, "status"), "turn %d", turn)
		assert.Empty(t, runs.afterBegin, "turn %d: no snapshot to settle", turn)
		assert.Empty(t, runs.afterFinish, "turn %d", turn)
	}
}

// nested makes a repository with one commit at p inside r's work tree
// (r sees it as a gitlink once added).
func (r *testRepo) nested(p string) *testRepo {
	r.tb.Helper()
	sub := &testRepo{tb: r.tb, dir: r.path(p)}
	require.NoError(r.tb, os.MkdirAll(sub.dir, 0o755))
	sub.git("init", "-q", "-b", "main")
	sub.git("config", "user.name", "Sub")
	sub.git("config", "user.email", "sub@test.invalid")
	sub.write("s.txt", "s\n")
	sub.commitAll("sub")
	return sub
}

func count(runs []string, cmd string) int {
	n := 0
	for _, r := range runs {
		if r == cmd {
			n++
		}
	}
	return n
}

// The index parser finds gitlinks in every index version git writes, and
// reports a split index as possibly holding one.
func TestParseIndexGitlinks(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.write("dir/b.txt", "b\n")
	r.commitAll("init")
	read := func() []byte {
		b, err := os.ReadFile(r.path(".git/index"))
		require.NoError(t, err)
		return b
	}
	for _, v := range []string{"2", "3", "4"} {
		r.git("update-index", "--index-version", v)
		r.write("ita.txt", "i\n")
		r.git("add", "-N", "ita.txt") // an extended flag (version 3 and up)
		has, err := parseIndexGitlinks(read(), 20)
		require.NoError(t, err, "version %s", v)
		assert.False(t, has, "version %s", v)
		var names []string
		_, err = walkIndex(read(), 20, func(e indexEntry) bool { names = append(names, string(e.name)); return true })
		require.NoError(t, err, "version %s", v)
		assert.Equal(t, []string{"a.txt", "dir/b.txt", "ita.txt"}, names, "version %s", v)
		r.git("update-index", "--add", "--cacheinfo", "160000,"+strings.TrimSpace(r.git("rev-parse", "HEAD"))+",zz/link")
		has, err = parseIndexGitlinks(read(), 20)
		require.NoError(t, err, "version %s", v)
		assert.True(t, has, "version %s", v)
		r.git("rm", "-q", "--cached", "zz/link")
		r.git("rm", "-q", "--cached", "ita.txt")
	}
	r.git("update-index", "--split-index")
	has, err := parseIndexGitlinks(read(), 20)
	require.NoError(t, err)
	assert.True(t, has, "a split index may hold one in its shared part")
	r.git("update-index", "--no-split-index")

	for _, bad := range [][]byte{nil, []byte("DIRC"), append([]byte("DIRC\x00\x00\x00\x09\x00\x00\x00\x00"), make([]byte, 20)...)} {
		_, err := parseIndexGitlinks(bad, 20)
		assert.Error(t, err)
	}
}

// Settle runs beside the next turn's Begin and Finish, as the differ runs
// it: each turn's diff is still that turn's alone.
func TestSettleBesideTheNextTurn(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "0\n")
	r.commitAll("init")
	g := NewGit(r.dir)
	ctx := testCtx(t)
	var settles sync.WaitGroup
	defer settles.Wait()
	content := "0\n"
	for turn := 1; turn <= 6; turn++ {
		if turn%2 == 0 {
			content += "between " + strconv.Itoa(turn) + "\n"
			r.write("a.txt", content)
		}
		b, err := g.Begin(ctx)
		require.NoError(t, err)
		settles.Go(func() { g.Settle(ctx) })
		content += "turn " + strconv.Itoa(turn) + "\n"
		r.write("a.txt", content)
		r.write("n"+strconv.Itoa(turn)+".txt", "new\n")
		d := g.Finish(ctx, b, nil)
		settles.Go(func() { g.Settle(ctx) })
		require.Empty(t, d.Warning, "turn %d", turn)
		assert.Equal(t, []messages.FileChange{
			{Path: "a.txt", Status: "M", Insertions: 1},
			{Path: "n" + strconv.Itoa(turn) + ".txt", Status: "A", Insertions: 1},
		}, d.Files, "turn %d", turn)
	}
}

// A file staged past .gitignore during the turn (git add -f) is an
// addition, as status reports it; add -A alone would not see it.
func TestFileForceAddedDuringTheTurn(t *testing.T) {
	r := newRepo(t)
	r.write(".gitignore", "*.log\nbuild/\n")
	r.write("a.txt", "a\n")
	r.commitAll("init")
	cg := newCountingGit(t)
	g := NewGit(r.dir, WithGitBinary(cg.bin))
	runs, d := countedTurn(t, g, cg, func() {
		r.write("keep.log", "kept\n")
		r.write("build/out.txt", "out\n")
		r.write("other.log", "not staged\n")
		r.git("add", "-f", "keep.log", "build/out.txt")
	})
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{
		{Path: "build/out.txt", Status: "A", Insertions: 1},
		{Path: "keep.log", Status: "A", Insertions: 1},
	}, d.Files)
	assert.Equal(t, []string{"add", "add -f", "diff-index"}, runs.finish)

	// from then on the snapshot holds them: a change shows, one add again
	runs, d = countedTurn(t, g, cg, func() { r.write("keep.log", "kept\nmore\n") })
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "keep.log", Status: "M", Insertions: 1}}, d.Files)
	assert.Equal(t, []string{"add", "diff-index"}, runs.finish)
}

// countingScratch is a ScratchDirs that makes its folders under root and
// counts the folders it made and the ones removed (a folder's remove may
// run more than once: a baseline's or a capture's cleanup runs it again
// when the collector gets to it).
type countingScratch struct {
	root string
	made atomic.Int32

	mu      sync.Mutex
	removed map[string]bool
}

func (c *countingScratch) mk() (string, func(), error) {
	dir, err := os.MkdirTemp(c.root, "scratch-")
	if err != nil {
		return "", nil, err
	}
	c.made.Add(1)
	return dir, func() {
		c.mu.Lock()
		if c.removed == nil {
			c.removed = map[string]bool{}
		}
		c.removed[dir] = true
		c.mu.Unlock()
		_ = os.RemoveAll(dir)
	}, nil
}

// removals is how many of the folders made were removed through the maker.
func (c *countingScratch) removals() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int32(len(c.removed))
}

func (c *countingScratch) left(t *testing.T) int {
	ents, err := os.ReadDir(c.root)
	require.NoError(t, err)
	return len(ents)
}

// A capture makes its scratch folders with the maker it is given (the
// runtime's records them for the boot sweep) and removes them with its
// remove: the session's snapshot at Close, the status way's per-turn
// folder at Finish.
func TestScratchFoldersComeFromTheMaker(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	sc := &countingScratch{root: t.TempDir()}
	g := NewGit(r.dir, WithScratchDirs(sc.mk))
	ctx := context.Background()
	b, err := g.Begin(ctx)
	require.NoError(t, err)
	r.write("a.txt", "a\nb\n")
	d := g.Finish(ctx, b, nil)
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, int32(1), sc.made.Load(), "the session's snapshot")
	assert.Equal(t, 1, sc.left(t), "kept between turns")
	require.NoError(t, g.Close())
	assert.Equal(t, int32(1), sc.removals())
	assert.Equal(t, 0, sc.left(t))

	// the status way (a gitlink in the work tree): a folder per turn,
	// made through UseScratchDirs, gone once the turn is diffed
	r.nested("sub")
	r.git("add", "sub")
	r.commitAll("with a gitlink")
	sc2 := &countingScratch{root: t.TempDir()}
	g2 := NewGit(r.dir)
	g2.UseScratchDirs(sc2.mk)
	for turn := range 2 {
		r.write("a.txt", strings.Repeat("x\n", turn+1)) // dirty before the turn: status reports it
		b, err := g2.Begin(ctx)
		require.NoError(t, err)
		r.write("a.txt", strings.Repeat("y\n", turn+1))
		d := g2.Finish(ctx, b, nil)
		require.Empty(t, d.Warning, "turn %d", turn)
		require.Len(t, d.Files, 1, "turn %d", turn)
	}
	require.NoError(t, g2.Close())
	assert.GreaterOrEqual(t, sc2.made.Load(), int32(1+2), "the snapshot seeded, then a folder per turn the status way: all from the maker")
	assert.Equal(t, sc2.made.Load(), sc2.removals(), "every folder made was removed through the maker")
	assert.Equal(t, 0, sc2.left(t))
}

// A Close while the turn's Settle writes into the snapshot's folder (the
// session stopped right after its turn) leaves no folder: Settle writes
// without the snapshot's lock, so git could write there, or make it anew,
// after Close removed it; Settle removes it again once it sees the
// snapshot dropped.
func TestCloseBesideSettleLeavesNoFolder(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	ctx := context.Background()
	for i := range 40 {
		sc := &countingScratch{root: t.TempDir()}
		g := NewGit(r.dir, WithScratchDirs(sc.mk))
		b, err := g.Begin(ctx)
		require.NoError(t, err)
		r.write("a.txt", fmt.Sprintf("a\n%d\n", i))
		d := g.Finish(ctx, b, nil)
		require.Empty(t, d.Warning)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); g.Settle(ctx) }()
		go func() {
			defer wg.Done()
			// a little later each round: Close lands before, during and
			// after Settle's write
			time.Sleep(time.Duration(i%8) * 250 * time.Microsecond)
			_ = g.Close()
		}()
		wg.Wait()
		assert.Equal(t, 0, sc.left(t), "round %d: a folder outlived Close and Settle", i)
	}
}
