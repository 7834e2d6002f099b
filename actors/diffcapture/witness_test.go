package diffcapture

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// witnessRepo is a repository with the shapes a witness must see into: a
// tracked tree, an empty directory, a directory holding only ignored
// files, an ignored directory, and a deeper package.
func witnessRepo(t *testing.T) *testRepo {
	t.Helper()
	r := newRepo(t)
	r.write(".gitignore", "*.log\nbuild/\n")
	r.write("a.txt", "a\n")
	r.write("run.sh", "echo hi\n")
	r.write("src/pkg/lib.go", "package pkg\n")
	r.write("logs/old.log", "ignored\n")
	r.write("build/out.bin", "ignored\n")
	require.NoError(t, os.Mkdir(r.path("empty"), 0o755))
	r.commitAll("init")
	return r
}

// witnessed runs a session's turns on r until the witness holds after a
// turn's Settle (a clean turn then ran no git), and returns the capturer.
func witnessed(t *testing.T, r *testRepo, cg *countingGit) *Git {
	t.Helper()
	g := NewGit(r.dir, WithGitBinary(cg.bin))
	countedTurn(t, g, cg, nil)
	runs, d := countedTurn(t, g, cg, nil)
	require.Empty(t, d.Warning)
	require.Empty(t, d.Files)
	require.Equal(t, runsOfTurn{}, runs, "a clean turn with the witness holding runs no git")
	return g
}

// Every kind of change an agent makes is seen by the witness: the turn's
// Begin ran no git (the witness held), its Finish found the change, and
// the diff is what git says.
func TestWitnessSeesEveryChange(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(r *testRepo)
		want   []messages.FileChange
	}{
		{"same size, mtime put back", func(r *testRepo) {
			fi, err := os.Stat(r.path("a.txt"))
			require.NoError(t, err)
			r.write("a.txt", "b\n")
			require.NoError(t, os.Chtimes(r.path("a.txt"), fi.ModTime(), fi.ModTime()))
		}, []messages.FileChange{{Path: "a.txt", Status: "M", Insertions: 1, Deletions: 1}}},
		{"new file at the top", func(r *testRepo) { r.write("new.txt", "n\n") },
			[]messages.FileChange{{Path: "new.txt", Status: "A", Insertions: 1}}},
		{"new file in an empty directory", func(r *testRepo) { r.write("empty/e.txt", "e\n") },
			[]messages.FileChange{{Path: "empty/e.txt", Status: "A", Insertions: 1}}},
		{"new file beside ignored ones only", func(r *testRepo) { r.write("logs/notes.txt", "n\n") },
			[]messages.FileChange{{Path: "logs/notes.txt", Status: "A", Insertions: 1}}},
		{"new file in new directories", func(r *testRepo) { r.write("x/y/z.txt", "z\n") },
			[]messages.FileChange{{Path: "x/y/z.txt", Status: "A", Insertions: 1}}},
		{"new file deep in a package", func(r *testRepo) { r.write("src/pkg/more.go", "package pkg\n") },
			[]messages.FileChange{{Path: "src/pkg/more.go", Status: "A", Insertions: 1}}},
		{"deleted file", func(r *testRepo) { r.remove("src/pkg/lib.go") },
			[]messages.FileChange{{Path: "src/pkg/lib.go", Status: "D", Deletions: 1}}},
		{"made executable", func(r *testRepo) { require.NoError(t, os.Chmod(r.path("run.sh"), 0o755)) },
			[]messages.FileChange{{Path: "run.sh", Status: "M"}}},
		{"file turned symlink", func(r *testRepo) {
			r.remove("a.txt")
			require.NoError(t, os.Symlink("run.sh", r.path("a.txt")))
		}, []messages.FileChange{{Path: "a.txt", Status: "M", Insertions: 1, Deletions: 1}}},
		{"renamed into a new directory", func(r *testRepo) {
			require.NoError(t, os.MkdirAll(r.path("moved"), 0o755))
			require.NoError(t, os.Rename(r.path("src/pkg/lib.go"), r.path("moved/lib.go")))
		}, []messages.FileChange{{Path: "moved/lib.go", OldPath: "src/pkg/lib.go", Status: "R"}}},
		{"ignored files only", func(r *testRepo) {
			r.write("build/more.bin", "x\n")
			r.write("logs/new.log", "x\n")
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := witnessRepo(t)
			cg := newCountingGit(t)
			g := witnessed(t, r, cg)
			runs, d := countedTurn(t, g, cg, func() { c.change(r) })
			require.Empty(t, d.Warning)
			assert.Nil(t, runs.begin, "the witness held at Begin")
			if c.want == nil {
				assert.Empty(t, d.Files)
				return
			}
			assert.Equal(t, []string{"add", "diff-index"}, runs.finish, "the witness failed at Finish: git's way")
			for i := range d.Files {
				d.Files[i].Binary = false // not what is checked here
			}
			assert.Equal(t, c.want, d.Files)
		})
	}
}

