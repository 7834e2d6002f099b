package diffcapture

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// capture runs one turn: Begin, the turn's edits, Finish.
func capture(t *testing.T, g *Git, turn func(), editPaths ...string) messages.TurnDiff {
	t.Helper()
	ctx := testCtx(t)
	b, err := g.Begin(ctx)
	require.NoError(t, err)
	if turn != nil {
		turn()
	}
	return g.Finish(ctx, b, editPaths)
}

func TestGitCapture(t *testing.T) {
	requireGit(t)
	abc := "one\ntwo\nthree\n"
	long := lines("line", 20)
	cases := []struct {
		name  string
		setup func(r *testRepo) // committed state, and what is dirty before the turn
		turn  func(r *testRepo)
		want  []messages.FileChange
		// substrings the unified diff must and must not hold
		has, hasNot []string
		summary     string
	}{
		{
			name:    "modify",
			turn:    func(r *testRepo) { r.write("a.txt", "one\n2\nthree\nfour\n") },
			want:    []messages.FileChange{{Path: "a.txt", Status: "M", Insertions: 2, Deletions: 1}},
			has:     []string{"diff --git a/a.txt b/a.txt", "-two\n", "+2\n", "+four\n"},
			summary: "1 file changed, 2 insertions(+), 1 deletion(-)",
		},
		{
			name: "add tracked and untracked",
			turn: func(r *testRepo) {
				r.write("staged.txt", "s\n")
				r.git("add", "staged.txt")
				r.write("dir/untracked.txt", "u\nv\n")
			},
			want: []messages.FileChange{
				{Path: "dir/untracked.txt", Status: "A", Insertions: 2},
				{Path: "staged.txt", Status: "A", Insertions: 1},
			},
			has:     []string{"new file mode 100644", "+++ b/dir/untracked.txt", "+++ b/staged.txt"},
			summary: "2 files changed, 3 insertions(+)",
		},
		{
			name:    "delete",
			turn:    func(r *testRepo) { r.remove("a.txt") },
			want:    []messages.FileChange{{Path: "a.txt", Status: "D", Deletions: 3}},
			has:     []string{"deleted file mode 100644", "-one\n"},
			summary: "1 file changed, 3 deletions(-)",
		},
		{
			name:  "git mv rename",
			setup: func(r *testRepo) { r.write("old.txt", long); r.commitAll("old") },
			turn:  func(r *testRepo) { r.git("mv", "old.txt", "new.txt") },
			want:  []messages.FileChange{{Path: "new.txt", OldPath: "old.txt", Status: "R"}},
			has:   []string{"rename from old.txt\nrename to new.txt"},
		},
		{
			name:  "plain mv is a rename too, with an edit",
			setup: func(r *testRepo) { r.write("old.txt", long); r.commitAll("old") },
			turn: func(r *testRepo) {
				r.remove("old.txt")
				r.write("sub/moved.txt", long+"extra\n")
			},
			want: []messages.FileChange{{Path: "sub/moved.txt", OldPath: "old.txt", Status: "R", Insertions: 1}},
		},
		{
			name: "mid-turn commits are folded in",
			turn: func(r *testRepo) {
				r.write("a.txt", abc+"four\n")
				r.write("c.txt", "c\n")
				r.commitAll("agent commit")
				r.write("d.txt", "d\n")
				r.git("add", "d.txt")
				r.git("commit", "-q", "-m", "second agent commit")
			},
			want: []messages.FileChange{
				{Path: "a.txt", Status: "M", Insertions: 1},
				{Path: "c.txt", Status: "A", Insertions: 1},
				{Path: "d.txt", Status: "A", Insertions: 1},
			},
		},
		{
			name: "a commit then a reset back shows nothing",
			turn: func(r *testRepo) {
				r.write("a.txt", "changed\n")
				r.commitAll("oops")
				r.git("reset", "-q", "--hard", "HEAD~1")
			},
			want:    []messages.FileChange{},
			summary: "no changes",
		},
		{
			name: "already dirty before the turn: only the turn's change shows",
			setup: func(r *testRepo) {
				r.write("a.txt", abc+"dirty before\n") // modified, unstaged
				r.write("b.txt", "staged before\n")    // staged addition
				r.git("add", "b.txt")
				r.write("notes.txt", "untracked before\n") // untracked
			},
			turn: func(r *testRepo) {
				r.write("a.txt", abc+"dirty before\nby the turn\n")
				r.write("notes.txt", "untracked before\nand the turn\n")
			},
			want: []messages.FileChange{
				{Path: "a.txt", Status: "M", Insertions: 1},
				{Path: "notes.txt", Status: "M", Insertions: 1},
			},
			has:    []string{"+by the turn\n", "+and the turn\n"},
			hasNot: []string{"+dirty before", "+untracked before", "b.txt"},
		},
		{
			name: "a dirty file reverted and a dirty untracked file deleted",
			setup: func(r *testRepo) {
				r.write("a.txt", abc+"dirty before\n")
				r.write("scratch.txt", "x\ny\n")
			},
			turn: func(r *testRepo) {
				r.git("checkout", "--", "a.txt")
				r.remove("scratch.txt")
			},
			want: []messages.FileChange{
				{Path: "a.txt", Status: "M", Deletions: 1},
				{Path: "scratch.txt", Status: "D", Deletions: 2},
			},
			has: []string{"-dirty before\n"},
		},
		{
			name: "binary",
			turn: func(r *testRepo) { r.write("img.bin", "\x00\x01\x02PNG\x00") },
			want: []messages.FileChange{{Path: "img.bin", Status: "A", Binary: true}},
			has:  []string{"Binary files /dev/null and b/img.bin differ"},
		},
		{
			name: "names with spaces, non-ASCII, a newline and a backslash",
			turn: func(r *testRepo) {
				r.write("with space.txt", "s\n")
				r.write("ünïcödé 文件.txt", "u\n")
				r.write("new\nline.txt", "n\n")
				r.write(`back\slash.txt`, "b\n")
				r.write("a.txt", "one\n")
			},
			want: []messages.FileChange{
				{Path: "a.txt", Status: "M", Deletions: 2},
				{Path: `back\slash.txt`, Status: "A", Insertions: 1},
				{Path: "new\nline.txt", Status: "A", Insertions: 1},
				{Path: "with space.txt", Status: "A", Insertions: 1},
				{Path: "ünïcödé 文件.txt", Status: "A", Insertions: 1},
			},
			has: []string{"b/ünïcödé 文件.txt"},
		},
		{
			name: "a file replaced by a directory",
			turn: func(r *testRepo) {
				r.remove("a.txt")
				r.write("a.txt/inner.txt", "i\n")
			},
			want: []messages.FileChange{
				{Path: "a.txt", Status: "D", Deletions: 3},
				{Path: "a.txt/inner.txt", Status: "A", Insertions: 1},
			},
		},
		{
			name: "symlink added",
			turn: func(r *testRepo) {
				require.NoError(r.tb, os.Symlink("a.txt", r.path("link")))
			},
			want: []messages.FileChange{{Path: "link", Status: "A", Insertions: 1}},
			has:  []string{"new file mode 120000"},
		},
		{
			name:    "no changes",
			want:    []messages.FileChange{},
			summary: "no changes",
		},
		{
			name: "ignored files stay out",
			setup: func(r *testRepo) {
				r.write(".gitignore", "*.log\n")
				r.commitAll("ignore")
			},
			turn: func(r *testRepo) { r.write("build.log", "noise\n") },
			want: []messages.FileChange{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t)
			r.write("a.txt", abc)
			r.commitAll("init")
			if tc.setup != nil {
				tc.setup(r)
			}
			d := capture(t, NewGit(r.dir), func() {
				if tc.turn != nil {
					tc.turn(r)
				}
			}, "ignored-by-git.txt")
			require.Empty(t, d.Warning)
			assert.Equal(t, messages.DiffGit, d.Source)
			assert.Equal(t, tc.want, d.Files)
			assert.Zero(t, d.FilesOmitted)
			assert.False(t, d.Truncated)
			if tc.summary != "" {
				assert.Equal(t, tc.summary, d.Summary)
			}
			for _, s := range tc.has {
				assert.Contains(t, d.UnifiedDiff, s)
			}
			for _, s := range tc.hasNot {
				assert.NotContains(t, d.UnifiedDiff, s)
			}
			if len(tc.want) == 0 {
				assert.Empty(t, d.UnifiedDiff)
			}
		})
	}
}

