package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/gate/gatetest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc"
)

// TestBashIsConfinedToTheWorkspace runs the shell table through the
// real toolEnv Open builds: under Landlock `cd / && touch X` fails and the
// agent sees why, `touch ./X` works, reads outside still work, and the
// session's own TMPDIR is writable where /tmp is not.
func TestBashIsConfinedToTheWorkspace(t *testing.T) {
	if proc.LandlockABI() < 1 {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Landlock on this kernel: CI must run the confinement tests")
		}
		t.Skip("no Landlock on this kernel: bash confinement is best effort and off here")
	}
	f := gatetest.New(t)
	tr := New(WithProcessEnv(nil))
	env, err := tr.toolEnv(f.Workspace(t, true), transports.SessionSpec{Cwd: f.Given})
	require.NoError(t, err)
	defer os.RemoveAll(env.tmp)
	outside := filepath.Join(os.TempDir(), "codesession-landlock-"+transports.RandomHex(6))
	defer os.Remove(outside)

	r := call(t, &env, ToolBash, map[string]any{"command": "cd / && touch " + outside})
	assert.True(t, r.isError, r.output)
	assert.Contains(t, r.output, "Permission denied", "the agent sees the refusal as its tool result")
	assert.NoFileExists(t, outside)

	r = call(t, &env, ToolBash, map[string]any{"command": "touch ./made-here && cat /etc/passwd >/dev/null && touch \"$TMPDIR/scratch\""})
	assert.False(t, r.isError, r.output)
	assert.FileExists(t, filepath.Join(f.Real, "made-here"))

	r = call(t, &env, ToolBash, map[string]any{"command": "echo x > ../../outside/new.txt"})
	assert.True(t, r.isError, r.output)
	assert.NoFileExists(t, filepath.Join(f.Root, "outside", "new.txt"))
	r = call(t, &env, ToolBash, map[string]any{"command": "echo x > link-out/new.txt"})
	assert.True(t, r.isError, "a symlink out of the workspace is outside for Landlock too: %s", r.output)
}

// TestBashEnvironmentPolicy: founder credentials refuse the start unless
// named for the backend, and bash sees a passed one, never an unnamed one.
func TestBashEnvironmentPolicy(t *testing.T) {
	daemon := []string{"PATH=/usr/bin", "GITEA_TOKEN=gitea-secret-123", "SSH_AUTH_SOCK=/tmp/agent", "UNLISTED=1", "OPENAI_API_KEY=sk-x123456"}
	tr := New(WithProcessEnv(nil))
	tr.environ = func() []string { return daemon }

	err := tr.CheckEnv(transports.SessionSpec{})
	var me *messages.Error
	require.True(t, errors.As(err, &me), "%v", err)
	assert.Equal(t, transports.FieldFounderCredentials, me.Field)
	assert.Contains(t, me.Message, "GITEA_TOKEN, SSH_AUTH_SOCK")
	var ce *proc.CredentialError
	assert.True(t, errors.As(err, &ce))

	spec := transports.SessionSpec{PassEnv: []string{"GITEA_TOKEN", "SSH_AUTH_SOCK"}}
	require.NoError(t, tr.CheckEnv(spec))
	env := strings.Join(bashEnv(daemon, spec), "\n")
	assert.Contains(t, env, "GITEA_TOKEN=gitea-secret-123")
	assert.NotContains(t, env, "UNLISTED", "an allowlist, not the daemon's environment")
	assert.NotContains(t, env, "OPENAI_API_KEY", "the loop's model key never reaches bash")

	env = strings.Join(bashEnv(daemon, transports.SessionSpec{PassEnv: []string{"SSH_AUTH_SOCK"}}), "\n")
	assert.NotContains(t, env, "GITEA_TOKEN")
}

// TestBashTakesTheSessionsNetworkMode: the runtime's network rules reach
// bash (before, native's bash dropped them: the record said model-only and
// bash connected anywhere).
func TestBashTakesTheSessionsNetworkMode(t *testing.T) {
	if proc.LandlockABI() < proc.NetABI {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Landlock TCP rules on this kernel: CI must run the confinement tests")
		}
		t.Skip("no Landlock TCP rules on this kernel")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("REACHED\n"))
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	f := gatetest.New(t)
	tr := New(WithProcessEnv(nil))
	env, err := tr.toolEnv(f.Workspace(t, true), transports.SessionSpec{Cwd: f.Given,
		Confine: &proc.Confinement{Network: &proc.NetRules{ConnectTCP: []uint16{1}}}})
	require.NoError(t, err)
	defer os.RemoveAll(env.tmp)
	r := call(t, &env, ToolBash, map[string]any{"command": fmt.Sprintf("cat < /dev/tcp/127.0.0.1/%d", port)})
	assert.NotContains(t, r.output, "REACHED", "a port the session's rules do not allow")
}

// TestSessionTmpIsRecordedForTheBootSweep: the session's TMPDIR is made
// through its process group, so a runtime that dies with the session open
// leaves a record by which the next boot's sweep removes the folder;
// Close removes the folder and the record.
func TestSessionTmpIsRecordedForTheBootSweep(t *testing.T) {
	kitDir := filepath.Join(t.TempDir(), "procs")
	kit, err := proc.NewKit(kitDir, "rt-native")
	require.NoError(t, err)
	defer kit.Close()
	l := openLive(t, &modelmock.Scenario{}, transports.SessionSpec{SessionID: "s-tmp", Procs: kit.Group("s-tmp")})

	ents, err := os.ReadDir(kitDir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "the TMPDIR's record")
	b, err := os.ReadFile(filepath.Join(kitDir, ents[0].Name()))
	require.NoError(t, err)
	var rec proc.Record
	require.NoError(t, json.Unmarshal(b, &rec))
	assert.Equal(t, "rt-native", rec.Runtime)
	assert.Equal(t, "s-tmp", rec.SessionID)
	assert.DirExists(t, rec.Tmp)

	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	require.NoError(t, l.s.Close(ctx))
	assert.NoDirExists(t, rec.Tmp, "Close removes the TMPDIR")
	ents, err = os.ReadDir(kitDir)
	require.NoError(t, err)
	assert.Empty(t, ents, "and its record")
}
