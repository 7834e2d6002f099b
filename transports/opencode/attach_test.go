package opencode

import (
	"encoding/json"
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/subprocess"
)

// TestLiveAttachCommandResumes runs the attach command's session headless
// (`opencode run --session <id>` in the session's cwd, the TUI's
// `opencode <cwd> --session <id>` as a one-shot): the model's request
// carries the session's turn 1. OPENCODE_CONFIG_CONTENT names the mock
// provider, as a user's own config would.
func TestLiveAttachCommandResumes(t *testing.T) {
	b := backend(t)
	acptest.AttachRun(t, b, func(argv []string, prompt string, spec transports.SessionSpec) ([]string, []string) {
		if len(argv) != 4 || argv[2] != "--session" {
			t.Fatalf("attach argv %q: want opencode <cwd> --session <id>", argv)
		}
		return []string{argv[0], "run", "--session", argv[3], "-m", "mock/mock-model", prompt},
			[]string{"OPENCODE_CONFIG_CONTENT=" + string(mustConfig(t, spec.Env)),
				// no network but the mock's, as the daemon starts it
				"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"}
	})
}

func mustConfig(t *testing.T, env []string) json.RawMessage {
	cfg, err := Config(json.RawMessage(subprocess.EnvValue(env, EnvConfig)), "mock/mock-model")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
