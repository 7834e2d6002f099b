package copilot_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/copilot"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/proctest"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestLiveRuntimeCloseDrainsWarmPool: a session through actors.Runtime
// fills copilot's warm pool after its first turn; Runtime.Close drains the
// pool, kills the session's process and the pooled one (checked by pid)
// and leaves no process record.
func TestLiveRuntimeCloseDrainsWarmPool(t *testing.T) {
	bin := subprocesstest.Find(t, copilot.EnvBinary, copilot.Agent().Install, "copilot")
	mock, err := modelmock.Start(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := copilot.New(acp.WithBinary(bin), acp.WithWarmPool(1))
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = copilot.ID
	cfg.Supervision.ShutdownTimeout = config.Duration(30 * time.Second)
	cfg.Env = map[string]string{"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": mock.URL() + "/v1",
		"COPILOT_PROVIDER_API_KEY": "sk-mock", "COPILOT_MODEL": "mock-model", "HOME": t.TempDir()}
	rt, err := actors.New(cfg, actors.WithBackends(transports.NewRegistry(tr)))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_ = rt.Close(ctx)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := rt.Start(ctx, "warm", messages.Start{Brief: "[runtime warm] hello", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rt.ReadTurn(ctx, "warm", messages.ReadTurn{SessionID: st.SessionID})
	if err != nil || r.Kind != messages.KindTurnComplete {
		t.Fatalf("first turn: %+v, %v", r, err)
	}
	deadline := time.Now().Add(4 * time.Minute)
	for tr.WarmReady() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill after the first turn")
		}
		time.Sleep(20 * time.Millisecond)
	}
	recs := records(t, filepath.Join(cfg.Home, "run", "procs"))
	var pooled, own int
	for pgid, sid := range recs {
		switch sid {
		case st.SessionID:
			own = pgid
		default:
			pooled = pgid
		}
	}
	if len(recs) != 2 || own == 0 || pooled == 0 {
		t.Fatalf("process records %v: want the session's and one pooled", recs)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ccancel()
	closed = true
	if err := rt.Close(cctx); err != nil {
		t.Fatalf("Runtime.Close: %v", err)
	}
	// the pool itself was drained (where cgroups are writable, closing the
	// kit kills a forgotten pooled process too, so the pids alone would not
	// tell)
	if n := tr.WarmReady(); n != 0 {
		t.Errorf("%d processes still pooled after Runtime.Close", n)
	}
	for _, p := range []int{own, pooled} {
		if !acptest.GroupGone(p) {
			t.Errorf("process group %d outlived Runtime.Close", p)
		}
	}
	if left := records(t, filepath.Join(cfg.Home, "run", "procs")); len(left) != 0 {
		t.Errorf("process records left after Runtime.Close: %v", left)
	}
}

// records maps the pgid of each process record under dir to its session.
func records(t testing.TB, dir string) map[int]string {
	out := map[int]string{}
	for _, r := range proctest.Records(t, dir) {
		out[r.Pgid] = r.SessionID
	}
	return out
}
