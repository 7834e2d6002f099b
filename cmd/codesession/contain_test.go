package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// binary builds codesession once for the containment tests.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "codesession-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "codesession")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return builtBin
}

// startServe runs `codesession serve` with the given extra process
// environment and backend --env entries.
func startServe(t *testing.T, home string, procEnv []string, backendEnv ...string) (*daemonProc, string) {
	t.Helper()
	addr := freeAddr(t)
	args := []string{"serve", "--addr", addr, "--home", home}
	for _, kv := range backendEnv {
		args = append(args, "--env", kv)
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(append(os.Environ(), "CODESESSION_LOG_LEVEL=warn", "CODESESSION_ADDR=", "CODESESSION_CONFIG=",
		"CODESESSION_DAEMON_MAX_POSTURE=full"), procEnv...) // these tests start at full
	p := &daemonProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr, cmd.Stdout = p.stderr, p.stderr
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		sweepHome(home)
	})
	require.Equal(t, addr, waitListening(t, p.stderr))
	return p, addr
}

// sweepHome clears what a daemon these tests killed left of its home's
// containment, as the next daemon's boot sweep on that home would: the
// process groups on record and the cgroup dirs. A killed runtime's cgroup
// dirs outlive it, and a test's home is never opened again, so without
// this they piled up under the host's cgroup root, run after run. It
// returns the home's cgroup subtree ("" without cgroups).
func sweepHome(home string) string {
	k, err := proc.NewKit(filepath.Join(home, "run", "procs"), "test-cleanup")
	if err != nil {
		return ""
	}
	_, _ = k.Sweep(func(string) bool { return false }) // every runtime of the home is dead
	return k.Cgroups().Root
}

func sleeper(marker string) string {
	// a background child, a setsid escapee and a foreground sleep, all
	// carrying the marker in argv
	return fmt.Sprintf("sleep %[1]s & setsid sleep %[1]s & sleep %[1]s", marker)
}