// A witness vouches only for stamps older than the clock reading it was
// made under: anything newer could change again within the same timestamp.
func TestWitnessRefusesRacyStamps(t *testing.T) {
	r := witnessRepo(t)
	g := NewGit(r.dir)
	ctx := testCtx(t)
	b, err := g.Begin(ctx)
	require.NoError(t, err)
	g.Finish(ctx, b, nil)
	index := g.sc.index()

	files, err := witnessFiles(index, 20, time.Now().Add(time.Hour).UnixNano())
	require.NoError(t, err)
	assert.Len(t, files, 4, ".gitignore, a.txt, run.sh, src/pkg/lib.go; build/ and logs/ hold only ignored files")

	_, err = witnessFiles(index, 20, time.Now().Add(-time.Hour).UnixNano())
	var racy errRacy
	require.ErrorAs(t, err, &racy, "entries stamped after the cutoff")

	// a file dated ahead of the clock is never vouched for: each turn
	// takes git's way, and sees the change
	ahead := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(r.path("a.txt"), ahead, ahead))
	cg := newCountingGit(t)
	g = NewGit(r.dir, WithGitBinary(cg.bin))
	for range 2 {
		runs, d := countedTurn(t, g, cg, nil)
		require.Empty(t, d.Files)
		assert.Contains(t, runs.finish, "add")
		assert.Nil(t, g.sc.wit)
	}
	runs, d := countedTurn(t, g, cg, func() { r.write("a.txt", "b\n"); require.NoError(t, os.Chtimes(r.path("a.txt"), ahead, ahead)) })
	require.Len(t, d.Files, 1)
	assert.Contains(t, runs.finish, "add")
}

// Only file systems that keep their stat data locally, in nanoseconds.
func TestWitnessOnlyOnLocalFileSystems(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err == nil {
		assert.True(t, localStamps("/dev/shm"), "tmpfs")
	}
	assert.True(t, localStamps(t.TempDir()), "the test's own temporary directory, where the other witness tests make their repositories")
	assert.False(t, localStamps("/proc"))
	assert.False(t, localStamps(filepath.Join(t.TempDir(), "missing")))
}

func TestParseIgnoredDirs(t *testing.T) {
	out := []byte("# branch.oid abc\x00? new.txt\x00! build/\x00! logs/x.log\x00! a b/\x00")
	assert.Equal(t, map[string]bool{"build": true, "a b": true}, parseIgnoredDirs(out))
}

// The witness and Prepare change how often git runs, never what a turn's
// diff says: random edits between and during turns (files, directories,
// ignored files, renames, modes, timestamps put back), with Prepare called
// after some of them, give the same diff through a capturer with the
// witness as through one without it, turn by turn. Every other turn asks
// BeginNow and FinishNow first, as the session actor does.
func TestWitnessAgreesWithGitWithoutIt(t *testing.T) {
	seeds := 4
	turns := 30
	if testing.Short() {
		seeds, turns = 1, 10
	}
	fast, answeredNow := 0, 0
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		r := witnessRepo(t)
		cg := newCountingGit(t)
		g := NewGit(r.dir, WithGitBinary(cg.bin))
		ref := NewGit(r.dir)
		ref.witnessOff = true
		ctx := testCtx(t)
		for turn := range turns {
			if rng.IntN(3) == 0 {
				randomEdit(t, r, rng)
			}
			_ = cg.take(t)
			rb, err := ref.Begin(ctx)
			require.NoError(t, err)
			now := turn%2 == 1
			var b Baseline
			ok := false
			if now {
				b, _, ok = g.BeginNow()
			}
			if ok {
				answeredNow++
			} else {
				b, err = g.Begin(ctx)
				require.NoError(t, err)
			}
			if cg.take(t) == nil {
				fast++
			}
			for range rng.IntN(3) {
				randomEdit(t, r, rng)
				if rng.IntN(2) == 0 {
					g.prepEnd = time.Time{}
					g.Prepare(ctx, b) // as after a tool result
				}
			}
			rd := ref.Finish(ctx, rb, nil)
			var d messages.TurnDiff
			ok = false
			if now {
				d, _, ok = g.FinishNow(b, nil)
			}
			if ok {
				answeredNow++
			} else {
				d = g.Finish(ctx, b, nil)
			}
			require.Empty(t, rd.Warning)
			require.Empty(t, d.Warning)
			require.Equal(t, rd.Files, d.Files, "seed %d turn %d", seed, turn)
			require.Equal(t, rd.UnifiedDiff, d.UnifiedDiff, "seed %d turn %d", seed, turn)
			g.Settle(ctx)
			ref.Settle(ctx)
		}
	}
	assert.Greater(t, fast, seeds*turns/3, "Begins the witness answered without git")
	assert.Greater(t, answeredNow, seeds*turns/6, "Begins and Finishes answered at once")
}

