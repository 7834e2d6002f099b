package curation_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/actors/runtimetest"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/droid"
	"github.com/codesession/codesession/transports/droid/droidtest"
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
	user := t.TempDir() // the user's HOME: droid's BYOK settings point at the mock
	entry := curation.Entry{ID: "probe", Name: "Probe", Tier: messages.TierLocalMCP,
		Source: curation.Source{Repo: "codesession/mcpprobe", Commit: strings.Repeat("c", 40)},
		Detect: []curation.Rule{{Kind: curation.RuleFileExists, Path: "probe.txt"}},
		MCP:    &curation.MCPSpec{Name: "probe", Command: probe}}
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, "probe.txt"), []byte("x"), 0o644))
	rig := runtimetest.New(t, "droid-provision", runtimetest.Config{
		Backend: droid.New(droid.WithBinary(bin)),
		Env: func(mock *modelmock.Server) map[string]string {
			droidtest.WriteSettings(t, user, mock.URL(), false)
			return map[string]string{"HOME": user}
		},
		Prepare: func(cfg *config.Config) { // the catalog and the approval, before the runtime reads them
			data, err := json.Marshal(curation.Catalog{Version: 1, Entries: []curation.Entry{entry}})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(cfg.Home, curation.CatalogFile), data, 0o600))
			l := curation.NewLedger(cfg.Home, nil)
			_, _ = l.Check(entry, repo, "")
			_, err = l.Decide(messages.ApprovalDecision{ID: curation.ApprovalID(entry), Decision: "approve"})
			require.NoError(t, err)
		},
	})
	rt, ctx := rig.RT, rig.Ctx
	sid := rig.StartWith(messages.Start{Brief: "hello", Cwd: repo, Model: droidtest.MockModelID})
	r := rig.Read(sid, messages.KindTurnComplete, false)
	assert.Equal(t, "PONG(model=mock-model): hello", r.Text, "droid ran with the user's BYOK settings")

	rec, err := rt.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	require.NotNil(t, rec.Provision)
	assert.Equal(t, []string{"probe"}, rec.Provision.Applied)
	dir := curation.ProvisionDir(rig.Home, sid)
	require.FileExists(t, filepath.Join(dir, "droid-home", ".factory", "mcp.json"))
	m, ok := rt.Manifest(sid)
	require.True(t, ok)
	require.NotEmpty(t, m.Argv, "the manifest records droid's argv")
	assert.Equal(t, "droid", filepath.Base(m.Argv[0]))
	assert.Contains(t, strings.Join(m.Argv, " "), "--input-format stream-jsonrpc")
	assert.Contains(t, m.Files[0].Path, "droid-home/.factory/mcp.json")

	_, err = rt.Stop(ctx, rig.Scope, messages.Stop{SessionID: sid, Outcome: messages.OutcomeSuccess})
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
