package codex_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/codex"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
)

// TestRuntimeWarmPoolAdoptsAndCloseDrains runs the warm pool through
// actors.Runtime and its containment: the second start adopts the
// app-server pooled after the first session's turn (its pooled CODEX_HOME
// now links to the second session's), and Runtime.Close leaves no process
// of any session or of the pool (checked by process group), no record and
// no pooled CODEX_HOME.
func TestRuntimeWarmPoolAdoptsAndCloseDrains(t *testing.T) {
	bin := codex.CodexBinaryForTest(t)
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = codex.ID
	cfg.Supervision.ShutdownTimeout = config.Duration(10 * time.Second)
	cfg.Env = map[string]string{codex.EnvBaseURL: mock.URL() + "/v1", codex.EnvAPIKey: "sk-mock", "HOME": t.TempDir()}
	root := t.TempDir()
	tr := codex.New(codex.WithBinary(bin), codex.WithHomeRoot(root), codex.WithWarmPool(1))
	t.Cleanup(func() { tr.DrainWarm(nil) })
	rt, err := actors.New(cfg, actors.WithBackends(transports.NewRegistry(tr)))
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = rt.Close(ctx)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const scope = "codex-warm"
	kitDir := filepath.Join(cfg.Home, "run", "procs")
	work := t.TempDir()
	turn := func(model string, p messages.Posture) string {
		t.Helper()
		st, err := rt.Start(ctx, scope, messages.Start{Brief: "hello", Cwd: work, Model: model, InitialPosture: p, MaxPosture: messages.PostureFull})
		require.NoError(t, err)
		r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID})
		require.NoError(t, err)
		require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
		assert.Contains(t, r.Text, "model="+model)
		return st.SessionID
	}

	first := turn("gpt-5.5", messages.PostureDefault)
	require.Eventually(t, func() bool { return tr.WarmReady() == 1 }, 3*time.Minute, 50*time.Millisecond, "the first turn refilled the pool")
	pooled := proctest.WarmGroups(t, kitDir)
	require.Len(t, pooled, 1)
	warmHomes, _ := filepath.Glob(filepath.Join(root, ".warm-*"))
	require.Len(t, warmHomes, 1)

	second := turn("gpt-5.4", messages.PostureFull)
	link, err := os.Readlink(warmHomes[0])
	require.NoError(t, err, "the pooled CODEX_HOME was adopted")
	assert.Equal(t, filepath.Join(root, second), link, "by the second session")
	for p := range pooled {
		assert.True(t, proctest.GroupAlive(p), "the adopted process runs the second session")
	}
	require.Eventually(t, func() bool { return tr.WarmReady() == 1 }, 3*time.Minute, 50*time.Millisecond, "the second session's turn refilled the pool")

	groups := map[int]string{}
	files, _ := filepath.Glob(filepath.Join(kitDir, "*.json"))
	for _, f := range files {
		groups[pgidFromRecord(t, f)] = f
	}
	require.Len(t, groups, 3, "the first session's process, the adopted one and the pooled one")

	cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ccancel()
	require.NoError(t, rt.Close(cctx))
	closed = true
	assert.Equal(t, 0, tr.WarmReady())
	for p := range groups {
		assert.Eventually(t, func() bool { return !proctest.GroupAlive(p) }, time.Minute, 20*time.Millisecond, "process group %d outlived Runtime.Close", p)
	}
	left, _ := filepath.Glob(filepath.Join(kitDir, "*.json"))
	assert.Empty(t, left, "no process record is left")
	names, err := os.ReadDir(root)
	require.NoError(t, err)
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	assert.ElementsMatch(t, []string{first, second}, got, "the sessions' CODEX_HOMEs and nothing of the pool")
	for _, n := range got {
		assert.False(t, strings.HasPrefix(n, ".warm-"))
	}
}

func pgidFromRecord(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var r proc.Record
	require.NoError(t, json.Unmarshal(b, &r))
	return r.Pgid
}