// randomEdit makes one change of the kinds agents make.
func randomEdit(t *testing.T, r *testRepo, rng *rand.Rand) {
	t.Helper()
	names := []string{"a.txt", "run.sh", "src/pkg/lib.go", "src/pkg/b.go", "empty/e.txt", "logs/n.txt", "x/y/z.txt", "new.txt"}
	p := names[rng.IntN(len(names))]
	switch rng.IntN(8) {
	case 0, 1:
		r.write(p, fmt.Sprintf("line %d\n", rng.IntN(1000)))
	case 2:
		_ = os.Remove(r.path(p))
	case 3:
		q := names[rng.IntN(len(names))]
		if _, err := os.Stat(r.path(p)); err == nil && p != q {
			require.NoError(t, os.MkdirAll(filepath.Dir(r.path(q)), 0o755))
			_ = os.Rename(r.path(p), r.path(q))
		}
	case 4:
		if fi, err := os.Stat(r.path(p)); err == nil {
			require.NoError(t, os.Chmod(r.path(p), fi.Mode()^0o100))
		}
	case 5:
		// same size, the mtime put back
		if fi, err := os.Stat(r.path(p)); err == nil && fi.Size() > 0 {
			b, _ := os.ReadFile(r.path(p))
			b[0] ^= 1
			require.NoError(t, os.WriteFile(r.path(p), b, fi.Mode()))
			require.NoError(t, os.Chtimes(r.path(p), fi.ModTime(), fi.ModTime()))
		}
	case 6:
		r.write(fmt.Sprintf("build/o%d.bin", rng.IntN(5)), "x\n")
		r.write(fmt.Sprintf("logs/l%d.log", rng.IntN(5)), "x\n")
	case 7:
		_ = os.RemoveAll(r.path("x"))
	}
}

// Prepare after a tool ran does Finish's work beside the turn: a Finish
// that finds nothing changed since hands out the prepared diff and runs no
// git; one that finds a later change takes its own way and reports both.
func TestPrepareLeavesFinishNothingToRun(t *testing.T) {
	r := witnessRepo(t)
	cg := newCountingGit(t)
	g := witnessed(t, r, cg)
	ctx := testCtx(t)

	b, err := g.Begin(ctx)
	require.NoError(t, err)
	r.write("new.txt", "n\n")
	g.Prepare(ctx, b)
	assert.Equal(t, []string{"add", "diff-index"}, cg.take(t), "Prepare: the witness's add, and the diff")
	g.prepEnd = time.Time{} // (not skipped for the time the last one took)
	g.Prepare(ctx, b)
	assert.Nil(t, cg.take(t), "prepared already")
	d := g.Finish(ctx, b, nil)
	assert.Nil(t, cg.take(t), "Finish ran no git")
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "new.txt", Status: "A", Insertions: 1}}, d.Files)
	g.Settle(ctx)
	assert.Equal(t, []string{"write-tree"}, cg.take(t), "after the answer: the tree of the next turn's baseline")

	// a change after Prepare: Finish's own way, with both changes
	b, err = g.Begin(ctx)
	require.NoError(t, err)
	assert.Nil(t, cg.take(t), "the witness held at Begin")
	r.write("a.txt", "changed\n")
	g.prepEnd = time.Time{}
	g.Prepare(ctx, b)
	assert.Equal(t, []string{"add", "diff-index"}, cg.take(t))
	r.write("src/pkg/lib.go", "package pkg // changed\n")
	d = g.Finish(ctx, b, nil)
	assert.Equal(t, []string{"add", "diff-index"}, cg.take(t))
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{
		{Path: "a.txt", Status: "M", Insertions: 1, Deletions: 1},
		{Path: "src/pkg/lib.go", Status: "M", Insertions: 1, Deletions: 1},
	}, d.Files)

	// a baseline of no snapshot (the status way, a fallback) is no
	// concern of Prepare's
	g.Prepare(ctx, &gitBaseline{kind: kindFallback})
	g.Prepare(ctx, nil)
	assert.Nil(t, cg.take(t))
}