func TestCaptureWritesNothingIntoTheRepository(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	r.write("a.txt", "dirty\n")
	r.write("u.txt", "untracked\n")
	scratch := t.TempDir()
	t.Setenv("TMPDIR", scratch)
	before := objectFiles(t, r)
	idx, err := os.Stat(r.path(".git/index"))
	require.NoError(t, err)

	g := NewGit(r.dir)
	ctx := testCtx(t)
	b, err := g.Begin(ctx)
	require.NoError(t, err)
	tmp, err := os.ReadDir(scratch)
	require.NoError(t, err)
	require.Len(t, tmp, 1, "the dirty baseline lives in a scratch directory")
	r.write("a.txt", "dirty\nmore\n")
	r.write("n.txt", "new\n")
	d := g.Finish(ctx, b, nil)
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 2)
	g.Settle(ctx) // the work left for after the answer writes nothing there either

	assert.Equal(t, before, objectFiles(t, r), "no object was written into .git/objects")
	idx2, err := os.Stat(r.path(".git/index"))
	require.NoError(t, err)
	assert.Equal(t, idx.ModTime(), idx2.ModTime(), "the index was not rewritten")
	tmp, err = os.ReadDir(scratch)
	require.NoError(t, err)
	assert.Len(t, tmp, 1, "the session's snapshot stays for the next turn")
	require.NoError(t, g.Close())
	tmp, err = os.ReadDir(scratch)
	require.NoError(t, err)
	assert.Empty(t, tmp, "Close removed the scratch directory")
}

