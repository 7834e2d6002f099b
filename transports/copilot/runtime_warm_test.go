package copilot_test

import (
	"testing"
	"time"

	"github.com/codesession/codesession/actors/runtimetest"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/copilot"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/proctest"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestLiveRuntimeCloseDrainsWarmPool: a session through actors.Runtime
// fills copilot's warm pool after its first turn; Runtime.Close drains the
// pool, kills the session's process and the pooled one (checked by process group)
// and leaves no process record.
func TestLiveRuntimeCloseDrainsWarmPool(t *testing.T) {
	bin := subprocesstest.Find(t, copilot.EnvBinary, copilot.Agent().Install, "copilot")
	tr := copilot.New(acp.WithBinary(bin), acp.WithWarmPool(1))
	rig := runtimetest.New(t, "warm", runtimetest.Config{
		Backend: tr,
		Env: func(mock *modelmock.Server) map[string]string {
			return map[string]string{"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": mock.URL() + "/v1",
				"COPILOT_PROVIDER_API_KEY": "sk-mock", "COPILOT_MODEL": "mock-model"}
		},
		Prepare: func(cfg *config.Config) { cfg.Supervision.ShutdownTimeout = config.Duration(30 * time.Second) },
		Timeout: 4 * time.Minute,
	})
	sid, _ := rig.Turn("[runtime warm] hello", "")
	deadline := time.Now().Add(4 * time.Minute)
	for tr.WarmReady() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill after the first turn")
		}
		time.Sleep(20 * time.Millisecond)
	}
	recs := proctest.ByPgid(t, rig.KitDir())
	var pooled, own int
	for pgid, rec := range recs {
		switch rec.SessionID {
		case sid:
			own = pgid
		default:
			pooled = pgid
		}
	}
	if len(recs) != 2 || own == 0 || pooled == 0 {
		t.Fatalf("process records %v: want the session's and one pooled", recs)
	}
	rig.CloseLeavesNothing(2)
	// the pool itself was drained (where cgroups are writable, closing the
	// kit kills a forgotten pooled process too, so the pids alone would not
	// tell)
	if n := tr.WarmReady(); n != 0 {
		t.Errorf("%d processes still pooled after Runtime.Close", n)
	}
}
