package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// The CLI commands are quiet by default: no runtime log lines between the
// turns; --verbose (or the config's logLevel) turns them on.
//
// Not parallel: it captures the process's default logger, which the old
// runtime logged through when given no logger.
func TestRunIsQuietByDefault(t *testing.T) {
	var global bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&global, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	sc := writeScenario(t, clarifyScenario)
	args := []string{"run", "--backend", "script", "--guide", "the second file", "--env", "CODESESSION_SCRIPT=" + sc}

	quiet := runCLI(t, invocation{}, append(args, "--cwd", t.TempDir(), "write hello")...)
	require.Equal(t, exitOK, quiet.code, "stderr: %s", quiet.stderr)
	assert.NotContains(t, quiet.stderr, "level=INFO", "run logs nothing at info by default")
	assert.NotContains(t, quiet.stdout, "level=INFO")
	assert.NotContains(t, quiet.stdout+quiet.stderr, "code_session_")
	assert.NotContains(t, global.String(), "code_session_", "nor through slog's default logger")

	loud := runCLI(t, invocation{}, append(args, "--cwd", t.TempDir(), "-v", "write hello")...)
	require.Equal(t, exitOK, loud.code, "stderr: %s", loud.stderr)
	assert.Contains(t, loud.stderr, "level=INFO")
	assert.Contains(t, loud.stderr, "code_session_read_turn")

	byConfig := runCLI(t, invocation{env: map[string]string{"CODESESSION_LOG_LEVEL": "info"}}, append(args, "--cwd", t.TempDir(), "write hello")...)
	require.Equal(t, exitOK, byConfig.code, "stderr: %s", byConfig.stderr)
	assert.Contains(t, byConfig.stderr, "code_session_read_turn", "logLevel info in the config turns them on")
}

func TestDemoIsQuietByDefault(t *testing.T) {
	t.Parallel()
	res := runCLI(t, invocation{}, "demo", "--yes", "--home", t.TempDir())
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	assert.NotContains(t, res.stderr, "level=INFO")
	assert.NotContains(t, res.stdout, "level=INFO")
}

