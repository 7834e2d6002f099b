package copilot

import (
	"testing"

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
