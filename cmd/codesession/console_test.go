package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// consoleDaemon runs `codesession serve` in this process with extra serve
// arguments (--env ...) over home; the returned cli runs a console
// command against it.
func consoleDaemon(t *testing.T, home string, serveArgs ...string) (cli func(args ...string) result, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	env := map[string]string{"CODESESSION_HOME": home, "CODESESSION_BACKEND": "script", "HOME": home}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, serveArgs...),
			func(k string) string { return env[k] }, nil, io.Discard, stderr)
	}()
	var once sync.Once
	code := -1
	stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { stop() })
	addr := waitListening(t, stderr)
	inv := invocation{env: map[string]string{"CODESESSION_HOME": home, "NO_COLOR": "1"}}
	cli = func(args ...string) result {
		t.Helper()
		return runCLI(t, inv, append(args[:1:1], append([]string{"--addr", addr}, args[1:]...)...)...)
	}
	return cli, stop
}

// TestConfigErrorsAtStartAreInvalidWithoutARecord (issue 14, problem 3):
// a missing scenario file, a missing API key and a CLI that is not
// installed are usage errors (exit 2) before any record exists.
func TestConfigErrorsAtStartAreInvalidWithoutARecord(t *testing.T) {
	home := t.TempDir()
	cli, _ := consoleDaemon(t, home, "--env", "CODESESSION_SCRIPT="+filepath.Join(t.TempDir(), "absent.json"),
		"--env", "CODESESSION_CLAUDE_BIN="+filepath.Join(t.TempDir(), "no-claude"),
		"--env", "CODESESSION_NATIVE_PROVIDER=openai-chat", "--env", "OPENAI_API_KEY=")
	cwd := t.TempDir()
	for _, c := range []struct{ backend, want string }{
		{"script", "absent.json"},
		{"claude-code", "no-claude"},
		{"native", "OPENAI_API_KEY"},
	} {
		r := cli("start", "--cwd", cwd, "--backend", c.backend, "hello")
		assert.Equal(t, exitUsage, r.code, "%s: %s", c.backend, r.stderr)
		assert.Contains(t, r.stderr, c.want, c.backend)
		assert.Contains(t, r.stderr, "[invalid]", c.backend)
		assert.NotContains(t, r.stderr, "internal", c.backend)
	}
	r := cli("ls")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "no sessions\n", r.stdout, "no failed record was made")

	// the embedded run says the same, with the same exit code
	r = runCLI(t, invocation{}, "run", "--backend", "script", "--cwd", cwd,
		"--env", "CODESESSION_SCRIPT="+filepath.Join(cwd, "missing.json"), "hello")
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "missing.json")
}

// TestReadWhileWaitingAndHumanMessages (issue 14, problems 4 and 8): a
// read while a permission question waits returns it again at once; ls and
// show say waiting; text output has no JSON escapes; a posture above the
// ceiling names --max-posture; a missing session is exit 1 with no usage
// hint and no internal call path.
func TestReadWhileWaitingAndHumanMessages(t *testing.T) {
	home := t.TempDir()
	scenario := `{"turns": [{"match": "ASK", "steps": [{"text": "checking"},
	  {"tool": {"name": "Bash", "input": {"command": "go vet ./... && go test ./..."}, "output": "", "ask": true}}, {"text": "done"}]}],
	  "fallback": {"steps": [{"text": "ok"}]}}`
	cli, _ := consoleDaemon(t, home, "--env", "CODESESSION_SCRIPT="+writeScenario(t, scenario))
	cwd := t.TempDir()
	r := cli("start", "--json", "--cwd", cwd, "ASK first")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))

	first := cli("read", st.SessionID)
	require.Equal(t, 0, first.code, first.stderr)
	assert.Contains(t, first.stdout, "== turn 1: clarification")
	assert.Contains(t, first.stdout, `"go vet ./... && go test ./..."`, "no \\u0026 in text mode")
	assert.NotContains(t, first.stdout, `\u0026`)

	// returned, not blocked until the question is answered: nobody answers
	// it, so a read that waited for the answer would end at its --timeout
	// with "no result" and exit 1, not 0 with the question (judged by the
	// answer, not by a clock a loaded machine can miss)
	again := cli("read", "--timeout", "2m", st.SessionID)
	require.Equal(t, 0, again.code, "a read that waits for the answer ends with no result: %s", again.stderr)
	assert.Equal(t, first.stdout, again.stdout, "the same question, again")

	r = cli("ls")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, " waiting ")
	r = cli("ls", "--status", "waiting", "-o", "id")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, st.SessionID+"\n", r.stdout)
	r = cli("show", st.SessionID)
	assert.Contains(t, r.stdout, "status    waiting")

	r = cli("posture", st.SessionID, "full")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--max-posture full")
	assert.Contains(t, r.stderr, "[ceiling_exceeded]")

	r = cli("show", messages.NewSessionID())
	assert.Equal(t, exitFailed, r.code)
	assert.NotContains(t, r.stderr, "Try:")
	assert.NotContains(t, r.stderr, "store.")
	assert.NotContains(t, r.stderr, "get:")
	assert.Contains(t, r.stderr, "[not_found]")

	// the embedded run: a posture above the default ceiling
	r = runCLI(t, invocation{}, "run", "--backend", "script", "--cwd", cwd, "--posture", "full", "hello")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--max-posture full")
}

