package gemini

import (
	"testing"

	"github.com/codesession/codesession/transports/acp/acptest"
)

// TestLiveLoopbackProcessTree: the real gemini CLI (in its own HOME) at
// network: loopback: it reaches modelmock only through the relay of its
// own network namespace, and its shell reaches no other address.
func TestLiveLoopbackProcessTree(t *testing.T) {
	acptest.ContainedLoopback(t, backend(t), "run_shell_command")
}