func objectFiles(t *testing.T, r *testRepo) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(r.path(".git/objects"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	require.NoError(t, err)
	return out
}

func TestUnbornHead(t *testing.T) {
	r := newRepo(t)
	r.write("untracked.txt", "u\n")
	r.write("staged.txt", "s\n")
	r.git("add", "staged.txt")
	d := capture(t, NewGit(r.dir), func() {
		r.write("untracked.txt", "u\nmore\n")
		r.write("new.txt", "n\n")
	})
	require.Empty(t, d.Warning)
	assert.Equal(t, messages.DiffGit, d.Source)
	assert.Equal(t, []messages.FileChange{
		{Path: "new.txt", Status: "A", Insertions: 1},
		{Path: "untracked.txt", Status: "M", Insertions: 1},
	}, d.Files)

	// the first commit happens during the turn
	d = capture(t, NewGit(r.dir), func() {
		r.write("staged.txt", "s\nt\n")
		r.commitAll("first")
	})
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "staged.txt", Status: "M", Insertions: 1}}, d.Files)
}

func TestSHA256Repository(t *testing.T) {
	requireGit(t)
	r := &testRepo{tb: t, dir: t.TempDir()}
	if out, err := r.gitErr("init", "-q", "--object-format=sha256"); err != nil {
		subprocesstest.Missing(t, "this git has no sha256 repositories: %s", out)
	}
	r.git("config", "user.name", "t")
	r.git("config", "user.email", "t@t.invalid")
	r.write("a.txt", "a\n")
	d := capture(t, NewGit(r.dir), func() { r.write("a.txt", "a\nb\n"); r.write("b.txt", "b\n") })
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{
		{Path: "a.txt", Status: "M", Insertions: 1},
		{Path: "b.txt", Status: "A", Insertions: 1},
	}, d.Files, "unborn: the empty tree of the sha256 format")
	r.commitAll("init")
	d = capture(t, NewGit(r.dir), func() { r.remove("b.txt") })
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "b.txt", Status: "D", Deletions: 1}}, d.Files)
}

func TestEmptyRepositoryWithoutChanges(t *testing.T) {
	r := newRepo(t)
	d := capture(t, NewGit(r.dir), nil)
	require.Empty(t, d.Warning)
	assert.Equal(t, messages.TurnDiff{Source: messages.DiffGit, Files: []messages.FileChange{}, Summary: "no changes"}, d)
}

func TestSubdirectoryCwdReportsRepositoryPaths(t *testing.T) {
	r := newRepo(t)
	r.write("sub/a.txt", "a\n")
	r.write("top.txt", "t\n")
	r.commitAll("init")
	d := capture(t, NewGit(r.path("sub")), func() {
		r.write("sub/a.txt", "b\n")
		r.write("top.txt", "u\n")
	})
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{
		{Path: "sub/a.txt", Status: "M", Insertions: 1, Deletions: 1},
		{Path: "top.txt", Status: "M", Insertions: 1, Deletions: 1},
	}, d.Files)
}

func TestMergeConflictDuringTheTurn(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "base\n")
	r.commitAll("base")
	r.git("checkout", "-q", "-b", "other")
	r.write("a.txt", "theirs\n")
	r.commitAll("theirs")
	r.git("checkout", "-q", "main")
	r.write("a.txt", "ours\n")
	r.commitAll("ours")
	d := capture(t, NewGit(r.dir), func() {
		_, err := r.gitErr("merge", "-q", "other")
		require.Error(t, err, "the merge conflicts")
	})
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, "a.txt", d.Files[0].Path)
	assert.Equal(t, "M", d.Files[0].Status)
	assert.Contains(t, d.UnifiedDiff, "+<<<<<<< HEAD")
	assert.Contains(t, d.UnifiedDiff, "+theirs\n")
}

