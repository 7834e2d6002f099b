package copilot

import (
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp/acptest"
)

// TestLiveAttachCommandResumes runs the attach command headless
// (`copilot --resume <id> -p ...`): the model's request carries the
// session's turn 1.
func TestLiveAttachCommandResumes(t *testing.T) {
	acptest.AttachRun(t, backend(t), func(argv []string, prompt string, _ transports.SessionSpec) ([]string, []string) {
		return append(argv, "-p", prompt), []string{"COPILOT_AUTO_UPDATE=false"}
	})
}
