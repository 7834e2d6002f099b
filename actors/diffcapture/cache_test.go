package diffcapture

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// countingGit is a git wrapper on disk that logs each run's subcommand
// before running the real git.
type countingGit struct {
	bin, log string
}

// shSubcommand sets $sub, in a git wrapper script, to git's subcommand:
// the first argument that is no global option.
const shSubcommand = "skip=0; for a in \"$@\"; do if [ $skip = 1 ]; then skip=0; continue; fi; case \"$a\" in -C|-c) skip=1;; --*) ;; *) sub=\"$a\"; break;; esac; done\n"

func newCountingGit(t *testing.T) *countingGit {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	dir := t.TempDir()
	c := &countingGit{bin: filepath.Join(dir, "git"), log: filepath.Join(dir, "runs.log")}
	script := "#!/bin/sh\n" + shSubcommand +
		// and the argument after it, which tells a forced add
		"next=''; found=0; for a in \"$@\"; do if [ $found = 1 ]; then next=\"$a\"; break; fi; [ \"$a\" = \"$sub\" ] && found=1; done\n" +
		"echo \"$sub $next\" >> '" + c.log + "'\n" +
		"exec '" + real + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(c.bin, []byte(script), 0o755))
	return c
}

// take returns the subcommands run since the last take ("add -f" for a
// forced add). An add -A repeated right after itself counts once: it is
// the witness made again because a stamp came out too new for the clock
// reading it was made under (the file systems' fine-grained stamps can run
// ahead of the coarse clock the witness must use), which depends on the
// moment, not on the code.
func (c *countingGit) take(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(c.log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	require.NoError(t, os.Remove(c.log))
	var runs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sub, next, _ := strings.Cut(line, " ")
		if sub == "" {
			continue
		}
		switch {
		case sub == "add" && next == "-f":
			sub = "add -f"
		case sub == "add" && len(runs) > 0 && runs[len(runs)-1] == "add":
			continue
		}
		runs = append(runs, sub)
	}
	return runs
}

// runsOfTurn is what one turn ran: on the turn's path (Begin before the
// turn reaches the backend, Finish before its result is handed out) and off
// it (Settle, which the session's differ runs after each answer).
type runsOfTurn struct {
	begin, afterBegin, finish, afterFinish []string
}

// countedTurn runs one turn as the session's differ does: Begin, Settle,
// the turn, Finish, Settle, taking the git runs of each step.
func countedTurn(t *testing.T, g *Git, cg *countingGit, turn func()) (runsOfTurn, messages.TurnDiff) {
	t.Helper()
	ctx := testCtx(t)
	_ = cg.take(t)
	var runs runsOfTurn
	b, err := g.Begin(ctx)
	require.NoError(t, err)
	runs.begin = cg.take(t)
	g.Settle(ctx)
	runs.afterBegin = cg.take(t)
	if turn != nil {
		turn()
	}
	d := g.Finish(ctx, b, nil)
	runs.finish = cg.take(t)
	g.Settle(ctx)
	runs.afterFinish = cg.take(t)
	return runs, d
}

