package curation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/kilo"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/opencode"
	"github.com/codesession/codesession/transports/qwen"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// The ACP agents with a native skill location the session's own config can
// name (ACP's session/new has no skills field): opencode and kilo scan
// their config's skills.paths. Each runs for real against modelmock with the pipeline's
// plan, and its first model request describes the provisioned skill (its
// description, which only the skill's SKILL.md holds: the instruction
// that points at skills names them only), with no pointer instruction.

func mockProvider(mock *modelmock.Server) string {
	return `{"provider":{"mock":{"npm":"@ai-sdk/openai-compatible","name":"Loopback Mock",` +
		`"options":{"baseURL":"` + mock.URL() + `/v1","apiKey":"sk-mock"},` +
		`"models":{"mock-model":{"name":"Mock Model","tool_call":true,"limit":{"context":128000,"output":8192}}}}}}`
}

func TestLiveOpencodeSeesAProvisionedSkillNatively(t *testing.T) {
	bin := subprocesstest.Find(t, opencode.EnvBinary, opencode.Agent().Install, "opencode")
	liveACPSkill(t, opencode.ID, opencode.New(acp.WithBinary(bin)), func(mock *modelmock.Server) transports.SessionSpec {
		return transports.SessionSpec{Model: "mock/mock-model", Env: []string{opencode.EnvConfig + "=" + mockProvider(mock)}}
	})
}

func TestLiveKiloSeesAProvisionedSkillNatively(t *testing.T) {
	bin := subprocesstest.Find(t, kilo.EnvBinary, kilo.Agent().Install, "kilo")
	liveACPSkill(t, kilo.ID, kilo.New(acp.WithBinary(bin)), func(mock *modelmock.Server) transports.SessionSpec {
		return transports.SessionSpec{Model: "mock/mock-model", Env: []string{kilo.EnvConfig + "=" + mockProvider(mock)}}
	})
}

func liveACPSkill(t *testing.T, backend string, tr transports.Transport, specFor func(*modelmock.Server) transports.SessionSpec) {
	res, repo := probePlan(t, buildProbe(t), backend)
	require.NotNil(t, res.Plan)
	require.NotEmpty(t, res.Plan.SkillsDir)
	require.NotContains(t, res.Plan.Instructions, "Skills for this project are in")
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	spec := specFor(mock)
	spec.SessionID, spec.Cwd, spec.Home, spec.Posture, spec.Provision = "cs_live2", repo, t.TempDir(), messages.PostureDefault, res.Plan
	spec = spec.WithProvision()
	liveTurn(t, tr, spec, "hello", 5*time.Minute, nil)
	reqs := mock.MainRequests()
	require.NotEmpty(t, reqs)
	body := string(reqs[0].Body)
	require.Contains(t, body, "probe-skill", backend+" lists the provisioned skill")
	require.Contains(t, body, "Knows the probe project", "with its description, read from its SKILL.md")
	require.False(t, strings.Contains(body, "Skills for this project are in"), "natively, not through an instruction")
}

// The ACP agents take the plan's MCP servers in session/new: the real CLI,
// run with the pipeline's plan against modelmock, registers the
// provisioned probe server's tool under its own name for it, the model's
// call to that name runs the probe, and the probe's answer comes back to
// the model and into the turn. Without the provisioning the CLI has no
// such tool: the call fails and the answer never comes.
//
// qwen 0.24.4 defers MCP tools: they are not in the request's tools but
// reached through tool_search (then tool_call, or a call by name), and its
// startup reminder of deferred tools did not name the probe's (tried live);
// so its model looks the tool up first, and the lookup's answer is the
// tool's declaration (without the provisioning: "Not found").

