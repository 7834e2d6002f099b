package kilo

import (
	"encoding/json"
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/opencode"
	"github.com/codesession/codesession/transports/subprocess"
)

// TestLiveAttachCommandResumes runs the attach command's session headless
// (`kilo run --session <id>` in the session's cwd, the TUI's
// `kilo <cwd> --session <id>` as a one-shot): the model's request carries
// the session's turn 1. KILO_CONFIG_CONTENT names the mock provider, as a
// user's own config would.
func TestLiveAttachCommandResumes(t *testing.T) {
	acptest.AttachRun(t, backend(t), func(argv []string, prompt string, spec transports.SessionSpec) ([]string, []string) {
		if len(argv) != 4 || argv[2] != "--session" {
			t.Fatalf("attach argv %q: want kilo <cwd> --session <id>", argv)
		}
		cfg, err := opencode.Config(json.RawMessage(subprocess.EnvValue(spec.Env, EnvConfig)), "mock/mock-model")
		if err != nil {
			t.Fatal(err)
		}
		return []string{argv[0], "run", "--session", argv[3], "-m", "mock/mock-model", prompt},
			[]string{"KILO_CONFIG_CONTENT=" + string(cfg), "KILO_DISABLE_AUTOUPDATE=1", "KILO_DISABLE_MODELS_FETCH=1",
				"KILO_DISABLE_LSP_DOWNLOAD=1", "KILO_DISABLE_SHARE=1", "KILO_DISABLE_SESSION_INGEST=1"}
	})
}
