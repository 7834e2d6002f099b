package gemini

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
		Bin:  subprocesstest.Find(t, EnvBinary, Agent().Install, "gemini"),
		New:  func(opts ...acp.Option) transports.Transport { return New(opts...) },
		Spec: mockSpec,
		Tools: acptest.Tools{
			Write: func(path, content string) modelmock.ToolCall {
				return acptest.Call("write_file", map[string]any{"file_path": path, "content": content})
			},
			// gemini's read_file reports "Read lines 1-2000 of ..." over ACP,
			// not the content; its shell's output is the content
			Read: func(path string) modelmock.ToolCall {
				return acptest.Call("run_shell_command", map[string]any{"command": "cat " + path, "description": "print the big file"})
			},
		},
		Skip: map[string]string{
			transporttest.CaseOutputCapped: "gemini 0.61 reports a summary of a tool's output over ACP (\"Read lines 1-2000 of 2002 from big.txt\", the shell's working directory), never the output itself: nothing reaches the client to cap",
			transporttest.CaseClarifyDeny:  "ACP carries no reason with a rejection, so the reason reaches the agent with the next prompt, not in this turn; TestDenyReasonNextTurn checks the deny",
		},
	}
}

// mockSpec points gemini at the mock's Gemini wire.
func mockSpec(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
	return transports.SessionSpec{Home: acptest.SharedHome, Model: "gemini-2.5-pro", Env: []string{
		"GOOGLE_GEMINI_BASE_URL=" + mock.URL(), "GEMINI_API_KEY=mock-key"}}
}

func TestMain(m *testing.M) { os.Exit(acptest.Home(m, "codesession-gemini-test-")) }

func TestConformance(t *testing.T) {
	transporttest.Run(t, acptest.Harness(backend(t)))
}