func TestLiveQwenSeesAndCallsAProvisionedMCPServer(t *testing.T) {
	bin := subprocesstest.Find(t, qwen.EnvBinary, qwen.Agent().Install, "qwen")
	find := acptest.Call("tool_search", map[string]any{"query": "select:mcp__probe__magic_word"})
	liveACPMCP(t, qwen.ID, qwen.New(acp.WithBinary(bin)), "mcp__probe__magic_word", &find, func(mock *modelmock.Server) transports.SessionSpec {
		return transports.SessionSpec{Model: "mock-model", Env: []string{"OPENAI_BASE_URL=" + mock.URL() + "/v1", "OPENAI_API_KEY=sk-mock"}}
	})
}

func TestLiveKiloSeesAndCallsAProvisionedMCPServer(t *testing.T) {
	bin := subprocesstest.Find(t, kilo.EnvBinary, kilo.Agent().Install, "kilo")
	liveACPMCP(t, kilo.ID, kilo.New(acp.WithBinary(bin)), "probe_magic_word", nil, func(mock *modelmock.Server) transports.SessionSpec {
		return transports.SessionSpec{Model: "mock/mock-model", Env: []string{kilo.EnvConfig + "=" + mockProvider(mock)}}
	})
}

// probeDescription is the probe tool's description (testdata/mcpprobe).
const probeDescription = "Returns the magic word of this project."

// offered reports whether a Chat Completions request offers the model tool.
func offered(body []byte, tool string) bool {
	var req struct {
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	for _, f := range req.Tools {
		if f.Function.Name == tool {
			return true
		}
	}
	return false
}

// liveACPMCP runs the probe's plan on backend: the model calls tool (after
// find, a call that looks the deferred tool up, when the CLI defers MCP
// tools), and the probe's answer comes back.
func liveACPMCP(t *testing.T, backend string, tr transports.Transport, tool string, find *modelmock.ToolCall, specFor func(*modelmock.Server) transports.SessionSpec) {
	res, repo := probePlan(t, buildProbe(t), backend)
	require.NotNil(t, res.Plan)
	require.Len(t, res.Plan.MCPServers, 1, "the probe server is in the plan")
	require.Empty(t, res.Meta.Ignored)
	call := &modelmock.ToolCall{Name: tool, Input: json.RawMessage(`{}`)}
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{ToolResultRegex: "xyzzy"}, Steps: []modelmock.Step{{Text: "the tool said {{result}}"}}},
		{Match: modelmock.Match{ToolResult: probeDescription}, Steps: []modelmock.Step{{Tool: call}}},
		{Match: modelmock.Match{Text: "CALL MAGIC"}, Steps: []modelmock.Step{{Tool: call}}},
	}}
	if find != nil {
		sc.Rules[2].Steps[0].Tool = find
	}
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	spec := specFor(mock)
	spec.SessionID, spec.Cwd, spec.Home, spec.Posture, spec.Provision = "cs_live2", repo, t.TempDir(), messages.PostureDefault, res.Plan
	spec = spec.WithProvision()
	evs := liveTurn(t, tr, spec, "CALL MAGIC", 5*time.Minute, nil)
	reqs := mock.MainRequests()
	require.NotEmpty(t, reqs)
	var text strings.Builder
	var results []string
	for _, ev := range evs {
		switch ev.Type {
		case messages.EvText:
			text.WriteString(ev.Text)
		case messages.EvToolResult:
			results = append(results, ev.Output)
		}
	}
	if find == nil {
		require.True(t, offered(reqs[0].Body, tool), "%s offers the model the provisioned server's tool", backend)
	} else {
		require.True(t, len(results) > 0 && strings.Contains(results[0], tool) && strings.Contains(results[0], probeDescription),
			"%s's lookup finds the provisioned server's tool: %q", backend, results)
	}
	called := false
	for _, r := range reqs {
		called = called || strings.Contains(string(r.Body), "xyzzy-provisioned")
	}
	require.True(t, called, "the tool's answer reached the model")
	require.Contains(t, results, "xyzzy-provisioned", "the probe's answer is the call's result on the record")
	require.Contains(t, text.String(), "the tool said xyzzy-provisioned", "the model's answer after the tool's came back")
}
