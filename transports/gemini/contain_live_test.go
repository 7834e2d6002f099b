package gemini

import (
	"testing"

	"github.com/codesession/codesession/transports/acp/acptest"
)

// TestLiveContainedProcessTree: the real gemini CLI over ACP, contained as
// the runtime contains it, at posture full: see confinetest.
func TestLiveContainedProcessTree(t *testing.T) {
	acptest.Contained(t, backend(t), "run_shell_command", false)
}
