package qwen

import (
	"os"
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/modelmock"
)

// backend is qwen for the shared ACP rigs: gemini's tools, its OpenAI
// auth pointed at the mock's Chat Completions wire.
func backend(t testing.TB) acptest.Backend {
	return acptest.Of(t, Agent(), acptest.Backend{Tools: acptest.GeminiTools,
		Spec: func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
			return transports.SessionSpec{Home: acptest.SharedHome, Model: "mock-model", Env: []string{
				"OPENAI_BASE_URL=" + mock.URL() + "/v1", "OPENAI_API_KEY=sk-mock"}}
		}})
}

func TestMain(m *testing.M) { os.Exit(acptest.Home(m, "codesession-qwen-test-")) }

func TestConformance(t *testing.T) { acptest.Conformance(t, backend(t)) }
