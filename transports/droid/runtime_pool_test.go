package droid_test

import (
	"context"
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
	"github.com/codesession/codesession/transports/droid"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/proctest"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestRuntimeCloseKillsPooledDroids runs a droid session through
// actors.Runtime with a warm pool: after the first turn the pool boots a
// droid under the runtime's kit, and Runtime.Close leaves no droid
// process, pooled or not, and no record.
func TestRuntimeCloseKillsPooledDroids(t *testing.T) {
	t.Parallel()
	bin := subprocesstest.Find(t, droid.EnvBinary, "npm install droid@"+droid.PinnedVersion, "droid")
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	home := t.TempDir()
	settings := `{"customModels":[{"model":"mock-model","displayName":"Loopback Mock (chat)","baseUrl":"` + mock.URL() +
		`/v1","apiKey":"sk-mock","provider":"generic-chat-completion-api","maxOutputTokens":8192}]}`
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".factory"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".factory", "settings.json"), []byte(settings), 0o600))

	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = droid.ID
	cfg.Supervision.ShutdownTimeout = config.Duration(10 * time.Second)
	cfg.Env = map[string]string{"HOME": home}
	rt, err := actors.New(cfg, actors.WithBackends(transports.NewRegistry(droid.New(droid.WithBinary(bin), droid.WithWarmPool(1)))))
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
	const scope = "droid-pool"
	st, err := rt.Start(ctx, scope, messages.Start{Brief: "hello", Cwd: t.TempDir(), Model: "custom:Loopback-Mock-(chat)-0"})
	require.NoError(t, err)
	r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, "PONG(model=mock-model): hello", r.Text)

	var pooled int
	require.Eventually(t, func() bool {
		for p, rec := range proctest.ByPgid(t, filepath.Join(cfg.Home, "run", "procs")) {
			if strings.HasPrefix(rec.SessionID, "warm-") {
				pooled = p
				return true
			}
		}
		return false
	}, 3*time.Minute, 50*time.Millisecond, "the first turn's end refilled the pool under the runtime's kit")
	all := proctest.ByPgid(t, filepath.Join(cfg.Home, "run", "procs"))
	require.Len(t, all, 2, "the session's droid and the pooled one: %v", all)
	// the pooled droid may still be booting: Close drains boots in flight too
	require.Contains(t, all, pooled)

	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	require.NoError(t, rt.Close(cctx))
	closed = true
	for p := range all {
		assert.Eventually(t, func() bool { return len(proctest.InGroup(p)) == 0 }, time.Minute, 20*time.Millisecond,
			"process group %d (%s) outlived Runtime.Close", p, all[p].SessionID)
	}
	assert.Empty(t, proctest.ByPgid(t, filepath.Join(cfg.Home, "run", "procs")), "no process record is left")
}
