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

func newCountingGit(t *testing.T) *countingGit {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	dir := t.TempDir()
	c := &countingGit{bin: filepath.Join(dir, "git"), log: filepath.Join(dir, "runs.log")}
	script := "#!/bin/sh\n" +
		// the subcommand is the first argument that is no global option
		"skip=0; for a in \"$@\"; do if [ $skip = 1 ]; then skip=0; continue; fi; case \"$a\" in -C|-c) skip=1;; --*) ;; *) echo \"$a\" >> '" + c.log + "'; break;; esac; done\n" +
		"exec '" + real + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(c.bin, []byte(script), 0o755))
	return c
}

// take returns the subcommands run since the last take.
func (c *countingGit) take(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(c.log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	require.NoError(t, os.Remove(c.log))
	return strings.Fields(string(b))
}

// The git runs of a turn: discovery (rev-parse, config) once per session,
// then one status at Begin and at Finish, the scratch index and one diff
// (plus the baseline's hashes and tree when the tree was dirty at Begin).
// Before the cache, the merged runs and the pathspec diff a one-file turn
// took 11.
func TestGitRunsPerTurn(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("init")
	cg := newCountingGit(t)
	g := NewGit(r.dir, WithGitBinary(cg.bin))

	d := capture(t, g, func() { r.write("a.txt", "a\nturn 1\n") })
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	first := cg.take(t)
	assert.Equal(t, []string{"rev-parse", "config", "status", "status", "update-index", "diff-index"}, first)

	for turn := 2; turn <= 3; turn++ {
		r.commitAll("between turns") // a clean start: nothing to hash at Begin
		_ = cg.take(t)
		d = capture(t, g, func() { r.write("a.txt", "a\nturn "+string(rune('0'+turn))+"\n") })
		require.Empty(t, d.Warning)
		require.Len(t, d.Files, 1)
		assert.Equal(t, "M", d.Files[0].Status)
		assert.Contains(t, d.UnifiedDiff, "+turn "+string(rune('0'+turn)))
		runs := cg.take(t)
		assert.Equal(t, []string{"status", "status", "update-index", "diff-index"}, runs,
			"turn %d: discovery is cached and the tree was clean, so a turn is two statuses, the scratch index and one diff against HEAD", turn)
	}

	// a turn that changes nothing: the two statuses only
	r.commitAll("between turns")
	_ = cg.take(t)
	d = capture(t, g, nil)
	require.Empty(t, d.Warning)
	assert.Empty(t, d.Files)
	assert.Equal(t, []string{"status", "status"}, cg.take(t))

	// a file dirty at Begin is hashed into the scratch index then, and the
	// diff runs against a tree of the baseline: two more runs
	r.write("a.txt", "dirty before\n")
	d = capture(t, g, func() { r.write("a.txt", "dirty before\nand the turn\n") })
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, []string{"status", "update-index", "status", "write-tree", "update-index", "diff-index"}, cg.take(t))
	r.commitAll("between turns")
	_ = cg.take(t)

	// a mid-turn commit moves HEAD: the candidates come from the start
	// commit instead (diff-index and ls-files), and the commit is folded in
	d = capture(t, g, func() {
		r.write("b.txt", "b\n")
		r.commitAll("agent")
	})
	require.Empty(t, d.Warning)
	require.Len(t, d.Files, 1)
	assert.Equal(t, "b.txt", d.Files[0].Path)
	runs := cg.take(t)
	assert.Contains(t, runs, "ls-files")
	assert.NotContains(t, runs, "rev-parse")
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