// Prepare takes at most about half of the time: one asked for sooner after
// the last than that one took is skipped (its Finish does the work).
func TestPrepareKeepsToHalfTheTime(t *testing.T) {
	r := witnessRepo(t)
	cg := newCountingGit(t)
	g := witnessed(t, r, cg)
	ctx := testCtx(t)
	b, err := g.Begin(ctx)
	require.NoError(t, err)
	r.write("new.txt", "n\n")
	g.prepCost = time.Hour
	g.prepEnd = time.Now()
	g.Prepare(ctx, b)
	assert.Nil(t, cg.take(t), "skipped: the last one took an hour and ended just now")
	g.prepEnd = time.Now().Add(-2 * time.Hour)
	g.Prepare(ctx, b)
	assert.Equal(t, []string{"add", "diff-index"}, cg.take(t))
	assert.Less(t, g.prepCost, time.Hour, "the cost of the one that ran")
	d := g.Finish(ctx, b, nil)
	assert.Nil(t, cg.take(t))
	assert.Equal(t, []messages.FileChange{{Path: "new.txt", Status: "A", Insertions: 1}}, d.Files)
}

// A Prepare whose git fails leaves nothing prepared: the turn's Finish
// takes its own way and reports the change, with no warning.
func TestPrepareThatFailsLeavesFinishItsOwnWay(t *testing.T) {
	r := witnessRepo(t)
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	dir := t.TempDir()
	flag := filepath.Join(dir, "fail")
	bin := filepath.Join(dir, "git")
	script := "#!/bin/sh\nfor a in \"$@\"; do if [ \"$a\" = diff-index ] && [ -e '" + flag + "' ]; then echo 'injected failure' >&2; exit 1; fi; done\nexec '" + real + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	g := NewGit(r.dir, WithGitBinary(bin))
	ctx := testCtx(t)
	for range 2 { // a witness, as after a turn's Settle
		b, err := g.Begin(ctx)
		require.NoError(t, err)
		g.Finish(ctx, b, nil)
		g.Settle(ctx)
	}
	require.NotNil(t, g.sc.wit)

	b, err := g.Begin(ctx)
	require.NoError(t, err)
	r.write("new.txt", "n\n")
	require.NoError(t, os.WriteFile(flag, nil, 0o600))
	g.Prepare(ctx, b)
	assert.Nil(t, g.sc.prep, "nothing prepared")
	require.NoError(t, os.Remove(flag))
	d := g.Finish(ctx, b, nil)
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "new.txt", Status: "A", Insertions: 1}}, d.Files)
}

// The witness compares each entry's kind and exec bit, not only its stamps:
// a chmod changes the ctime too (TestWitnessSeesEveryChange's "made
// executable"), so that case alone let a witness that ignored the mode
// through. Here S's record differs from the file in its mode only (as when
// git records a mode the file system's stamps do not show, such as an
// index entry rewritten by update-index --chmod), and the witness must not
// hold.
func TestWitnessComparesTheExecBit(t *testing.T) {
	r := witnessRepo(t)
	cg := newCountingGit(t)
	g := witnessed(t, r, cg)
	g.smu.Lock()
	defer g.smu.Unlock()
	w := g.sc.wit
	require.NotNil(t, w)
	require.True(t, w.holds())
	for _, rel := range []string{"run.sh", "a.txt"} {
		i := -1
		for j := range w.files {
			if w.files[j].rel == rel {
				i = j
			}
		}
		require.GreaterOrEqual(t, i, 0, rel)
		f := &w.files[i]
		f.exec = !f.exec
		assert.False(t, w.holds(), "%s: S says exec=%t, the file is not", rel, f.exec)
		f.exec = !f.exec
		f.reg, f.sym = false, true
		assert.False(t, w.holds(), "%s: S says symlink, the file is regular", rel)
		f.reg, f.sym = true, false
		require.True(t, w.holds())
	}
}

// gatedGit is git with one subcommand that can be held: while the gate is
// closed, a run of it says so (entered) and waits for the gate to open,
// then fails, as a git killed or timed out would.
type gatedGit struct {
	bin, gate, entered string
}