func TestDiffOverTheCapIsTruncated(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	big := lines(strings.Repeat("x", 90), 2000) // ~190 KiB
	d := capture(t, NewGit(r.dir), func() {
		r.write("big.txt", big)
		r.write("small.txt", "s\n")
	})
	require.Empty(t, d.Warning)
	assert.True(t, d.Truncated)
	assert.LessOrEqual(t, len(d.UnifiedDiff), DefaultMaxDiffBytes)
	assert.Greater(t, len(d.UnifiedDiff), DefaultMaxDiffBytes-2048, "the cap is used, not wasted")
	assert.True(t, strings.HasSuffix(d.UnifiedDiff, truncMarker(DefaultMaxDiffBytes)), "ends with the marker line")
	assert.True(t, strings.HasPrefix(d.UnifiedDiff, "diff --git a/big.txt b/big.txt\n"))
	assert.Equal(t, []messages.FileChange{
		{Path: "big.txt", Status: "A", Insertions: 2000},
		{Path: "small.txt", Status: "A", Insertions: 1},
	}, d.Files, "the file list and counts cover what the diff left out")
	assert.Equal(t, "2 files changed, 2001 insertions(+)", d.Summary)

	// just under the cap: no truncation, no marker
	g := NewGit(r.dir, WithMaxDiffBytes(1<<20))
	d = capture(t, g, func() { r.write("big.txt", big+"more\n") })
	require.Empty(t, d.Warning)
	assert.False(t, d.Truncated)
	assert.NotContains(t, d.UnifiedDiff, "[diff truncated")
}

func TestFileListCap(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	d := capture(t, NewGit(r.dir), func() {
		for i := range 250 {
			r.write(fmt.Sprintf("gen/f%03d.txt", i), "x\n")
		}
	})
	require.Empty(t, d.Warning)
	assert.Len(t, d.Files, DefaultMaxFiles)
	assert.Equal(t, 50, d.FilesOmitted)
	assert.Equal(t, "gen/f000.txt", d.Files[0].Path)
	assert.Equal(t, "250 files changed, 250 insertions(+)", d.Summary, "the summary covers the omitted files")

	d = capture(t, NewGit(r.dir, WithMaxFiles(1000)), func() { r.write("gen/f000.txt", "y\n") })
	assert.Len(t, d.Files, 1)
	assert.Zero(t, d.FilesOmitted, "a cap that did not fire is not reported")
}

func TestTenThousandFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 10,000-file repository")
	}
	r := newRepo(t)
	r.generate(10_000)
	r.write("pkg005/f0500.go", "dirty before the turn\n")
	d := capture(t, NewGit(r.dir), func() {
		r.write("pkg000/f0000.go", "changed\n")
		r.remove("pkg099/f9999.go")
		r.write("pkg050/new.go", "package p50\n")
	})
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{
		{Path: "pkg000/f0000.go", Status: "M", Insertions: 1, Deletions: 4},
		{Path: "pkg050/new.go", Status: "A", Insertions: 1},
		{Path: "pkg099/f9999.go", Status: "D", Deletions: 4},
	}, d.Files)
}

func TestNonGitDirectoryFallsBackToToolEvents(t *testing.T) {
	requireGit(t)
	dir := t.TempDir()
	g := NewGit(dir)
	d := capture(t, g, func() {}, filepath.Join(dir, "a.txt"), "sub/b.txt", filepath.Join(dir, "a.txt"), "/elsewhere/c.txt")
	assert.Equal(t, messages.DiffToolEvents, d.Source)
	assert.Empty(t, d.Warning, "a fallback is not a failure")
	assert.Equal(t, []messages.FileChange{
		{Path: "a.txt", Status: "M"}, {Path: "sub/b.txt", Status: "M"}, {Path: "/elsewhere/c.txt", Status: "M"},
	}, d.Files)
	assert.Contains(t, d.Summary, "3 files edited")
	assert.Contains(t, d.Summary, "not a git work tree")
	assert.Empty(t, d.UnifiedDiff)

	d = capture(t, g, func() {})
	assert.Equal(t, messages.DiffNone, d.Source)
	assert.Equal(t, []messages.FileChange{}, d.Files)
	assert.Empty(t, d.Warning)
}

