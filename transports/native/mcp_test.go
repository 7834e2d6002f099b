package native

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
)

// buildProbe builds the one-tool stdio MCP server of the curation tests.
func buildProbe(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "mcpprobe")
	b, err := exec.Command("go", "build", "-o", out, "../../actors/curation/testdata/mcpprobe").CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

func TestProvisionedMCPServerIsAnExtraTool(t *testing.T) {
	probe := buildProbe(t)
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "CALL MAGIC"}, Steps: []modelmock.Step{
		{Tool: tool("mcp__probe__magic_word", map[string]any{})},
		{Text: "done"},
	}}}}
	plan := &transports.Provision{MCPServers: []transports.MCPServer{{Name: "probe", Command: probe},
		{Name: "broken", Command: filepath.Join(t.TempDir(), "missing")}}}
	l := openLive(t, sc, transports.SessionSpec{Provision: plan})
	evs := l.turn(1, "CALL MAGIC", func(ev messages.Event) (messages.Decision, string) {
		require.Equal(t, "mcp__probe__magic_word", ev.ToolName, "an MCP tool asks like bash below full")
		return messages.DecisionAllowOnce, ""
	})
	r := results(evs)["mcp__probe__magic_word"]
	require.False(t, r.IsError, "%+v", r)
	require.Equal(t, "xyzzy-provisioned", r.Output)
	reqs := l.mock.MainRequests()
	require.NotEmpty(t, reqs)
	require.Contains(t, string(reqs[0].Body), "mcp__probe__magic_word", "the model is offered the tool")
	var warned bool
	for _, rec := range l.rec.Records() {
		if rec.Event.Type == messages.EvWarning && strings.Contains(rec.Event.Text, "MCP server broken not started") {
			warned = true
		}
	}
	require.True(t, warned, "a server that cannot start is a warning, not a failed start")
}

func TestMCPToolsNotOfferedInPlan(t *testing.T) {
	probe := buildProbe(t)
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "hi"}, Steps: []modelmock.Step{{Text: "hello"}}}}}
	plan := &transports.Provision{MCPServers: []transports.MCPServer{{Name: "probe", Command: probe}}}
	l := openLive(t, sc, transports.SessionSpec{Provision: plan, Posture: messages.PosturePlan})
	l.turn(1, "hi", nil)
	require.NotContains(t, string(l.mock.MainRequests()[0].Body), "mcp__probe__magic_word")
}
