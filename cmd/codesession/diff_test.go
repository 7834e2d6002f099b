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

// TestDiffCommandAndReadIncludeDiff: `read --include-diff` prints the
// turn's unified diff (before, text mode printed none), and `diff SESSION
// [TURN]` shows a turn's persisted diff, --stat only its files, a prefix
// of the id naming the session.
func TestDiffCommandAndReadIncludeDiff(t *testing.T) {
	subprocesstest.Git(t)
	home := t.TempDir()
	scenario := `{"turns": [
	  {"match": "GREET", "steps": [{"write": {"path": "greet.go", "content": "package greet\n"}}, {"text": "wrote it"}]},
	  {"match": "MORE", "steps": [{"write": {"path": "more.txt", "content": "more\n"}}, {"text": "more"}]}]}`
	addr, _, _ := inProcessDaemon(t, home, writeScenario(t, scenario))
	inv := invocation{env: map[string]string{"CODESESSION_HOME": home, "NO_COLOR": "1"}}
	cli := func(args ...string) result {
		t.Helper()
		return runCLI(t, inv, append(args[:1:1], append([]string{"--addr", addr}, args[1:]...)...)...)
	}
	cwd := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "start"}} {
		out, err := exec.Command("git", append([]string{"-C", cwd}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}

	r := cli("start", "--json", "--cwd", cwd, "--backend", "script", "--posture", "acceptEdits", "GREET please")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	sid := st.SessionID

	r = cli("read", "--include-diff", sid)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "A greet.go +1 -0")
	assert.Contains(t, r.stdout, "+++ b/greet.go\n")
	assert.Contains(t, r.stdout, "+package greet\n")
	assert.NotContains(t, r.stdout, "\x1b[", "NO_COLOR, and not a terminal")

	r = cli("guide", sid, "MORE now")
	require.Equal(t, 0, r.code, r.stderr)
	r = cli("read", sid)
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "+++ b/more.txt", "without --include-diff: the file list only")
	b, err := os.ReadFile(filepath.Join(cwd, "more.txt"))
	require.NoError(t, err)
	require.Equal(t, "more\n", string(b))

	r = cli("diff", sid[:10])
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "turn 2: diff (git)"), r.stdout)
	assert.Contains(t, r.stdout, "+more\n")
	assert.NotContains(t, r.stdout, "greet.go")

	r = cli("diff", "--stat", sid, "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "A greet.go +1 -0")
	assert.NotContains(t, r.stdout, "+package greet")

	r = cli("diff", "--color", "always", sid, "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "\x1b[32m+package greet\x1b[0m")

	r = cli("diff", "--json", sid, "2")
	require.Equal(t, 0, r.code, r.stderr)
	var d messages.TurnDiff
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d))
	assert.Equal(t, messages.DiffGit, d.Source)

	r = cli("diff", sid, "7")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "turn 7 has no diff; turns with one: 1, 2")
	assert.NotContains(t, r.stderr, "codesession ls", "the session was found: no unrelated hint (issue 37)")
	r = cli("diff", sid, "zero")
	assert.Equal(t, 2, r.code)
}