func newGatedGit(t *testing.T, sub string) *gatedGit {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	dir := t.TempDir()
	g := &gatedGit{bin: filepath.Join(dir, "git"), gate: filepath.Join(dir, "gate"), entered: filepath.Join(dir, "entered")}
	script := "#!/bin/sh\n" + shSubcommand +
		"if [ \"$sub\" = '" + sub + "' ] && [ -e '" + g.gate + "' ]; then\n" +
		"  touch '" + g.entered + "'\n" +
		"  while [ -e '" + g.gate + "' ]; do sleep 0.01; done\n" +
		"  exit 1\n" +
		"fi\n" +
		"exec '" + real + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(g.bin, []byte(script), 0o755))
	return g
}

func (g *gatedGit) close(t *testing.T) { require.NoError(t, os.WriteFile(g.gate, nil, 0o644)) }
func (g *gatedGit) open(t *testing.T)  { require.NoError(t, os.Remove(g.gate)) }

// waitEntered waits for a run of the gated subcommand (the bound only
// stops a hang).
func (g *gatedGit) waitEntered(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(g.entered); return err == nil }, time.Minute, 5*time.Millisecond,
		"no run of the gated subcommand")
}

// A Settle that comes while another is making the witness is not dropped:
// the maker goes once more when it is done. Here the maker's own try fails
// (its listing of the ignored directories, for a directory the turn made,
// fails as a killed git would) after the second Settle came: before, the
// second Settle returned at once, nothing made the witness, and every turn
// took git's way until the next Finish.
func TestSettleWhileAnotherMakesTheWitness(t *testing.T) {
	r := witnessRepo(t)
	git := newGatedGit(t, "status")
	g := NewGit(r.dir, WithGitBinary(git.bin))
	ctx := testCtx(t)
	turn := func(change func()) {
		t.Helper()
		b, err := g.Begin(ctx)
		require.NoError(t, err)
		if change != nil {
			change()
		}
		d := g.Finish(ctx, b, nil)
		require.Empty(t, d.Warning)
	}
	turn(nil)
	g.Settle(ctx)
	_, _, ok := g.BeginNow()
	require.True(t, ok, "the witness holds after a clean turn's Settle")

	turn(func() { r.write("fresh/x.txt", "x\n") })
	_, _, ok = g.BeginNow()
	require.False(t, ok, "the turn's Finish took the witness")
	git.close(t)
	first := make(chan struct{})
	go func() { defer close(first); g.Settle(ctx) }()
	git.waitEntered(t)
	g.Settle(ctx) // while the first makes the witness
	git.open(t)
	select {
	case <-first:
	case <-time.After(time.Minute):
		t.Fatal("the first Settle did not return")
	}
	_, _, ok = g.BeginNow()
	assert.True(t, ok, "the witness the second Settle asked for was made after the first's try failed")
	b, err := g.Begin(ctx)
	require.NoError(t, err)
	d := g.Finish(ctx, b, nil)
	require.Empty(t, d.Warning)
	assert.Empty(t, d.Files)
}

// A turn whose changes a Settle brought into S before the turn's Finish
// (the Settle of the turn's Begin, running late beside the agent), and
// whose witness no longer held at Finish (here an ignored file made
// after), leaves S as it stands as the next turn's baseline all the same:
// the next clean turn begins at once. Before, Finish's add found nothing
// new to add, took no snapshot, and every later Begin took git's way until
// a turn changed something again (the runtime test that waits for a turn
// to begin at once waited in vain).
func TestFinishTakesSAfterALateSettleAddedTheTurn(t *testing.T) {
	r := witnessRepo(t)
	g := NewGit(r.dir)
	ctx := testCtx(t)
	b, err := g.Begin(ctx) // the first: seeds S, no witness yet
	require.NoError(t, err)
	r.write("hello.txt", "hi\n")
	g.Settle(ctx) // the Begin's, late: its add takes hello.txt into S
	r.write("logs/new.log", "ignored\n")
	d := g.Finish(ctx, b, nil)
	require.Empty(t, d.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "hello.txt", Status: "A", Insertions: 1}}, d.Files)
	g.Settle(ctx)
	_, _, ok := g.BeginNow()
	assert.True(t, ok, "the next turn begins at once")
	b, err = g.Begin(ctx)
	require.NoError(t, err)
	d = g.Finish(ctx, b, nil)
	require.Empty(t, d.Warning)
	assert.Empty(t, d.Files)
}