func TestGitUnavailableFallsBackToToolEvents(t *testing.T) {
	r := newRepo(t)
	g := NewGit(r.dir, WithGitBinary(filepath.Join(t.TempDir(), "no-git")))
	d := capture(t, g, func() { r.write("a.txt", "a\n") }, "a.txt")
	assert.Equal(t, messages.DiffToolEvents, d.Source)
	assert.Equal(t, []messages.FileChange{{Path: "a.txt", Status: "M"}}, d.Files)
	assert.Contains(t, d.Summary, "git is not available")
}

func TestNoWorkingDirectory(t *testing.T) {
	d := capture(t, NewGit(""), nil)
	assert.Equal(t, messages.DiffNone, d.Source)
	assert.Empty(t, d.Warning)
}

func TestCaptureProblemsBecomeWarnings(t *testing.T) {
	t.Run("repository gone mid-turn", func(t *testing.T) {
		r := newRepo(t)
		r.write("a.txt", "a\n")
		r.commitAll("init")
		r.write("a.txt", "dirty\n")
		d := capture(t, NewGit(r.dir), func() { r.remove(".git") }, "a.txt")
		assert.Equal(t, messages.DiffNone, d.Source)
		assert.Equal(t, []messages.FileChange{}, d.Files)
		assert.NotEmpty(t, d.Warning)
		assert.Contains(t, d.Warning, "git ")
	})
	t.Run("cwd gone before the turn", func(t *testing.T) {
		r := newRepo(t)
		g := NewGit(r.path("missing"))
		d := capture(t, g, nil)
		assert.Equal(t, messages.DiffNone, d.Source)
		assert.Contains(t, d.Warning, "baseline")
	})
	t.Run("no baseline", func(t *testing.T) {
		d := NewGit(t.TempDir()).Finish(testCtx(t), nil, []string{"a.txt"})
		assert.Equal(t, messages.DiffNone, d.Source)
		assert.Contains(t, d.Warning, "no baseline")
	})
	t.Run("timeout", func(t *testing.T) {
		r := newRepo(t)
		r.write("a.txt", "a\n")
		r.commitAll("init")
		g := NewGit(r.dir, WithTimeout(1)) // 1ns: every git run is late
		d := capture(t, g, nil)
		assert.Equal(t, messages.DiffNone, d.Source)
		assert.Contains(t, d.Warning, "deadline")
	})
}

// A repository the agent could write to names programs in its config,
// attributes and hooks; a capture must run none of them.
func TestHostileRepositoryConfigRunsNothing(t *testing.T) {
	r := newRepo(t)
	pwned := filepath.Join(t.TempDir(), "pwned")
	script := filepath.Join(t.TempDir(), "evil.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"$0 $*\" >> '"+pwned+"'\ncat\n"), 0o755))
	r.write("a.txt", "a\n")
	r.write("doc.md", "doc\n")
	r.commitAll("init")
	r.write(".gitattributes", "* filter=evil diff=evil\n")
	r.commitAll("attributes")
	for _, kv := range [][2]string{
		{"core.fsmonitor", script},
		{"filter.evil.clean", script},
		{"filter.evil.smudge", script},
		{"filter.evil.required", "true"},
		{"filter.ev.il.process", script},
		{"diff.evil.command", script},
		{"diff.evil.textconv", script},
		{"diff.external", script},
		{"core.pager", script},
		{"core.hooksPath", filepath.Dir(script)},
	} {
		r.git("config", kv[0], kv[1])
	}
	hooks := r.path(".git/hooks")
	require.NoError(t, os.MkdirAll(hooks, 0o755))
	for _, h := range []string{"post-index-change", "pre-commit", "post-checkout"} {
		require.NoError(t, os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\necho hook >> '"+pwned+"'\n"), 0o755))
	}
	require.NoError(t, os.Rename(script, filepath.Join(filepath.Dir(script), "post-index-change")))
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"$0 $*\" >> '"+pwned+"'\ncat\n"), 0o755))
	r.write("a.txt", "dirty\n")
	r.write("u.txt", "untracked\n")

	d := capture(t, NewGit(r.dir), func() {
		r.write("a.txt", "dirty\nturn\n")
		r.write("doc.md", "doc\nturn\n")
		r.write("n.txt", "new\n")
	})
	require.Empty(t, d.Warning)
	assert.Len(t, d.Files, 3)
	ran, err := os.ReadFile(pwned)
	assert.ErrorIs(t, err, os.ErrNotExist, "a repository-named program ran: %s", ran)
}