// TestScopedTokensThroughTheConsole (issue 14, problem 2): two tokens from
// the config, two scopes: ls shows each only its own sessions; the capped
// one is refused full with a hint at its ceiling.
func TestScopedTokensThroughTheConsole(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	tok := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(name+"-token-0123456789\n"), 0o600))
		return p
	}
	cfg := map[string]any{"daemon": map[string]any{"scopes": []map[string]any{
		{"name": "alice", "tokenFile": tok("alice"), "maxPosture": "full"},
		{"name": "bob", "tokenFile": tok("bob"), "maxPosture": "acceptEdits", "admin": true},
	}}}
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, "config.json"), b, 0o600))
	cli, _ := consoleDaemon(t, home)
	cwd := t.TempDir()
	as := func(who string, args ...string) result {
		return cli(append(args[:1:1], append([]string{"--token", who + "-token-0123456789"}, args[1:]...)...)...)
	}
	r := as("alice", "start", "--json", "--cwd", cwd, "--max-posture", "full", "hello")
	require.Equal(t, 0, r.code, r.stderr)
	var a messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &a))
	r = as("bob", "start", "--json", "--cwd", cwd, "hello")
	require.Equal(t, 0, r.code, r.stderr)
	var bs messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &bs))

	r = as("alice", "ls", "-o", "id")
	assert.Equal(t, a.SessionID+"\n", r.stdout)
	r = as("bob", "ls", "-o", "id")
	assert.Equal(t, bs.SessionID+"\n", r.stdout)
	r = as("bob", "show", a.SessionID)
	assert.Equal(t, exitFailed, r.code, "another scope's session is not found")

	r = as("bob", "start", "--cwd", cwd, "--max-posture", "full", "hello")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "[ceiling_exceeded]")
	assert.Contains(t, r.stderr, "caps postures at acceptEdits")

	r = cli("ls", "-o", "id")
	assert.Equal(t, "", r.stdout, "the default token owns neither")

	r = as("alice", "scope", "--set", "--max-posture", "plan")
	assert.Equal(t, exitUsage, r.code, "alice's token is not an admin")
	assert.Contains(t, r.stderr, "not an admin token")
	r = as("bob", "scope", "--set", "--max-posture", "plan", "--backend", "script")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "max posture    plan")
	r = as("bob", "start", "--cwd", cwd, "--max-posture", "acceptEdits", "hello")
	assert.Equal(t, exitUsage, r.code, "the lowered ceiling holds")
	r = as("bob", "scope")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "scope bob (admin token")
	assert.Contains(t, r.stdout, "backends       script")
}

