package gemini

import (
	"os"
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

// backend is gemini for the shared ACP rigs, pointed at the mock's
// Gemini wire.
func backend(t testing.TB) acptest.Backend {
	return acptest.Of(t, Agent(), acptest.Backend{Tools: acptest.GeminiTools,
		Spec: func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
			return transports.SessionSpec{Home: acptest.SharedHome, Model: "gemini-2.5-pro", Env: []string{
				"GOOGLE_GEMINI_BASE_URL=" + mock.URL(), "GEMINI_API_KEY=mock-key"}}
		},
		Skip: map[string]string{transporttest.CaseOutputCapped: "gemini 0.61 reports a summary of a tool's output over ACP " +
			"(\"Read lines 1-2000 of 2002 from big.txt\", the shell's working directory), never the output itself: nothing reaches the client to cap"},
	})
}

func TestMain(m *testing.M) { os.Exit(acptest.Home(m, "codesession-gemini-test-")) }

func TestConformance(t *testing.T) { acptest.Conformance(t, backend(t)) }
