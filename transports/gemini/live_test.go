package gemini

import (
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/acp/acptest"
)

// TestLivePosture: plan sends session/set_mode plan and refuses a write;
// full sends mode default and the write runs unasked; default asks, and a
// deny's reason reaches the model with the next prompt.
func TestLivePosture(t *testing.T) {
	acptest.PostureRun(t, backend(t), `"modeId":"plan"`, `"modeId":"default"`)
}

// TestEffortRejected: gemini has no effort knob, so an effort is refused
// loudly before any process starts.
func TestEffortRejected(t *testing.T) { acptest.EffortRejected(t, New(acp.WithBinary("/bin/true"))) }

func TestArgs(t *testing.T) {
	got := Args(transports.SessionSpec{Model: "gemini-2.5-pro"})
	if len(got) != 3 || got[0] != "--acp" || got[1] != "-m" || got[2] != "gemini-2.5-pro" {
		t.Errorf("Args = %q", got)
	}
}
