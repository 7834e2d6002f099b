package main

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
)

// drivenScenario is what the driven session (the script backend) plays:
// one turn that asks to run Bash, then finishes.
const drivenScenario = `{"turns":[{"steps":[
  {"text":"I will list the files"},
  {"tool":{"name":"Bash","input":{"command":"ls"},"output":"README.md","ask":true}},
  {"text":"one"}, {"delay":"1500ms"}, {"text":"two"}, {"delay":"1500ms"},
  {"text":"driven turn done"}]}]}`

// driverScenario scripts the model behind the driving Claude Code: each
// code_session result picks the next call, its ids carried over by the
// rules' regular-expression groups. The answer and the read that follows
// it go in one step (Claude Code runs them in order); stop's result ends
// the turn with a line the test looks for.
func driverScenario(cwd string) string {
	const tool = "mcp__codesession__code_session"
	call := func(input map[string]any) map[string]any { return map[string]any{"name": tool, "input": input} }
	sid := `"sessionId":"(cs_[0-9a-f]{64})"`
	sc := map[string]any{"rules": []any{
		map[string]any{"match": map[string]any{"text": "DRIVE"}, "steps": []any{
			map[string]any{"tool": call(map[string]any{"op": "list-backends"})}}},
		map[string]any{"match": map[string]any{"toolResultRegex": `"backends":\[`}, "steps": []any{
			map[string]any{"tool": call(map[string]any{"op": "start", "backend": "script", "cwd": cwd,
				"brief": "list the files", "taskTags": []string{"mcp-live"}})}}},
		map[string]any{"match": map[string]any{"toolResultRegex": `^\{` + sid + `,"backend"`}, "steps": []any{
			map[string]any{"tool": call(map[string]any{"op": "read-turn", "sessionId": "{{1}}"})}}},
		map[string]any{"match": map[string]any{"toolResultRegex": `"kind":"clarification",` + sid + `.*"clarificationId":"([^"]+)"`}, "steps": []any{
			map[string]any{"tools": []any{
				call(map[string]any{"op": "answer", "sessionId": "{{1}}", "clarificationId": "{{2}}", "decision": "allow_once"}),
				call(map[string]any{"op": "read-turn", "sessionId": "{{1}}"}),
			}}}},
		map[string]any{"match": map[string]any{"toolResultRegex": `"kind":"turn_complete",` + sid}, "steps": []any{
			map[string]any{"tool": call(map[string]any{"op": "stop", "sessionId": "{{1}}", "outcome": "success", "note": "driven over MCP"})}}},
		map[string]any{"match": map[string]any{"toolResultRegex": `"alreadyStopped":false,"outcome":"success"`}, "steps": []any{
			map[string]any{"text": "DRIVEN-OK"}}},
	}, "toolResultDefault": map[string]any{"text": "DRIVER-LOST: {{result}}"}}
	b, _ := json.Marshal(sc)
	return string(b)
}

