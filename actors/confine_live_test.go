package actors

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/confinetest"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestLiveRuntimeConfinesTheAgent: a runtime with its daemon home and
// token starts a real claude-code session (against modelmock) whose
// agent's shell writes outside the workspace and reads the daemon's
// token: both fail, a write inside works, and the session's record says
// what containment applied (the daemon's home denied, the workspace
// writable). Fails on the code before the daemon's home was denied (the
// token was read).
func TestLiveRuntimeConfinesTheAgent(t *testing.T) {
	confinetest.NeedLandlock(t)
	bin := subprocesstest.Find(t, claudecode.EnvBinary, "npm install @anthropic-ai/claude-code@"+claudecode.PinnedVersion, "claude")
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	cfg := testConfig(t)
	cfg.DefaultBackend = claudecode.ID
	cfg.DefaultMaxPosture = messages.PostureFull
	cfg.Env = map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test", "HOME": t.TempDir()}
	token := filepath.Join(cfg.Home, "token")
	require.NoError(t, os.WriteFile(token, []byte("DAEMON-TOKEN-VALUE"), 0o600))
	rt, err := New(cfg, WithBackends(transports.NewRegistry(claudecode.New(claudecode.WithBinary(bin)))))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rt.Close(ctx)
	})
	ws, outside := t.TempDir(), t.TempDir()
	// paths in base64: the permission gate must not be what stops them
	b64 := func(s string) string { return "echo " + base64.StdEncoding.EncodeToString([]byte(s)) + " | base64 -d" }
	cmd := b64(filepath.Join(outside, "touched")) + " | xargs touch; " + b64(token) + " | xargs cat; " +
		"echo inside > ./inside.txt; echo SHELL-DONE"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a claude boot on a loaded machine
	defer cancel()
	st, err := rt.Start(ctx, config.DefaultScope, messages.Start{Brief: "TOOL:BASH " + cmd, Cwd: ws,
		MaxPosture: messages.PostureFull, InitialPosture: messages.PostureFull})
	require.NoError(t, err)
	res, err := rt.ReadTurn(ctx, config.DefaultScope, messages.ReadTurn{SessionID: st.SessionID})
	require.NoError(t, err)
	require.Equal(t, messages.TurnCompleted, res.State, "%+v", res)

	var out strings.Builder
	for _, r := range mock.ToolResults() {
		out.WriteString(r.Content + "\n")
	}
	assert.Contains(t, out.String(), "SHELL-DONE", "the command ran")
	assert.NotContains(t, out.String(), "DAEMON-TOKEN-VALUE", "the daemon's token is unreadable")
	assert.NoFileExists(t, filepath.Join(outside, "touched"), "no write outside the workspace")
	assert.FileExists(t, filepath.Join(ws, "inside.txt"), "writes inside the workspace work")

	meta, err := rt.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	run := meta.LatestRun()
	require.NotNil(t, run)
	a := run.Containment
	require.NotNil(t, a, "the record says what containment applied")
	assert.Positive(t, a.LandlockABI)
	assert.Contains(t, a.ReadDenied, cfg.Home, "the daemon's home")
	assert.Contains(t, a.Writable, ws)
	assert.Equal(t, messages.NetworkOpen, a.Network)
}
