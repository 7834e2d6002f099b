package kilo

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

// backend is kilo for the shared ACP harness.
func backend(t testing.TB) acptest.Backend {
	return acptest.Backend{
		Bin:  subprocesstest.Find(t, EnvBinary, Agent().Install, "kilo"),
		New:  func(opts ...acp.Option) transports.Transport { return New(opts...) },
		Spec: mockSpec,
		Tools: acptest.Tools{
			Write: func(path, content string) modelmock.ToolCall {
				return acptest.Call("write", map[string]any{"filePath": path, "content": content})
			},
			Read: func(path string) modelmock.ToolCall { return acptest.Call("read", map[string]any{"filePath": path}) },
		},
		Skip: map[string]string{
			transporttest.CaseClarifyDeny: "ACP carries no reason with a rejection, so the reason reaches the agent with the next prompt, not in this turn; TestDenyReasonNextTurn checks the deny",
		},
	}
}

// mockSpec points kilo at the mock through a provider in the session's
// configuration.
func mockSpec(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
	provider := `{"provider":{"mock":{"npm":"@ai-sdk/openai-compatible","name":"Loopback Mock",` +
		`"options":{"baseURL":"` + mock.URL() + `/v1","apiKey":"sk-mock"},` +
		`"models":{"mock-model":{"name":"Mock Model","tool_call":true,"limit":{"context":128000,"output":8192}},` +
		`"mock-model-2":{"name":"Mock Model 2","tool_call":true,"limit":{"context":128000,"output":8192}}}}}}`
	return transports.SessionSpec{Home: acptest.SharedHome, Model: "mock/mock-model", Env: []string{EnvConfig + "=" + provider}}
}

func TestMain(m *testing.M) { os.Exit(acptest.Home(m, "codesession-kilo-test-")) }

func TestConformance(t *testing.T) {
	transporttest.Run(t, acptest.Harness(backend(t)))
}
