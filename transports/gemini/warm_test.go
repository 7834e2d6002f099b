package gemini

import (
	"testing"

	"github.com/codesession/codesession/transports/acp/acptest"
)

// TestLiveWarmPool: a start adopts the pooled process (by pid) and its
// first turn runs under the asked posture and model; a pooled process that
// died idle is not adopted; DrainWarm leaves no pooled process.
func TestLiveWarmPool(t *testing.T) {
	acptest.WarmPoolRun(t, backend(t), `"modeId":"plan"`, "gemini-2.5-pro")
}

// TestLiveWarmPoolSwitchesTheModel: a start for another of gemini's models
// adopts the process pooled for the first, switched over ACP
// (session/set_model).
func TestLiveWarmPoolSwitchesTheModel(t *testing.T) {
	acptest.ModelSwitchRun(t, backend(t), "gemini-3.8-flash", "gemini-3.8-flash")
}

// TestLiveNoPool: with a pool of size 0 a start boots its own process.
func TestLiveNoPool(t *testing.T) { acptest.NoPoolRun(t, backend(t)) }

// BenchmarkFirstTurn: start -> first turn with and without the warm pool,
// interleaved.
func BenchmarkFirstTurn(b *testing.B) { acptest.BenchFirstTurn(b, backend(b)) }
