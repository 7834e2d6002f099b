package copilot

import (
	"os"
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/modelmock"
)

// backend is copilot for the shared ACP rigs, in its BYOK offline mode
// against the mock.
func backend(t testing.TB) acptest.Backend {
	return acptest.Of(t, Agent(), acptest.Backend{
		Spec: func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
			return transports.SessionSpec{Home: acptest.SharedHome, Env: []string{
				"COPILOT_OFFLINE=true", "COPILOT_PROVIDER_BASE_URL=" + mock.URL() + "/v1",
				"COPILOT_PROVIDER_API_KEY=sk-mock", "COPILOT_MODEL=mock-model"}}
		},
		Tools: acptest.Tools{
			Write: func(path, content string) modelmock.ToolCall {
				return acptest.Call("create", map[string]any{"path": path, "file_text": content})
			},
			// copilot's view refuses a file this big ("File too large to read
			// at once") and saves a shell output this big to a file; the
			// first 20 000 bytes it passes on, over the cap below
			Read: func(path string) modelmock.ToolCall {
				return acptest.Call("bash", map[string]any{"command": "head -c 20000 " + path, "description": "print the big file's start"})
			},
		},
		OutputCap: 4 << 10,
	})
}

func TestMain(m *testing.M) { os.Exit(acptest.Home(m, "codesession-copilot-test-")) }

func TestConformance(t *testing.T) { acptest.Conformance(t, backend(t)) }
