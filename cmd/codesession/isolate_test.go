package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// gitRepo makes a repository with one commit (README) in a temp dir.
func gitRepo(t *testing.T) string {
	t.Helper()
	subprocesstest.Git(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644))
	for _, args := range [][]string{{"init", "-q"}, {"add", "README"},
		{"-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "start"}} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return dir
}

// TestIsolatedSessionsSeeOnlyTheirOwnChanges (issue 14, problem 1): two
// sessions on one repository with --isolate worktree each see only their
// own changes in their diffs; the user's checkout is untouched until the
// branch is merged. Without isolation a second live session in the same
// directory warns, and --exclusive refuses it.
func TestIsolatedSessionsSeeOnlyTheirOwnChanges(t *testing.T) {
	repo := gitRepo(t)
	home := t.TempDir()
	scenario := `{"turns": [
	  {"match": "WRITE-A", "steps": [{"write": {"path": "a.txt", "content": "from a\n"}}, {"text": "wrote a"}]},
	  {"match": "WRITE-B", "steps": [{"write": {"path": "b.txt", "content": "from b\n"}}, {"text": "wrote b"}]}],
	  "fallback": {"steps": [{"text": "ok"}]}}`
	addr, _, _ := inProcessDaemon(t, home, writeScenario(t, scenario))
	inv := invocation{env: map[string]string{"CODESESSION_HOME": home, "NO_COLOR": "1"}}
	cli := func(args ...string) result {
		t.Helper()
		return runCLI(t, inv, append(args[:1:1], append([]string{"--addr", addr}, args[1:]...)...)...)
	}
	startJSON := func(args ...string) messages.StartResult {
		t.Helper()
		r := cli(append([]string{"start", "--json", "--cwd", repo, "--backend", "script", "--posture", "acceptEdits"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		var st messages.StartResult
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
		return st
	}

	a := startJSON("--isolate", "worktree", "WRITE-A")
	b := startJSON("--isolate", "worktree", "WRITE-B")
	for _, st := range []messages.StartResult{a, b} {
		require.NotNil(t, st.Worktree)
		short := strings.TrimPrefix(st.SessionID, messages.SessionIDPrefix)[:12]
		assert.Equal(t, "codesession/"+short, st.Worktree.Branch)
		assert.Equal(t, filepath.Join(home, "worktrees", short), st.Worktree.Path)
		assert.Empty(t, st.Warnings, "isolated sessions do not share a directory")
	}

	ra := cli("read", "--include-diff", a.SessionID)
	require.Equal(t, 0, ra.code, ra.stderr)
	rb := cli("read", "--include-diff", b.SessionID)
	require.Equal(t, 0, rb.code, rb.stderr)
	assert.Contains(t, ra.stdout, "A a.txt +1 -0")
	assert.NotContains(t, ra.stdout, "b.txt")
	assert.Contains(t, rb.stdout, "A b.txt +1 -0")
	assert.NotContains(t, rb.stdout, "a.txt")

	// the user's checkout is untouched
	out, err := exec.Command("git", "-C", repo, "status", "--porcelain", "-uall").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Empty(t, string(out))
	assert.NoFileExists(t, filepath.Join(repo, "a.txt"))

	r := cli("show", a.SessionID[:10])
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "worktree  "+a.Worktree.Path+" (branch "+a.Worktree.Branch+")")
	r = cli("ls", "-o", "wide")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, a.Worktree.Branch)
	assert.Contains(t, r.stdout, b.Worktree.Branch)

	r = cli("stop", a.SessionID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "the session's work is on branch "+a.Worktree.Branch)
	assert.Contains(t, r.stdout, "merge it: git -C "+repo+" merge "+a.Worktree.Branch)

	// the work reaches the checkout by a merge, and only then
	for _, args := range [][]string{{"-C", a.Worktree.Path, "add", "a.txt"},
		{"-C", a.Worktree.Path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "a"},
		{"-C", repo, "merge", "-q", "--ff-only", a.Worktree.Branch}} {
		out, err := exec.Command("git", args...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	assert.FileExists(t, filepath.Join(repo, "a.txt"))
	assert.NoFileExists(t, filepath.Join(repo, "b.txt"))

	// without isolation: a second live session in the same directory
	c := startJSON("FIRST")
	assert.Empty(t, c.Warnings)
	d := startJSON("SECOND")
	require.Len(t, d.Warnings, 1)
	assert.Contains(t, d.Warnings[0], "other live session(s) work in "+repo)
	r = cli("start", "--cwd", repo, "--backend", "script", "SECOND")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "warning: ")
	assert.Contains(t, r.stderr, "--isolate worktree")
	r = cli("start", "--cwd", repo, "--backend", "script", "--exclusive", "THIRD")
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "conflict")

	// an explicit worktree outside a repository is a usage error, with no record
	r = cli("start", "--cwd", t.TempDir(), "--backend", "script", "--isolate", "worktree", "X")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stderr, "needs a git repository")
}
