package copilot

import (
	"os"
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
	"github.com/codesession/codesession/transports/transporttest"
)

func backend(t testing.TB) acptest.Backend {
	return acptest.Backend{
		Bin:  subprocesstest.Find(t, EnvBinary, Agent().Install, "copilot"),
		New:  func(opts ...acp.Option) transports.Transport { return New(opts...) },
		Spec: mockSpec,
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
		Skip: map[string]string{
			transporttest.CaseClarifyDeny: "ACP carries no reason with a rejection, so the reason reaches the agent with the next prompt, not in this turn; TestDenyReasonNextTurn checks the deny",
		},
	}
}

// mockSpec is Copilot's BYOK offline mode against the mock.
func mockSpec(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
	return transports.SessionSpec{Home: acptest.SharedHome, Env: []string{
		"COPILOT_OFFLINE=true", "COPILOT_PROVIDER_BASE_URL=" + mock.URL() + "/v1",
		"COPILOT_PROVIDER_API_KEY=sk-mock", "COPILOT_MODEL=mock-model"}}
}

func TestMain(m *testing.M) { os.Exit(acptest.Home(m, "codesession-copilot-test-")) }

func TestConformance(t *testing.T) {
	transporttest.Run(t, acptest.Harness(backend(t)))
}
