package curation

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// buildProbe builds testdata/mcpprobe, a one-tool stdio MCP server.
func buildProbe(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "mcpprobe")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/mcpprobe")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

// probePlan runs the whole pipeline for a project that uses the probe: a
// catalog override with a T2 entry for it, the owner's approval, and the
// plan it produces for backend.
func probePlan(t *testing.T, probe, backend string) (Result, string) {
	t.Helper()
	home := t.TempDir()
	cat := Catalog{Version: 1, Entries: []Entry{{
		ID: "probe", Name: "Probe", Tier: messages.TierLocalMCP,
		Source: Source{Repo: "codesession/mcpprobe", Commit: strings.Repeat("c", 40)},
		Detect: []Rule{{Kind: RuleFileExists, Path: "probe.txt"}},
		MCP:    &MCPSpec{Name: "probe", Command: probe},
	}, {
		ID: "probe-skill", Name: "Probe skill", Tier: messages.TierSkill,
		Source: Source{Repo: "codesession/probe-skill", Commit: strings.Repeat("d", 40)},
		Detect: []Rule{{Kind: RuleFileExists, Path: "probe.txt"}},
		Skill:  &SkillSpec{Name: "probe-skill", Path: "skill"},
	}}}
	data, err := json.Marshal(cat)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, CatalogFile), data, 0o600))
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, "probe.txt"), []byte("x"), 0o644))
	c := &Curator{Home: home, Fetcher: mapFetcher{"codesession/probe-skill@" + strings.Repeat("d", 40) + ":skill": {
		{Path: "SKILL.md", Data: []byte("---\nname: probe-skill\ndescription: Knows the probe project's conventions.\n---\nUse magic_word.\n")}}}}
	first := c.Resolve(context.Background(), Request{SessionID: "cs_live1", Cwd: repo, Backend: backend})
	require.Equal(t, []string{"probe"}, first.Meta.AwaitingApproval)
	e, _ := cat.Lookup("probe")
	_, err = NewLedger(home, nil).Decide(messages.ApprovalDecision{ID: ApprovalID(e), Decision: "approve"})
	require.NoError(t, err)
	res := c.Resolve(context.Background(), Request{SessionID: "cs_live2", Cwd: repo, Backend: backend})
	require.Equal(t, []string{"probe", "probe-skill"}, res.Meta.Applied)
	require.NotNil(t, res.Plan)
	return res, repo
}

// TestLiveClaudeSeesAndCallsAProvisionedMCPServer runs the real claude CLI
// (CODESESSION_CLAUDE_BIN) with the plan: its init message lists the
// provisioned server's tool, and a turn against modelmock calls it.
func TestLiveClaudeSeesAndCallsAProvisionedMCPServer(t *testing.T) {
	bin := subprocesstest.Find(t, claudecode.EnvBinary, "npm install @anthropic-ai/claude-code@"+claudecode.PinnedVersion, "claude")
	probe := buildProbe(t)
	res, repo := probePlan(t, probe, "claude-code")
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{
		Match: modelmock.Match{Text: "CALL MAGIC"},
		Steps: []modelmock.Step{{Tool: &modelmock.ToolCall{Name: "mcp__probe__magic_word", Input: json.RawMessage(`{}`)}}},
	}}}
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	tr := claudecode.New(claudecode.WithBinary(bin))
	spec := transports.SessionSpec{SessionID: "cs_live2", Cwd: repo, Home: t.TempDir(), Model: "claude-mock-1",
		Posture: messages.PostureDefault, Provision: res.Plan,
		Env: []string{"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test"}}
	spec = spec.WithProvision()

	t.Run("init lists the tool", func(t *testing.T) {
		argv := tr.LaunchArgv(spec)
		require.Contains(t, argv, "--mcp-config")
		require.Contains(t, argv, res.Plan.ConfigFile)
		for i := range argv {
			if argv[i] == "<session-id>" {
				argv[i] = transports.NewUUID() // the manifest's placeholder
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "HOME="+spec.Home, "ANTHROPIC_BASE_URL="+mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test",
			"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr subprocesstest.SyncBuffer // written by exec's copier while the test reads it
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		_, err = stdin.Write([]byte(`{"type":"user","message":{"role":"user","content":"say hi"},"parent_tool_use_id":null,"session_id":""}` + "\n"))
		require.NoError(t, err)
		var init struct {
			Skills     []string `json:"skills"`
			Tools      []string `json:"tools"`
			MCPServers []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"mcp_servers"`
		}
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		found := false
		for sc.Scan() {
			var head struct{ Type, Subtype string }
			if json.Unmarshal(sc.Bytes(), &head) == nil && head.Type == "system" && head.Subtype == "init" {
				require.NoError(t, json.Unmarshal(sc.Bytes(), &init))
				found = true
				break
			}
		}
		require.True(t, found, "no system/init line; stderr: %s", stderr.String())
		require.Contains(t, init.Tools, "mcp__probe__magic_word", "init tools: %v", init.Tools)
		require.Len(t, init.MCPServers, 1)
		require.Equal(t, "probe", init.MCPServers[0].Name)
		require.Equal(t, "connected", init.MCPServers[0].Status)
		require.Contains(t, strings.Join(init.Skills, " "), "probe-skill", "the provisioned skill (a plugin): %v", init.Skills)
	})

	t.Run("a turn calls it", func(t *testing.T) {
		evs := liveTurn(t, tr, spec, "CALL MAGIC", 3*time.Minute, func(ask messages.Event) {
			require.Equal(t, "mcp__probe__magic_word", ask.ToolName)
		})
		require.Contains(t, evs[len(evs)-1].Text, "xyzzy-provisioned", "the tool's answer reached the model")
		var sawTool bool
		for _, r := range mock.MainRequests() {
			if strings.Contains(string(r.Body), "mcp__probe__magic_word") {
				sawTool = true
			}
		}
		require.True(t, sawTool, "the model was offered the provisioned tool")
	})
}
