package claudecode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/contain"
	"github.com/codesession/codesession/transports/modelmock"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
)

// TestLiveContainedProcessTree runs the real claude CLI the way the
// runtime does (contain.Wrap: environment check, process kit, Landlock)
// at posture full, and has the model's Bash touch a file outside the
// workspace, read a planted ~/.ssh/id_test, and start a setsid grandchild
// that writes outside: all three fail, a write inside succeeds and the
// session takes another turn. Before it, a founder credential in the
// daemon's environment refuses the start (exit 20's typed error), and the
// environ of every process of the session holds no daemon variable off
// the allowlist. Not parallel: it sets the daemon's environment.
func TestLiveContainedProcessTree(t *testing.T) {
	bin := claudeBinary(t)
	if prockit.LandlockABI() < 1 {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Landlock on this kernel: CI must run the confinement tests")
		}
		t.Skip("no Landlock on this kernel")
	}
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	kitDir := t.TempDir()
	kit, err := prockit.NewKit(kitDir, "rt-contain")
	require.NoError(t, err)
	t.Cleanup(kit.Close)
	tr := contain.Wrap(New(WithBinary(bin)), contain.Options{Kit: kit})

	ws, home, outside := t.TempDir(), t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_test"), []byte("PLANTED-SSH-KEY"), 0o600))
	spec := transports.SessionSpec{SessionID: "cs_contain", Cwd: ws, Home: home, Model: "claude-mock-1",
		Posture: messages.PostureFull,
		Env:     []string{"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test"}}

	t.Setenv("GITEA_TOKEN", "gitea-founder-secret")
	_, err = tr.Open(ctxFor(t, time.Minute), spec, newRecorder().sink)
	var ce *prockit.CredentialError
	require.True(t, errors.As(err, &ce), "a founder credential in the daemon's environment refuses the start: %v", err)
	assert.Equal(t, 20, ce.ExitCode())
	assert.Equal(t, transports.FieldFounderCredentials, err.(*messages.Error).Field)
	require.NoError(t, os.Unsetenv("GITEA_TOKEN"))
	t.Setenv("CODESESSION_UNLISTED_PLANT", "unlisted-daemon-value")

	rec := newRecorder()
	sess, err := tr.Open(ctxFor(t, time.Minute), spec, rec.sink)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(ctxFor(t, 30*time.Second)) })

	envs := proctest.Environs(t, kitDir)
	require.NotEmpty(t, envs, "the session's processes are recorded")
	for pid, env := range envs {
		joined := strings.Join(env, "\n")
		assert.NotContains(t, joined, "gitea-founder-secret", "pid %d", pid)
		assert.NotContains(t, joined, "unlisted-daemon-value", "pid %d: an allowlist, not a scrub list", pid)
		assert.Contains(t, joined, "TMPDIR=", "pid %d: a private TMPDIR", pid)
	}

	cmd := "touch " + filepath.Join(outside, "touched") + "; cat ~/.ssh/id_test; " +
		"(setsid sh -c 'echo x > " + filepath.Join(outside, "y") + "; echo ran > " + filepath.Join(ws, "grandchild") + "' &); " +
		"sleep 1; echo inside > " + filepath.Join(ws, "inside.txt") + "; echo SHELL-DONE"
	require.NoError(t, sess.StartTurn(ctxFor(t, 10*time.Second), 1, "TOOL:BASH "+cmd))
	end := rec.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(rec.all()))
	var out string
	for _, r := range mock.ToolResults() {
		if r.ToolName == "Bash" {
			out += r.Content
		}
	}
	assert.Contains(t, out, "SHELL-DONE", "the command ran: %s", dump(rec.all()))
	assert.NotContains(t, out, "PLANTED-SSH-KEY", "~/.ssh is unreadable")
	assert.NoFileExists(t, filepath.Join(outside, "touched"))
	assert.FileExists(t, filepath.Join(ws, "inside.txt"), "writes inside the workspace work")
	assert.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(ws, "grandchild")); return err == nil },
		20*time.Second, 50*time.Millisecond, "the setsid grandchild ran")
	assert.NoFileExists(t, filepath.Join(outside, "y"), "the setsid grandchild is confined too")

	require.NoError(t, sess.StartTurn(ctxFor(t, 10*time.Second), 2, "say pong"))
	end2 := rec.turnEnd(t, 2)
	require.Equal(t, messages.TurnCompleted, end2.State, dump(rec.all()))
	assert.Equal(t, "PONG(model=claude-mock-1): say pong", end2.Text)
}
