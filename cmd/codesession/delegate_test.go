package main

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
)

func opToolCall(in map[string]any) *modelmock.ToolCall {
	b, _ := json.Marshal(in)
	return &modelmock.ToolCall{Name: messages.ToolName, Input: b}
}

// The three commands of docs/delegation.md ("Delegating to a driver"): delegate
// (waiting for the verdict), delegations, and resume of a driven session.
func TestDelegateCommands(t *testing.T) {
	const sid = `(cs_[0-9a-f]{64})`
	mock, err := modelmock.Start(t, &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "DRIVE"}, Steps: []modelmock.Step{{Tool: opToolCall(map[string]any{"op": "list-backends"})}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"ok":true,"alreadyStopped"`}, Steps: []modelmock.Step{{Text: "REPORT: met the brief"}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"kind":"turn_complete","sessionId":"` + sid}, Steps: []modelmock.Step{
			{Tool: opToolCall(map[string]any{"op": "stop", "sessionId": "{{1}}", "outcome": "success"})}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"sessionId":"` + sid}, Steps: []modelmock.Step{
			{Tool: opToolCall(map[string]any{"op": "read-turn", "sessionId": "{{1}}"})}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"backends"`}, Steps: []modelmock.Step{
			{Tool: opToolCall(map[string]any{"op": "start", "brief": "say hello"})}}},
	}})
	require.NoError(t, err)
	home := t.TempDir()
	env := map[string]string{"CODESESSION_HOME": home, "CODESESSION_BACKEND": "script", "HOME": home}
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--env", "CODESESSION_SCRIPT=" + writeScenario(t, opsScenario),
			"--env", "ANTHROPIC_BASE_URL=" + mock.URL(), "--env", "ANTHROPIC_API_KEY=sk-ant-test"},
			func(k string) string { return env[k] }, nil, io.Discard, stderr)
	}()
	t.Cleanup(func() { cancel(); <-done })
	addr := waitListening(t, stderr)
	inv := invocation{env: map[string]string{"CODESESSION_HOME": home}}
	cli := func(args ...string) result {
		t.Helper()
		return runCLI(t, inv, append(args[:1:1], append([]string{"--addr", addr}, args[1:]...)...)...)
	}

	r := cli("delegate", "--max-posture", "full", "DRIVE it")
	assert.Equal(t, exitUsage, r.code, "above the persona's ceiling: refused, as a request refused for what was asked")
	assert.Contains(t, r.stderr, "ceiling")

	r = cli("delegate", "--wait", "--backend", "script", "--cwd", t.TempDir(), "DRIVE", "the", "scripted", "agent")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, ": done (code-specialist, packaged)")
	assert.Contains(t, r.stdout, "verdict success")
	assert.Contains(t, r.stdout, "report: REPORT: met the brief")

	r = cli("delegations", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list controlplane.DelegationsView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list.Delegations, 1)
	require.Len(t, list.Delegations[0].Sessions, 1)
	driven := list.Delegations[0].Sessions[0]
	r = cli("delegations")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, list.Delegations[0].ID)
	assert.Contains(t, r.stdout, "done")

	r = cli("resume", "--brief", "DRIVE it again", driven)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "is resumed by delegation dl_")

	r = cli("delegations", "nope")
	assert.Equal(t, exitUsage, r.code)
}
