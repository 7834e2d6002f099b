package curation_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/droid"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestLiveDroidSessionThroughTheRuntime: a droid session the runtime
// starts in a project that uses an approved stdio MCP server runs with its
// provisioned HOME (the user's HOME from the config's env linked in), its
// launch manifest records the argv droid's process started with (from its
// process record: droid says no argv of its own), and its release removes
// the provisioned HOME and keeps the manifest.
func TestLiveDroidSessionThroughTheRuntime(t *testing.T) {
	bin := subprocesstest.Find(t, droid.EnvBinary, "npm install droid@"+droid.PinnedVersion, "droid")
	probe := filepath.Join(t.TempDir(), "mcpprobe")
	out, err := exec.Command("go", "build", "-o", probe, "./testdata/mcpprobe").CombinedOutput()
	require.NoError(t, err, "%s", out)
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	user := t.TempDir()
	settings := `{"customModels":[{"model":"mock-model","displayName":"Loopback Mock (chat)","baseUrl":"` + mock.URL() +
		`/v1","apiKey":"sk-mock","provider":"generic-chat-completion-api","maxOutputTokens":8192}]}`
	require.NoError(t, os.MkdirAll(filepath.Join(user, ".factory"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(user, ".factory", "settings.json"), []byte(settings), 0o600))

	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = droid.ID
	cfg.Supervision.ShutdownTimeout = config.Duration(10 * time.Second)
	cfg.Env = map[string]string{"HOME": user}
	entry := curation.Entry{ID: "probe", Name: "Probe", Tier: messages.TierLocalMCP,
		Source: curation.Source{Repo: "codesession/mcpprobe", Commit: strings.Repeat("c", 40)},
		Detect: []curation.Rule{{Kind: curation.RuleFileExists, Path: "probe.txt"}},
		MCP:    &curation.MCPSpec{Name: "probe", Command: probe}}
	data, err := json.Marshal(curation.Catalog{Version: 1, Entries: []curation.Entry{entry}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(cfg.Home, curation.CatalogFile), data, 0o600))
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, "probe.txt"), []byte("x"), 0o644))
	l := curation.NewLedger(cfg.Home, nil)
	_, _ = l.Check(entry, repo, "")
	_, err = l.Decide(messages.ApprovalDecision{ID: curation.ApprovalID(entry), Decision: "approve"})
	require.NoError(t, err)

	rt, err := actors.New(cfg, actors.WithBackends(transports.NewRegistry(droid.New(droid.WithBinary(bin)))))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rt.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const scope = "droid-provision"
	st, err := rt.Start(ctx, scope, messages.Start{Brief: "hello", Cwd: repo, Model: "custom:Loopback-Mock-(chat)-0"})
	require.NoError(t, err)
	r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, "PONG(model=mock-model): hello", r.Text, "droid ran with the user's BYOK settings")

	rec, err := rt.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	require.NotNil(t, rec.Provision)
	assert.Equal(t, []string{"probe"}, rec.Provision.Applied)
	dir := curation.ProvisionDir(cfg.Home, st.SessionID)
	require.FileExists(t, filepath.Join(dir, "droid-home", ".factory", "mcp.json"))
	m, ok := rt.Manifest(st.SessionID)
	require.True(t, ok)
	require.NotEmpty(t, m.Argv, "the manifest records droid's argv")
	assert.Equal(t, "droid", filepath.Base(m.Argv[0]))
	assert.Contains(t, strings.Join(m.Argv, " "), "--input-format stream-jsonrpc")
	assert.Contains(t, m.Files[0].Path, "droid-home/.factory/mcp.json")

	_, err = rt.Stop(ctx, scope, messages.Stop{SessionID: st.SessionID, Outcome: messages.OutcomeSuccess})
	require.NoError(t, err)
	// the release's cleanup runs once the session's actor is gone, just
	// after stop answers
	assert.Eventually(t, func() bool {
		_, err := os.Lstat(filepath.Join(dir, "droid-home"))
		return os.IsNotExist(err)
	}, time.Minute, 20*time.Millisecond, "released: the provisioned HOME is gone")
	assert.FileExists(t, filepath.Join(dir, curation.ManifestFile))
	sessions, err := os.ReadDir(filepath.Join(user, ".factory", "sessions"))
	require.NoError(t, err)
	assert.NotEmpty(t, sessions, "droid's session stays in the user's home (a resume finds it)")
}