// TestDaemonSIGKILLLeavesNoBackendProcess SIGKILLs a real daemon mid-turn
// with a claude-code session (the real CLI, running a Bash command) and a
// native session (its bash running sleeps): once the watchdogs have run no
// process of either session remains, by process group and by the marker in argv, the setsid
// child included where the host has a writable cgroup v2; and the next
// daemon's boot removes the temporary folders the dead one left.
func TestDaemonSIGKILLLeavesNoBackendProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon with real backends")
	}
	claude := claudeBin(t)
	mClaude := strconv.Itoa(4_000_000 + rand.IntN(900_000))
	mNative := strconv.Itoa(5_000_000 + rand.IntN(900_000))
	bashInput := func(name, cmd string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"command": cmd, "description": "sleep", "timeout_seconds": 600})
		if name == "Bash" {
			b, _ = json.Marshal(map[string]any{"command": cmd, "description": "sleep", "timeout": 600000})
		}
		return b
	}
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		// Claude Code refuses chained sleeps in a command line, so its
		// command runs them from a script in the workspace
		{Match: modelmock.Match{Text: "CLAUDE-SLEEP"}, Steps: []modelmock.Step{
			{Tool: &modelmock.ToolCall{Name: "Bash", Input: bashInput("Bash", "sh spin.sh "+mClaude)}}, {Text: "done"}}},
		{Match: modelmock.Match{Text: "NATIVE-SLEEP"}, Steps: []modelmock.Step{
			{Tool: &modelmock.ToolCall{Name: "bash", Input: bashInput("bash", sleeper(mNative))}}, {Text: "done"}}},
	}}
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	home := t.TempDir()
	d, addr := startServe(t, home, []string{"CODESESSION_CLAUDE_BIN=" + claude},
		"ANTHROPIC_BASE_URL="+mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test", "CODESESSION_NATIVE_PROVIDER=anthropic",
		"HOME="+t.TempDir())
	env := invocation{env: map[string]string{"CODESESSION_HOME": home, "CODESESSION_ADDR": addr}}
	defer proctest.KillMarker(mClaude)
	defer proctest.KillMarker(mNative)

	var sids []string
	for _, s := range []struct{ backend, brief string }{{"claude-code", "CLAUDE-SLEEP"}, {"native", "NATIVE-SLEEP"}} {
		ws := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(ws, "spin.sh"), []byte(sleeper(`"$1"`)+"\n"), 0o644))
		r := runCLI(t, env, "start", "--json", "--backend", s.backend, "--posture", "full", "--max-posture", "full",
			"--cwd", ws, s.brief)
		require.Equal(t, 0, r.code, "%s: %s", s.backend, r.stderr)
		var st messages.StartResult
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
		sids = append(sids, st.SessionID)
	}
	defer func() {
		if t.Failed() {
			for _, sid := range sids {
				b, _ := os.ReadFile(filepath.Join(home, "sessions", sid, "events.jsonl"))
				t.Logf("session %s events:\n%s", sid, b)
			}
			t.Logf("daemon stderr:\n%s", d.stderr.String())
		}
	}()
	groups := map[int]bool{}
	waitUntil(t, "both sessions' sleeps to run", func() bool {
		c, n := proctest.WithMarker(mClaude), proctest.WithMarker(mNative)
		for _, pid := range append(c, n...) {
			if g := proctest.Pgid(pid); g > 0 {
				groups[g] = true
			}
		}
		return len(c) >= 3 && len(n) >= 3
	})
	cg := proc.DetectCgroups()

	require.NoError(t, d.cmd.Process.Signal(syscall.SIGKILL))
	d.wait(t, time.Minute) // only stops a hang
	killedAt := time.Now()
	left := func() []int {
		var out []int
		for _, m := range []string{mClaude, mNative} {
			for _, pid := range proctest.WithMarker(m) {
				if cg.Root != "" || !groups[proctest.Pgid(pid)] {
					out = append(out, pid)
				}
			}
		}
		for g := range groups {
			out = append(out, proctest.InGroup(g)...)
		}
		return out
	}
	// the watchdogs are shells that must be scheduled to see their lifeline
	// close and kill: a minute only stops a hang (5 s judged the machine)
	for time.Since(killedAt) < time.Minute && len(left()) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if cg.Root == "" {
		t.Logf("no writable cgroup v2 here (%s): setsid escapees are outside this check", cg.Reason)
		for _, m := range []string{mClaude, mNative} {
			for _, pid := range proctest.WithMarker(m) {
				if !groups[proctest.Pgid(pid)] {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	var desc []string
	for _, pid := range left() {
		argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		desc = append(desc, fmt.Sprintf("%d (group %d): %s", pid, proctest.Pgid(pid), strings.ReplaceAll(string(argv), "\x00", " ")))
	}
	assert.Empty(t, desc, "processes outlived the SIGKILLed daemon by a minute (groups %v)", groups)
	t.Logf("the daemon's backend processes were gone %s after its SIGKILL", time.Since(killedAt).Round(time.Millisecond))

	// the dead daemon's temporary folders (the native session's TMPDIR,
	// the diff captures' scratch, the CLI's own TMPDIR) were recorded
	// with its processes: the next daemon's boot removes them
	var tmps []string
	for _, r := range proctest.Tmps(t, filepath.Join(home, "run", "procs")) {
		tmps = append(tmps, r.Tmp)
	}
	require.NotEmpty(t, tmps, "the dead daemon's temporary folders are recorded")
	for _, p := range tmps {
		assert.DirExists(t, p, "left by the SIGKILL")
	}
	d2, _ := startServe(t, home, nil)
	waitUntil(t, "the next boot to remove the dead daemon's temporary folders", func() bool {
		for _, p := range tmps {
			if _, err := os.Stat(p); err == nil {
				return false
			}
		}
		return true
	})
	t.Logf("the next boot removed the %d temporary folders the dead daemon left", len(tmps))
	require.NoError(t, d2.cmd.Process.Signal(syscall.SIGTERM))
	d2.wait(t, time.Minute)
	if root := sweepHome(home); root != "" {
		// the killed daemon's session cgroups are empty but still there
		// until a sweep of the home removes them
		assert.NoDirExists(t, root, "the sweep left the home's cgroup subtree")
	}
}

// TestFounderCredentialsRefuseTheStart: a daemon whose environment holds
// GITEA_TOKEN and SSH_AUTH_SOCK refuses to start a session (exit 20, with
// the names and the way out); with both passed to native by name the
// session's bash gets the token, and no event or record holds its value.
func TestFounderCredentialsRefuseTheStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon")
	}
	token := "gitea-" + strconv.Itoa(rand.IntN(1_000_000_000))
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "PRINT-TOKEN"}, Steps: []modelmock.Step{
			{Tool: &modelmock.ToolCall{Name: "bash", Input: json.RawMessage(`{"command":"printf %s \"$GITEA_TOKEN\" > token.txt; echo token=$GITEA_TOKEN"}`)}},
			{Text: "printed {{result}}"}}},
	}}
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	creds := []string{"GITEA_TOKEN=" + token, "SSH_AUTH_SOCK=/tmp/codesession-test-agent.sock"}
	backendEnv := []string{"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test", "CODESESSION_NATIVE_PROVIDER=anthropic"}

	home := t.TempDir()
	_, addr := startServe(t, home, creds, backendEnv...)
	env := invocation{env: map[string]string{"CODESESSION_HOME": home, "CODESESSION_ADDR": addr}}
	r := runCLI(t, env, "start", "--json", "--backend", "native", "--posture", "full", "--max-posture", "full", "--cwd", t.TempDir(), "PRINT-TOKEN")
	assert.Equal(t, 20, r.code, r.stderr)
	assert.Contains(t, r.stderr, "GITEA_TOKEN, SSH_AUTH_SOCK")
	assert.Contains(t, r.stderr, "backends.native.passEnv")
	assert.NotContains(t, r.stderr, token)

	// named for native in the config: the start goes on
	home2 := t.TempDir()
	cfg := `{"backends": {"native": {"passEnv": ["GITEA_TOKEN", "SSH_AUTH_SOCK"]}}}`
	require.NoError(t, os.WriteFile(filepath.Join(home2, "config.json"), []byte(cfg), 0o600))
	_, addr2 := startServe(t, home2, creds, backendEnv...)
	env2 := invocation{env: map[string]string{"CODESESSION_HOME": home2, "CODESESSION_ADDR": addr2}}
	ws := t.TempDir()
	r = runCLI(t, env2, "start", "--json", "--backend", "native", "--posture", "full", "--max-posture", "full", "--cwd", ws, "PRINT-TOKEN")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	r = runCLI(t, env2, "read", "--json", st.SessionID)
	require.Equal(t, 0, r.code, r.stderr)
	got, err := os.ReadFile(filepath.Join(ws, "token.txt"))
	require.NoError(t, err)
	assert.Equal(t, token, string(got), "bash got the variable passed to it by name")
	assert.NotContains(t, r.stdout, token)
	assert.Contains(t, r.stdout, "[REDACTED]")
	r = runCLI(t, env2, "stop", st.SessionID)
	require.Equal(t, 0, r.code, r.stderr)

	// nothing under the home holds the value: events, record, logs
	_ = filepath.Walk(home2, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			assert.NotContains(t, string(b), token, "%s holds the token", p)
		}
		return nil
	})
}
