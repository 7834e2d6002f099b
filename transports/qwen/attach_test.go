package qwen

import (
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp/acptest"
)

// TestLiveAttachCommandResumes runs the attach command headless (-p, with
// the OpenAI auth a user's own settings would select): the model's request
// carries the session's turn 1.
func TestLiveAttachCommandResumes(t *testing.T) {
	acptest.AttachRun(t, backend(t), func(argv []string, prompt string, _ transports.SessionSpec) ([]string, []string) {
		return append(argv, "--auth-type", "openai", "-m", "mock-model", "-p", prompt), []string{"QWEN_CODE_NO_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"}
	})
}