// TestPruneRemovesOldSessionsAndWorktrees (issue 14, problem 9): prune
// removes sessions that are no longer live, their logs and worktrees (the
// branch stays), and refuses while the daemon uses the home.
func TestPruneRemovesOldSessionsAndWorktrees(t *testing.T) {
	cache := t.TempDir() // where codex sessions' own CODEX_HOMEs go
	t.Setenv("XDG_CACHE_HOME", cache)
	repo := gitRepo(t)
	home := t.TempDir()
	cli, stop := consoleDaemon(t, home)
	r := cli("start", "--json", "--cwd", repo, "--isolate", "worktree", "hello")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.DirExists(t, st.Worktree.Path)
	r = cli("stop", st.SessionID)
	require.Equal(t, 0, r.code, r.stderr)

	inv := invocation{env: map[string]string{"CODESESSION_HOME": home}}
	r = runCLI(t, inv, "prune", "--older-than", "0s")
	assert.Equal(t, exitFailed, r.code, "the daemon is using the home")
	assert.Contains(t, r.stderr, "stop it")

	require.Equal(t, 0, stop())
	r = runCLI(t, inv, "prune", "--older-than", "30d")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "0 session(s) removed")
	// as a codex session's would be: its CODEX_HOME, kept for resume
	codexHome := filepath.Join(cache, "codesession", "codex-homes", st.SessionID)
	require.NoError(t, os.MkdirAll(codexHome, 0o700))
	otherHome := filepath.Join(cache, "codesession", "codex-homes", "cs_another")
	require.NoError(t, os.MkdirAll(otherHome, 0o700))
	r = runCLI(t, inv, "prune", "--older-than", "0s", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "would remove "+st.SessionID)
	assert.Contains(t, r.stdout, "its CODEX_HOME "+codexHome)
	assert.DirExists(t, st.Worktree.Path)
	assert.DirExists(t, codexHome)
	r = runCLI(t, inv, "prune", "--older-than", "0s")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "removed "+st.SessionID)
	assert.NoDirExists(t, st.Worktree.Path)
	assert.NoDirExists(t, codexHome)
	assert.DirExists(t, otherHome, "only the pruned session's")
	assert.NoDirExists(t, filepath.Join(home, "sessions", st.SessionID))
	out, err := exec.Command("git", "-C", repo, "branch", "--list", st.Worktree.Branch).CombinedOutput()
	require.NoError(t, err)
	assert.Contains(t, string(out), st.Worktree.Branch, "the branch keeps the work")

	r = runCLI(t, inv, "prune")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--older-than is required")
}

// TestConfigCompletionAndServeLogs (issue 14, problem 9): the effective
// config, completion scripts each shell accepts, and serve's JSON logs.
func TestConfigCompletionAndServeLogs(t *testing.T) {
	home := t.TempDir()
	inv := invocation{env: map[string]string{"CODESESSION_HOME": home, "CODESESSION_ISOLATE": "worktree"}}
	r := runCLI(t, inv, "config", "--env", "OPENAI_API_KEY=sk-secret")
	require.Equal(t, 0, r.code, r.stderr)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &cfg), r.stdout)
	assert.Equal(t, home, cfg["home"])
	assert.Equal(t, "worktree", cfg["isolate"], "the environment layer")
	assert.Equal(t, "acceptEdits", cfg["daemon"].(map[string]any)["maxPosture"])
	assert.NotContains(t, r.stdout, "sk-secret")

	for _, sh := range []string{"bash", "zsh", "fish"} {
		r = runCLI(t, invocation{}, "completion", sh)
		require.Equal(t, 0, r.code, r.stderr)
		for _, want := range []string{"prune", "max-posture", "acceptEdits", "ls -o id"} {
			assert.Contains(t, r.stdout, want, sh)
		}
		bin, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("%s is not installed: the %s script's syntax is not checked", sh, sh)
			continue
		}
		script := filepath.Join(t.TempDir(), "c."+sh)
		require.NoError(t, os.WriteFile(script, []byte(r.stdout), 0o644))
		out, err := exec.Command(bin, "-n", script).CombinedOutput()
		assert.NoError(t, err, "%s -n: %s", sh, out)
	}
	r = runCLI(t, invocation{}, "completion", "tcsh")
	assert.Equal(t, exitUsage, r.code)

	// serve --log-format json --log-level debug, as a process (only main
	// installs the logger)
	cmd := exec.Command(binary(t), "serve", "--addr", freeAddr(t), "--home", t.TempDir(), "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "CODESESSION_CONFIG=", "CODESESSION_ADDR=")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	found := false
	deadline := time.Now().Add(time.Minute)
	for !found && time.Now().Before(deadline) && sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		found = rec["level"] != nil && rec["msg"] != nil
	}
	assert.True(t, found, "a JSON log line on stderr")
	r = runCLI(t, invocation{}, "serve", "--log-format", "yaml", "--home", t.TempDir())
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "logFormat")
}