// Every command that takes a SESSION takes a prefix of its id, with or
// without cs_, as `read` prints it (issue 37): on the old code answer,
// guide and stop refused one client-side with "malformed session id".
func TestSessionPrefixesOnEveryCommand(t *testing.T) {
	home := t.TempDir()
	cli, _ := consoleDaemon(t, home, "--env", "CODESESSION_SCRIPT="+writeScenario(t, opsScenario))
	r := cli("start", "--json", "--cwd", t.TempDir(), "ASK first")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	bare := strings.TrimPrefix(st.SessionID, messages.SessionIDPrefix)[:6]
	withCS := messages.SessionIDPrefix + bare

	r = cli("read", bare)
	require.Equal(t, 0, r.code, r.stderr)
	clar := ""
	for _, f := range strings.Fields(r.stdout) {
		if strings.HasPrefix(f, "clar-") {
			clar = f
		}
	}
	require.NotEmpty(t, clar, r.stdout)
	for _, c := range [][]string{
		{"answer", bare, clar, "deny"},
		{"read", withCS},
		{"show", bare},
		{"posture", withCS, "plan"},
		{"guide", bare, "and then the docs"},
		{"read", bare},
		{"interrupt", withCS},
		{"diff", bare},
		{"stop", bare},
		{"show", withCS},
	} {
		r := cli(c...)
		assert.Equal(t, 0, r.code, "%v: %s", c, r.stderr)
		assert.NotContains(t, r.stderr, "malformed", c)
	}
	r = cli("show", "--json", bare)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"releaseReason":"explicit"`, "stop by a bare prefix stopped it")
	r = cli("stop", "zz")
	assert.Equal(t, exitUsage, r.code, "a word that is no prefix is still refused")
}

// The bash completion completes a bare hex prefix, not only cs_....
func TestCompletionCompletesBareHexPrefixes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	r := runCLI(t, invocation{}, "completion", "bash")
	require.Equal(t, 0, r.code, r.stderr)
	script := filepath.Join(t.TempDir(), "c.bash")
	require.NoError(t, os.WriteFile(script, []byte(r.stdout), 0o644))
	id := messages.SessionIDPrefix + "d62f72" + strings.Repeat("0", 58)
	complete := func(cur string) string {
		prog := `codesession() { echo ` + id + `; }
source ` + script + `
COMP_WORDS=(codesession answer ` + cur + `); COMP_CWORD=2; _codesession; echo "${COMPREPLY[@]}"`
		out, err := exec.Command(bash, "-c", prog).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	assert.Equal(t, strings.TrimPrefix(id, messages.SessionIDPrefix), complete("d62f"))
	assert.Equal(t, id, complete("cs_d62"))
}

// tail -f SESSION follows through a daemon shutdown (released{shutdown} is
// not final: the session resumes after the restart) and exits 0 only at a
// final release. On the old code it exited at the shutdown.
func TestTailFollowsThroughAShutdownRelease(t *testing.T) {
	home := t.TempDir()
	addr := freeAddr(t)
	sc := writeScenario(t, opsScenario)
	cli, stop1 := consoleDaemon(t, home, "--addr", addr, "--env", "CODESESSION_SCRIPT="+sc)
	r := cli("start", "--json", "--cwd", t.TempDir(), "SLOW task")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))

	env := map[string]string{"CODESESSION_HOME": home, "CODESESSION_ADDR": addr, "NO_COLOR": "1"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"tail", "-f", strings.TrimPrefix(st.SessionID, messages.SessionIDPrefix)[:8]},
			func(k string) string { return env[k] }, nil, out, errOut)
	}()
	waitUntil(t, "tail to print the running turn", func() bool { return strings.Contains(out.String(), "working on it") })

	require.Equal(t, 0, stop1(), "the daemon shut down cleanly")
	waitUntil(t, "tail to see the shutdown release and reconnect", func() bool {
		return strings.Contains(out.String(), "shutdown") && strings.Contains(errOut.String(), "reconnecting")
	})
	select {
	case code := <-done:
		t.Fatalf("tail exited (%d) at a shutdown release: %s", code, out.String())
	default:
	}

	cli2, _ := consoleDaemon(t, home, "--addr", addr, "--env", "CODESESSION_SCRIPT="+sc)
	r = cli2("resume", "--brief", "carry on", st.SessionID)
	require.Equal(t, 0, r.code, r.stderr)
	waitUntil(t, "tail to print the resumed run's turn", func() bool { return strings.Contains(out.String(), "reply to turn") })
	r = cli2("stop", st.SessionID)
	require.Equal(t, 0, r.code, r.stderr)
	select {
	case code := <-done:
		assert.Equal(t, 0, code, "stderr: %s", errOut.String())
	case <-ctx.Done():
		t.Fatalf("tail did not exit at the final release: %s", out.String())
	}
}

// The README's "hello" brief answered without a change is an inferred
// success (exit 0) whose outcome says how it was inferred; a brief that
// asked for a change and got none still fails (issue 37). On the old code
// "hello" ended failed and run exited 1.
func TestRunHelloIsAnInferredSuccess(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	sc := writeScenario(t, `{"turns": [{"steps": [{"text": "hello! what shall we work on?"}]}]}`)
	inv := invocation{env: map[string]string{"CODESESSION_HOME": home}}
	r := runCLI(t, inv, "run", "--backend", "script", "--json", "--cwd", t.TempDir(), "--env", "CODESESSION_SCRIPT="+sc, "hello")
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	_, stopped := jsonLines(t, r.stdout)
	assert.Equal(t, messages.OutcomeSuccess, stopped.Outcome)
	out := runCLI(t, inv, "outcomes", "--json")
	require.Equal(t, exitOK, out.code, out.stderr)
	assert.Contains(t, out.stdout, `"inferredReason":"inferred: the brief asks for an answer (its wording asks for no change) and the agent answered"`)

	r = runCLI(t, inv, "run", "--backend", "script", "--json", "--cwd", t.TempDir(), "--env", "CODESESSION_SCRIPT="+sc, "fix the typo in hello.go")
	assert.Equal(t, exitFailed, r.code, "a change asked for and none made: stderr: %s", r.stderr)
}

func TestVersionJSONAndSmallFlags(t *testing.T) {
	t.Parallel()
	r := runCLI(t, invocation{}, "version", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var v versionInfo
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
	assert.Equal(t, "github.com/codesession/codesession", v.Module)
	assert.NotEmpty(t, v.Version)
	assert.Regexp(t, `^go1\.\d+`, v.Go)
	r = runCLI(t, invocation{}, "version")
	assert.Contains(t, r.stdout, "module github.com/codesession/codesession")

	// ls --status rejects an unknown state before it asks the daemon; --since
	// takes days as prune's --older-than does
	r = runCLI(t, invocation{}, "ls", "--status", "runing")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, `unknown state "runing"`)
	c, err := parseLsFlags([]string{"--since", "1d", "--status", "waiting,ended"})
	require.NoError(t, err)
	assert.Equal(t, 24*time.Hour, c.since)
	_, err = parseLsFlags([]string{"--since", "yesterday"})
	assert.Error(t, err)
	r = runCLI(t, invocation{}, "outcomes", "--since", "1d")
	assert.Equal(t, exitOK, r.code, r.stderr)
}

// prune --dry-run works while the daemon runs (it lists from the daemon);
// the real prune still refuses. On the old code the dry run was refused.
func TestPruneDryRunWhileTheDaemonRuns(t *testing.T) {
	home := t.TempDir()
	addr := freeAddr(t)
	cli, _ := consoleDaemon(t, home, "--addr", addr, "--env", "CODESESSION_SCRIPT="+writeScenario(t, opsScenario))
	r := cli("start", "--json", "--cwd", t.TempDir(), "a brief")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, 0, cli("stop", st.SessionID).code)
	time.Sleep(10 * time.Millisecond) // the cutoff below is "now": the record must be older (not a speed assertion)

	inv := invocation{env: map[string]string{"CODESESSION_HOME": home, "CODESESSION_ADDR": addr}}
	r = runCLI(t, inv, "prune", "--dry-run", "--older-than", "1ms")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "would remove "+st.SessionID)
	assert.Contains(t, r.stderr, "a daemon holds")
	r = runCLI(t, inv, "prune", "--older-than", "1ms")
	assert.NotEqual(t, exitOK, r.code, "the real prune refuses beside a daemon")
	assert.DirExists(t, filepath.Join(home, "sessions", st.SessionID))
}

// run prints a turn's text once: streamed live, not again in the result.
// On the old code the text came twice.
func TestRunPrintsATurnsTextOnce(t *testing.T) {
	t.Parallel()
	sc := writeScenario(t, `{"turns": [{"steps": [{"text": "a unique line of reply"}]}]}`)
	r := runCLI(t, invocation{}, "run", "--backend", "script", "--cwd", t.TempDir(), "--env", "CODESESSION_SCRIPT="+sc, "hello")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, 1, strings.Count(r.stdout, "a unique line of reply"), r.stdout)
	assert.Contains(t, r.stdout, "== turn 1: turn_complete")
}

// read on a terminal shows a spinner with the session's state while it
// waits, and clears it before the result; --quiet and --json show none.
func TestReadShowsASpinnerWhileWaiting(t *testing.T) {
	home := t.TempDir()
	addr := freeAddr(t)
	cli, _ := consoleDaemon(t, home, "--addr", addr, "--env", "CODESESSION_SCRIPT="+writeScenario(t, opsScenario))
	r := cli("start", "--json", "--cwd", t.TempDir(), "ASK first")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))

	env := map[string]string{"CODESESSION_HOME": home, "CODESESSION_ADDR": addr, "NO_COLOR": "1"}
	s := &streams{getenv: func(k string) string { return env[k] }, stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	c, err := parseReadFlags([]string{st.SessionID})
	require.NoError(t, err)
	var tty bytes.Buffer
	c.spinnerTo = &tty
	require.NoError(t, c.exec(context.Background(), s))
	assert.Contains(t, tty.String(), shortID(st.SessionID)+" ", "the spinner names the session")
	assert.Regexp(t, `(running|waiting), round \d`, tty.String(), "and its state")
	assert.True(t, strings.HasSuffix(tty.String(), "\r\x1b[K"), "the line is cleared before the result: %q", tty.String())
	assert.Contains(t, s.stdout.(*bytes.Buffer).String(), "== turn 1: clarification")
	assert.NotContains(t, s.stdout.(*bytes.Buffer).String(), "\x1b[K", "nothing of the spinner on stdout")

	for _, flag := range []string{"--quiet", "--json"} {
		c, err := parseReadFlags([]string{flag, st.SessionID})
		require.NoError(t, err)
		assert.Nil(t, c.spinnerWriter(s), flag)
	}
	c, err = parseReadFlags([]string{st.SessionID})
	require.NoError(t, err)
	assert.Nil(t, c.spinnerWriter(s), "not a terminal: no spinner")
}