// TestClaudeCodeDrivesASessionThroughMCP is one agent driving another
// through codesession: the real Claude Code CLI, its model scripted by
// modelmock, has `codesession mcp` as its MCP server (--mcp-config) and
// calls code_session list-backends, start (the script backend), read-turn,
// answer, read-turn and stop. The driven session's record is then
// complete, with a gapless log that ends in its release.
func TestClaudeCodeDrivesASessionThroughMCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the claude CLI")
	}
	claude := claudeBin(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "codesession")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	home := filepath.Join(dir, "home")
	work := t.TempDir()
	script := writeScenario(t, drivenScenario)
	url := startModelmockCmd(t, "--scenario", writeScenario(t, driverScenario(work)))
	mcpConfig := filepath.Join(dir, "mcp.json")
	// the server's stderr (its debug log) goes to a file the test reads
	serverLog := filepath.Join(dir, "mcp-server.log")
	cfg := map[string]any{"mcpServers": map[string]any{"codesession": map[string]any{
		"type": "stdio", "command": "/bin/sh",
		"args": []string{"-c", `exec "$0" mcp --home "$1" --env CODESESSION_SCRIPT="$2" --max-posture acceptEdits 2>>"$3"`,
			bin, home, script, serverLog},
		"env": map[string]string{"CODESESSION_LOG_LEVEL": "debug"},
	}}}
	b, _ := json.Marshal(cfg)
	require.NoError(t, os.WriteFile(mcpConfig, b, 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "DRIVE", "--mcp-config", mcpConfig, "--strict-mcp-config",
		"--allowedTools", "mcp__codesession__code_session", "--output-format", "stream-json", "--verbose")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "ANTHROPIC_BASE_URL="+url, "ANTHROPIC_API_KEY=sk-ant-test", "HOME="+t.TempDir(),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "claude failed: %s\nstdout: %s", stderr.String(), stdout)

	// the driver's own view: every call succeeded and the last text is ours
	var calls []string
	var final string
	sc := bufio.NewScanner(strings.NewReader(string(stdout)))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line struct {
			Type    string `json:"type"`
			Result  string `json:"result"`
			IsError bool   `json:"is_error"`
			Message struct {
				Content []struct {
					Type    string          `json:"type"`
					Name    string          `json:"name"`
					Input   json.RawMessage `json:"input"`
					IsError bool            `json:"is_error"`
				} `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		for _, c := range line.Message.Content {
			switch c.Type {
			case "tool_use":
				var in struct {
					Op string `json:"op"`
				}
				_ = json.Unmarshal(c.Input, &in)
				assert.Equal(t, "mcp__codesession__code_session", c.Name)
				calls = append(calls, in.Op)
			case "tool_result":
				assert.False(t, c.IsError, "a code_session call failed: %s", sc.Text())
			}
		}
		if line.Type == "result" {
			final = line.Result
			assert.False(t, line.IsError, sc.Text())
		}
	}
	require.Equal(t, []string{"list-backends", "start", "read-turn", "answer", "read-turn", "stop"}, calls, "stdout: %s", stdout)
	require.Equal(t, "DRIVEN-OK", final, "stdout: %s", stdout)

	// Claude Code asks for progress on its calls, and the slow read-turn
	// sent it notifications that reached it
	logText, err := os.ReadFile(serverLog)
	require.NoError(t, err)
	assert.Contains(t, string(logText), "progressToken=true", "the host sent no progress token")
	assert.Contains(t, string(logText), "mcp: progress notification sent", "no progress reached the host: %s", logText)
	assert.NotContains(t, string(logText), "not sent")

	// the driven session's record: complete, its log gapless and ended by
	// its release (the mcp server may still be closing: wait for the record)
	st, err := filestore.Open(home)
	require.NoError(t, err)
	defer st.Close()
	recs, err := st.List(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	rec := recs[0]
	assert.Equal(t, "script", rec.BackendID)
	assert.Equal(t, work, rec.Cwd)
	assert.Equal(t, "list the files", rec.TaskBrief)
	assert.Equal(t, []string{"mcp-live"}, rec.TaskTags)
	assert.Equal(t, messages.PostureAcceptEdits, rec.MaxPosture, "the server's ceiling, not the caller's")
	assert.Equal(t, 1, rec.RoundsElapsed)
	assert.Equal(t, messages.OutcomeSuccess, rec.Outcome)
	assert.Equal(t, "driven over MCP", rec.OutcomeNote)
	assert.False(t, rec.Status.Live(), "stopped: %s", rec.Status)

	evs, err := st.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	seen := map[messages.EventType]int{}
	for i, ev := range evs {
		require.Equal(t, uint64(i+1), ev.Seq, "the log has a gap or a repeat at %d", i)
		seen[ev.Event.Type]++
	}
	for _, want := range []messages.EventType{messages.EvTurnStarted, messages.EvToolUse, messages.EvToolResult,
		messages.EvTurnEnd, messages.EvReleased} {
		assert.NotZero(t, seen[want], "no %s event in %v", want, seen)
	}
	assert.Equal(t, 2, seen[messages.EvClarification], "raised, then answered: %v", seen)
	last := evs[len(evs)-1].Event
	assert.Equal(t, messages.EvReleased, last.Type, "the release is the last event")
	assert.Equal(t, messages.ReleaseExplicit, last.ReleaseReason)
}
