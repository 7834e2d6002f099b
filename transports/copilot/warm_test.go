package copilot

import (
	"slices"
	"strings"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/acp/acptest"
)

// TestLiveWarmPool: a start adopts the pooled process (by pid) and its
// first turn runs under the asked posture and model; a pooled process that
// died idle is not adopted; DrainWarm leaves no pooled process.
func TestLiveWarmPool(t *testing.T) {
	acptest.WarmPoolRun(t, backend(t), `"modeId":"`+modeURL+`plan"`, "mock-model")
}

// TestLiveNoPool: with a pool of size 0 a start boots its own process.
func TestLiveNoPool(t *testing.T) { acptest.NoPoolRun(t, backend(t)) }

// BenchmarkFirstTurn: start -> first turn with and without the warm pool,
// interleaved.
func BenchmarkFirstTurn(b *testing.B) { acptest.BenchFirstTurn(b, backend(b)) }

// TestLiveContainedWarmRecord: a contained session that adopts the pooled
// process says on its record what that process may write.
func TestLiveContainedWarmRecord(t *testing.T) { acptest.ContainedWarmRecord(t, backend(t)) }

// TestLiveWarmPoolAllowedTools: a process pooled without allowedTools
// (no --available-tools) is not adopted by a start that has them: that
// start boots its own process with the flag, its model is offered only
// the allowed tools, and the pooled process stays for a start like the
// first.
func TestLiveWarmPoolAllowedTools(t *testing.T) {
	w := acptest.NewWarm(t, backend(t), 1, nil)
	plain := w.Spec("plain", messages.PostureDefault)
	w.Start(plain).Turn(t, 1, "hello")
	w.WaitIdle(plain, 1)
	pooled := w.PooledPids()

	limited := w.Spec("limited", messages.PostureDefault)
	limited.AllowedTools = []string{"Read"}
	if n := w.Tr.WarmIdle(limited); n != 0 {
		t.Fatalf("the pool offers %d processes booted without --available-tools to a start with allowedTools", n)
	}
	before := len(w.Mock.MainRequests())
	st := w.Start(limited)
	if pooled[st.Pid] {
		t.Fatalf("the start with allowedTools adopted the pooled process %d", st.Pid)
	}
	if argv := strings.Join(w.Tr.LaunchArgv(limited), " "); !strings.Contains(argv, "--available-tools=view") {
		t.Errorf("the start with allowedTools launched %q", argv)
	}
	st.Turn(t, 1, "hello")
	mains := w.Mock.MainRequests()
	if len(mains) <= before {
		t.Fatal("the limited session never asked the model")
	}
	if got := offeredTools(t, mains[len(mains)-1].Body); !slices.Equal(got, []string{"view"}) {
		t.Errorf("the limited session's model was offered %v: want [view]", got)
	}
	if n := w.Tr.WarmIdle(plain); n != 1 {
		t.Errorf("the pool holds %d processes for a start like the first: want 1", n)
	}
}
