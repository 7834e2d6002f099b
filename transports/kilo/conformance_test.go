package kilo

import (
	"os"
	"testing"

	"github.com/codesession/codesession/transports/acp/acptest"
)

// backend is kilo for the shared ACP rigs: opencode's tools, a provider in
// the session's configuration.
func backend(t testing.TB) acptest.Backend {
	return acptest.Of(t, Agent(), acptest.Backend{Spec: acptest.OpencodeSpec(EnvConfig), Tools: acptest.OpencodeTools})
}

func TestMain(m *testing.M) { os.Exit(acptest.Home(m, "codesession-kilo-test-")) }

func TestConformance(t *testing.T) { acptest.Conformance(t, backend(t)) }
