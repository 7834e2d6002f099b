package native

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

// TestConformance runs the transporttest suite for native against
// modelmock: each case's turns become a scenario keyed on each turn's
// input, acted out through the native tools.
func TestConformance(t *testing.T) {
	runConformance(t, "TestUnauthorizedIsAClearError and TestRetriesA429", func(mock *modelmock.Server) transports.SessionSpec {
		return transports.SessionSpec{Model: "claude-mock",
			Env: []string{EnvAnthropicBaseURL + "=" + mock.URL(), EnvAnthropicAPIKey + "=test-key"}}
	})
}

// runConformance runs the transporttest suite for native with a modelmock
// per case; spec points the session at it (provider, endpoint, model).
// failures names the tests that cover endpoint faults instead.
func runConformance(t *testing.T, failures string, spec func(mock *modelmock.Server) transports.SessionSpec) {
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) transports.Transport {
			return New(WithProcessEnv(nil), WithRetryPolicy(fastRetry))
		},
		Prepare: func(t *testing.T, c *transporttest.Case) transporttest.Setup {
			if c.Fault != transporttest.FaultNone {
				t.Skipf("not applicable: native runs in-process (no executable, no stdout protocol); "+
					"endpoint failures are %s (%s)", failures, c.Fault)
			}
			sc := &modelmock.Scenario{}
			for _, tn := range c.Turns {
				sc.Rules = append(sc.Rules, modelmock.Rule{Match: modelmock.Match{Text: tn.Input}, Steps: conformanceSteps(t, c, tn)})
			}
			mock, err := modelmock.Start(t, sc)
			require.NoError(t, err)
			return transporttest.Setup{Spec: spec(mock), AgentSaw: mock.Saw, OutputCap: DefaultOutputCap}
		},
	})
}

// conformanceSteps turns a turn's actions into the model's responses:
// text joins the next response; a write, a slow action and a big output
// each end one (they call a tool).
func conformanceSteps(t *testing.T, c *transporttest.Case, tn transporttest.Turn) []modelmock.Step {
	var steps []modelmock.Step
	var cur modelmock.Step
	push := func() {
		if cur.Text != "" || cur.Tool != nil {
			steps = append(steps, cur)
		}
		cur = modelmock.Step{}
	}
	for _, a := range tn.Actions {
		switch a.Kind {
		case transporttest.ActReply:
			if cur.Text != "" {
				cur.Text += "\n"
			}
			cur.Text += a.Text
		case transporttest.ActWrite:
			cur.Tool = tool(ToolWrite, map[string]any{"path": a.Path, "content": a.Content})
			push()
		case transporttest.ActSlow:
			push()
			// The text's first half (a.Text) streams at once, the padding
			// after a.Duration; then a read-only call ends the response.
			cur = modelmock.Step{Text: a.Text + strings.Repeat(".", utf8.RuneCountInString(a.Text)), Chunks: 2,
				ChunkDelay: modelmock.Duration(a.Duration), Tool: tool(ToolLs, map[string]any{})}
			push()
		case transporttest.ActBigOutput:
			writeBigFile(t, filepath.Join(c.Workspace, "big.txt"), a.Bytes)
			cur.Tool = tool(ToolRead, map[string]any{"path": "big.txt"})
			push()
		default:
			t.Fatalf("unknown action %v", a.Kind)
		}
	}
	push()
	if n := len(steps); n == 0 || steps[n-1].Tool != nil {
		steps = append(steps, modelmock.Step{Text: "Done."})
	}
	return steps
}

// writeBigFile writes n bytes of short lines.
func writeBigFile(t *testing.T, path string, n int) {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %06d of the big output\n", i)
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()[:n]), 0o644))
}
