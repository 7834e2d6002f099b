package qwen

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
		Bin:  subprocesstest.Find(t, EnvBinary, Agent().Install, "qwen"),
		New:  func(opts ...acp.Option) transports.Transport { return New(opts...) },
		Spec: mockSpec,
		Tools: acptest.Tools{
			Write: func(path, content string) modelmock.ToolCall {
				return acptest.Call("write_file", map[string]any{"file_path": path, "content": content})
			},
			Read: func(path string) modelmock.ToolCall {
				return acptest.Call("run_shell_command", map[string]any{"command": "cat " + path, "description": "print the big file"})
			},
		},
		Skip: map[string]string{
			transporttest.CaseClarifyDeny: "ACP carries no reason with a rejection, so the reason reaches the agent with the next prompt, not in this turn; TestDenyReasonNextTurn checks the deny",
		},
	}
}

// mockSpec points qwen's OpenAI auth at the mock's Chat Completions wire.
func mockSpec(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
	return transports.SessionSpec{Home: acptest.SharedHome, Model: "mock-model", Env: []string{
		"OPENAI_BASE_URL=" + mock.URL() + "/v1", "OPENAI_API_KEY=sk-mock"}}
}

func TestMain(m *testing.M) { os.Exit(acptest.Home(m, "codesession-qwen-test-")) }

func TestConformance(t *testing.T) {
	transporttest.Run(t, acptest.Harness(backend(t)))
}