func TestFilterNameThatCannotBeNeutralisedIsAProblem(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	r.git("config", "filter.a=b.clean", "true")
	d := capture(t, NewGit(r.dir), nil)
	assert.Equal(t, messages.DiffNone, d.Source)
	assert.Contains(t, d.Warning, "filter driver")
}

func TestShortStat(t *testing.T) {
	f := func(ins, del int) messages.FileChange { return messages.FileChange{Insertions: ins, Deletions: del} }
	for _, tc := range []struct {
		files []messages.FileChange
		want  string
	}{
		{nil, "no changes"},
		{[]messages.FileChange{f(1, 0)}, "1 file changed, 1 insertion(+)"},
		{[]messages.FileChange{f(0, 1)}, "1 file changed, 1 deletion(-)"},
		{[]messages.FileChange{{Binary: true}}, "1 file changed, 0 insertions(+), 0 deletions(-)"},
		{[]messages.FileChange{f(4, 0), f(6, 2), f(0, 0)}, "3 files changed, 10 insertions(+), 2 deletions(-)"},
	} {
		assert.Equal(t, tc.want, shortStat(tc.files))
	}
}

func TestTruncatePatch(t *testing.T) {
	const c = 300
	m := truncMarker(c)
	got := truncatePatch([]byte(strings.Repeat("abcdefghi\n", 100)), c)
	assert.LessOrEqual(t, len(got), c)
	assert.True(t, strings.HasSuffix(got, "\n"+m), "cut at a line end")
	// one long line of multi-byte runes: cut at a rune boundary
	got = truncatePatch([]byte(strings.Repeat("é", 400)), c)
	assert.LessOrEqual(t, len(got), c)
	body := strings.TrimSuffix(got, m)
	assert.True(t, strings.HasSuffix(body, "é\n"))
}

func TestParseStatusV2(t *testing.T) {
	out := "# branch.oid 0123abcd\x00# branch.head main\x00" +
		"1 .M N... 100644 100644 100644 aaa aaa with space.txt\x00" +
		"2 R. N... 100644 100644 100644 aaa aaa R100 new name\x00old name\x00" +
		"u UU N... 100644 100644 100644 100644 a b c conflict.txt\x00" +
		"? new\nline\x00"
	st, err := parseStatusV2([]byte(out))
	require.NoError(t, err)
	assert.Equal(t, []string{"with space.txt", "new name", "old name", "conflict.txt", "new\nline"}, st.paths)

	_, err = parseStatusV2([]byte("1 .M short\x00"))
	assert.Error(t, err)
}

func TestScrubEnv(t *testing.T) {
	env := scrubEnv([]string{"PATH=/bin", "GIT_DIR=/x", "GIT_EXTERNAL_DIFF=evil", "GIT_CONFIG_PARAMETERS='a.b'=c", "LANG=fr_FR", "HOME=/h", "PAGER=less"})
	assert.Contains(t, env, "PATH=/bin")
	assert.Contains(t, env, "HOME=/h")
	for _, kv := range env {
		assert.NotContains(t, []string{"GIT_DIR=/x", "GIT_EXTERNAL_DIFF=evil", "LANG=fr_FR", "PAGER=less"}, kv)
	}
	assert.Contains(t, env, "GIT_CONFIG_GLOBAL=/dev/null")
	assert.Contains(t, env, "GIT_OPTIONAL_LOCKS=0")
	assert.Contains(t, env, "LC_ALL=C")
}

func TestQuoteAlternate(t *testing.T) {
	assert.Equal(t, "/a/b/objects", quoteAlternate("/a/b/objects"))
	assert.Equal(t, `"/a:b/\"q\"/\\/objects"`, quoteAlternate(`/a:b/"q"/\/objects`))
}

func TestColonInRepositoryPath(t *testing.T) {
	requireGit(t)
	dir := filepath.Join(t.TempDir(), "odd:name")
	require.NoError(t, os.Mkdir(dir, 0o755))
	r := &testRepo{tb: t, dir: dir}
	r.git("init", "-q")
	r.git("config", "user.name", "t")
	r.git("config", "user.email", "t@t.invalid")
	r.write("a.txt", "a\n")
	r.commitAll("init")
	r.write("a.txt", "dirty\n")
	d := capture(t, NewGit(dir), func() { r.write("a.txt", "dirty\nturn\n") })
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "a.txt", Status: "M", Insertions: 1}}, d.Files)
}