// The git runs of each kind of turn, on the turn's path and off it.
// Discovery (rev-parse, config) runs once per session. After each answer
// Settle writes the tree of a new snapshot and makes the witness
// (witness.go): one add, and one status the first time (and after a
// reseed) for the ignored directories. While the witness holds, a turn
// runs no git on its path at the end it holds for: a clean later turn none
// at all, a turn that changed something one add and one diff at Finish.
// Before the witness a clean later turn ran two, before the session
// snapshot four to six, before the discovery cache eleven.
func TestGitRunsPerTurn(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	cg := newCountingGit(t)
	g := NewGit(r.dir, WithGitBinary(cg.bin))

	runs, d := countedTurn(t, g, cg, func() { r.write("a.txt", "a\nturn 1\n") })
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, runsOfTurn{
		begin:       []string{"rev-parse", "config", "add"},
		afterBegin:  []string{"write-tree", "status", "add"},
		finish:      []string{"add", "diff-index"},
		afterFinish: []string{"write-tree", "add"},
	}, runs, "the first turn of a session: discovery, a new snapshot, the first witness")

	for turn := 2; turn <= 3; turn++ {
		runs, d = countedTurn(t, g, cg, func() { r.write("a.txt", "a\nturn "+string(rune('0'+turn))+"\n") })
		require.Empty(t, d.Warning)
		require.Len(t, d.Files, 1)
		assert.Equal(t, "M", d.Files[0].Status)
		assert.Contains(t, d.UnifiedDiff, "+turn "+string(rune('0'+turn)))
		assert.NotContains(t, d.UnifiedDiff, "+turn "+string(rune('0'+turn-1)), "the previous turn's change is not this turn's")
		assert.Equal(t, runsOfTurn{
			finish:      []string{"add", "diff-index"},
			afterFinish: []string{"write-tree", "add"},
		}, runs, "turn %d: nothing changed between turns (the witness holds), so the last snapshot is the baseline", turn)
	}

	// a turn that changes nothing runs no git at all
	runs, d = countedTurn(t, g, cg, nil)
	require.Empty(t, d.Warning)
	assert.Empty(t, d.Files)
	assert.Equal(t, runsOfTurn{}, runs)

	// a file changed between turns: the witness fails, Begin adds, and
	// the Begin snapshot's tree is written after the baseline is handed
	// back
	r.write("a.txt", "dirty before\n")
	runs, d = countedTurn(t, g, cg, func() { r.write("a.txt", "dirty before\nand the turn\n") })
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, 1, d.Files[0].Insertions, "only this turn's change")
	assert.Equal(t, 0, d.Files[0].Deletions)
	assert.Equal(t, runsOfTurn{
		begin:       []string{"add"},
		afterBegin:  []string{"write-tree", "add"},
		finish:      []string{"add", "diff-index"},
		afterFinish: []string{"write-tree", "add"},
	}, runs)

	// a commit between turns: the repository's index changed, so Begin
	// seeds the snapshot from it again (a copy, no run) before its add,
	// and the witness is made afresh
	r.commitAll("between turns")
	runs, d = countedTurn(t, g, cg, nil)
	require.Empty(t, d.Warning)
	assert.Empty(t, d.Files)
	assert.Equal(t, runsOfTurn{begin: []string{"add"}, afterBegin: []string{"write-tree", "status", "add"}}, runs)

	// a mid-turn commit is folded in: the work tree is compared, whatever
	// HEAD says (and no witness is made until the next Begin seeds again)
	runs, d = countedTurn(t, g, cg, func() {
		r.write("b.txt", "b\n")
		r.commitAll("agent")
	})
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, "b.txt", d.Files[0].Path)
	assert.Equal(t, runsOfTurn{
		finish:      []string{"add", "diff-index"},
		afterFinish: []string{"write-tree"},
	}, runs)

	// without Settle (a caller that never calls it) Begin and Finish do
	// the work themselves, on the path
	ctx := testCtx(t)
	r.write("a.txt", "dirty again\n")
	_ = cg.take(t)
	b, err := g.Begin(ctx)
	require.NoError(t, err)
	r.write("c.txt", "c\n")
	d = g.Finish(ctx, b, nil)
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, "c.txt", d.Files[0].Path)
	assert.Equal(t, []string{"add", "write-tree", "add", "diff-index"}, cg.take(t))
}

// A filter driver the agent configures between turns is seen at the next
// turn (the cached overrides are read again when the config changes), so
// the capture still runs none of the repository's programs.
func TestConfigChangedBetweenTurnsIsReadAgain(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	cg := newCountingGit(t)
	g := NewGit(r.dir, WithGitBinary(cg.bin))
	require.Empty(t, capture(t, g, func() { r.write("a.txt", "a\n1\n") }).Warning)
	_ = cg.take(t)

	pwned := filepath.Join(t.TempDir(), "pwned")
	script := filepath.Join(t.TempDir(), "evil.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho ran >> '"+pwned+"'\ncat\n"), 0o755))
	d := capture(t, g, func() {
		r.git("config", "filter.evil.clean", script)
		r.git("config", "filter.evil.required", "true")
		r.write(".gitattributes", "* filter=evil\n")
		r.write("a.txt", "a\n2\n")
	})
	require.Empty(t, d.Warning)
	assert.Len(t, d.Files, 2)
	// the change came mid-turn: Finish read the config again, and so does
	// the next Begin only if it changed once more
	assert.Contains(t, cg.take(t), "config")
	d = capture(t, g, func() { r.write("a.txt", "a\n3\n") })
	require.Empty(t, d.Warning)
	assert.NotContains(t, cg.take(t), "config", "an unchanged config is not read again")
	_, err := os.Stat(pwned)
	assert.ErrorIs(t, err, os.ErrNotExist, "the filter the agent configured ran")
}

// A config that includes other files cannot be watched: it is read at
// every use.
func TestIncludedConfigIsNeverCached(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	extra := filepath.Join(t.TempDir(), "extra.config")
	require.NoError(t, os.WriteFile(extra, []byte("[core]\n\tautocrlf = false\n"), 0o644))
	r.git("config", "include.path", extra)
	cg := newCountingGit(t)
	g := NewGit(r.dir, WithGitBinary(cg.bin))
	for range 2 {
		require.Empty(t, capture(t, g, func() { r.write("a.txt", "a\nmore\n") }).Warning)
		runs := cg.take(t)
		assert.Equal(t, 2, strings.Count(strings.Join(runs, " "), "config"), "Begin and Finish each read the config: %v", runs)
	}
}

// A repository made again between turns (rm -rf .git; git init) is found
// again.
func TestRepositoryRemadeBetweenTurns(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	g := NewGit(r.dir)
	require.Len(t, capture(t, g, func() { r.write("a.txt", "a\n1\n") }).Files, 1)
	r.remove(".git")
	r2 := newRepo(t)
	r2.dir = r.dir
	r2.git("init", "-q", "-b", "main")
	d := capture(t, g, func() { r.write("b.txt", "b\n") })
	require.Empty(t, d.Warning)
	assert.Equal(t, messages.DiffGit, d.Source)
	var paths []string
	for _, f := range d.Files {
		paths = append(paths, f.Path)
	}
	assert.Equal(t, []string{"b.txt"}, paths, "a.txt was untracked before the turn in the new repository; b.txt is new")
}

func TestHeadedWriterSplitsAndCapsOnlyThePatch(t *testing.T) {
	head := ":100644 100644 a b M\x00x.txt\x001\t0\tx.txt\x00"
	patch := "diff --git a/x.txt b/x.txt\n+1\n"
	for _, chunk := range []int{1, 3, 1000} {
		w := &headedWriter{patch: capWriter{max: 10}}
		in := []byte(head + "\x00" + patch)
		var err error
		for i := 0; i < len(in) && err == nil; i += chunk {
			_, err = w.Write(in[i:min(i+chunk, len(in))])
		}
		assert.ErrorIs(t, err, errCapped, "chunk %d", chunk)
		assert.Equal(t, head, string(w.head), "chunk %d", chunk)
		assert.Equal(t, patch[:10], w.patch.buf.String(), "chunk %d", chunk)
		assert.True(t, w.patch.hit)
	}
	w := &headedWriter{patch: capWriter{max: 1000}}
	_, err := w.Write([]byte(head + "\x00" + patch))
	require.NoError(t, err)
	assert.Equal(t, patch, w.patch.buf.String())
	assert.False(t, w.patch.hit)
}

// A directory with no repository around it is asked about once: the next
// turns fall back to tool events with no git run, until a .git appears in
// it or in a parent, or the path leads to another directory.
func TestNoRepositoryIsAskedOnceUntilOneAppears(t *testing.T) {
	requireGit(t)
	top := t.TempDir()
	cwd := filepath.Join(top, "a", "b")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	cg := newCountingGit(t)
	g := NewGit(cwd, WithGitBinary(cg.bin))

	d := capture(t, g, nil)
	assert.Equal(t, messages.DiffNone, d.Source)
	assert.Equal(t, []string{"rev-parse"}, cg.take(t), "the first Begin asks")
	for range 3 {
		d = capture(t, g, nil, filepath.Join(cwd, "x.txt"))
		assert.Equal(t, messages.DiffToolEvents, d.Source)
		assert.Contains(t, d.Summary, "not a git work tree")
	}
	assert.Nil(t, cg.take(t), "no git run while nothing changed")

	// a repository made above the directory: git finds it from there
	run := func(dir string, args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	run(filepath.Join(top, "a"), "init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "f.txt"), []byte("one\n"), 0o644))
	run(filepath.Join(top, "a"), "add", "-A")
	run(filepath.Join(top, "a"), "commit", "-qm", "init")
	d = capture(t, g, func() {
		require.NoError(t, os.WriteFile(filepath.Join(cwd, "f.txt"), []byte("two\n"), 0o644))
	})
	assert.Equal(t, messages.DiffGit, d.Source)
	assert.Equal(t, []messages.FileChange{{Path: "b/f.txt", Status: "M", Insertions: 1, Deletions: 1}}, d.Files)
	assert.NotEmpty(t, cg.take(t))
}

// The path of the working directory is followed as git follows it: a
// symbolic link turned to a directory inside a repository is seen at the
// next turn.
func TestNoRepositoryFollowsTheSymlink(t *testing.T) {
	requireGit(t)
	plain := t.TempDir()
	r := newRepo(t)
	r.write("f.txt", "one\n")
	r.commitAll("init")
	link := filepath.Join(t.TempDir(), "cwd")
	require.NoError(t, os.Symlink(plain, link))
	cg := newCountingGit(t)
	g := NewGit(link, WithGitBinary(cg.bin))
	assert.Equal(t, messages.DiffNone, capture(t, g, nil).Source)
	assert.Equal(t, messages.DiffNone, capture(t, g, nil).Source)
	_ = cg.take(t)

	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink(r.dir, link))
	d := capture(t, g, func() { r.write("f.txt", "two\n") })
	assert.Equal(t, messages.DiffGit, d.Source)
	assert.Equal(t, []messages.FileChange{{Path: "f.txt", Status: "M", Insertions: 1, Deletions: 1}}, d.Files)
}

// A .git above the directory that git does not take (a file naming no git
// directory) is no reason to stop asking: git is run at every use.
func TestAnUnreadableDotGitAboveIsAskedEveryTime(t *testing.T) {
	requireGit(t)
	top := t.TempDir()
	cwd := filepath.Join(top, "sub")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(top, ".git"), []byte("gitdir: "+filepath.Join(top, "gone")+"\n"), 0o644))
	cg := newCountingGit(t)
	g := NewGit(cwd, WithGitBinary(cg.bin))
	d := capture(t, g, nil)
	require.Equal(t, messages.DiffNone, d.Source)
	_ = cg.take(t)
	capture(t, g, nil)
	assert.Equal(t, []string{"rev-parse"}, cg.take(t), "the next Begin asks again")
}
