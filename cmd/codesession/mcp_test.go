package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/actors/mcpserver"
	"github.com/codesession/codesession/messages"
)

// mcpProc runs `codesession mcp ARGS` in-process on pipes and connects the
// go-sdk's client to it, as a host spawning it would.
func mcpProc(t *testing.T, env map[string]string, args ...string) (*mcp.ClientSession, func() int) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	go func() {
		code <- run(ctx, append([]string{"mcp"}, args...), func(k string) string { return env[k] }, inR, outW, stderr)
		outW.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err, "stderr: %s", stderr.String())
	var exit *int
	wait := func() int {
		if exit == nil {
			_ = cs.Close()
			inW.Close()
			select {
			case c := <-code:
				exit = &c
			case <-time.After(time.Minute):
				cancel()
				c := <-code
				exit = &c
				t.Errorf("mcp did not end when its host closed stdin; stderr: %s", stderr.String())
			}
			cancel()
		}
		return *exit
	}
	t.Cleanup(func() { wait() })
	return cs, wait
}

func toolCall(t *testing.T, cs *mcp.ClientSession, args map[string]any, out any) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: messages.ToolName, Arguments: args})
	require.NoError(t, err)
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		var te mcpserver.ToolError
		require.NoError(t, json.Unmarshal([]byte(text), &te), text)
		if e, ok := out.(**messages.Error); ok {
			*e = te.Error
		}
		return false
	}
	if out != nil {
		require.NoError(t, json.Unmarshal([]byte(text), out), text)
	}
	return true
}

// drive runs one whole session through the tool: start, a clarification
// answered, the turn's result, stop. It returns the start result.
func drive(t *testing.T, cs *mcp.ClientSession, cwd string) messages.StartResult {
	t.Helper()
	var st messages.StartResult
	require.True(t, toolCall(t, cs, map[string]any{"op": "start", "backend": "script", "brief": "ASK first", "cwd": cwd}, &st))
	var r messages.TurnResult
	require.True(t, toolCall(t, cs, map[string]any{"op": "read-turn", "sessionId": st.SessionID}, &r))
	require.Equal(t, messages.KindClarification, r.Kind, "%+v", r)
	require.True(t, toolCall(t, cs, map[string]any{"op": "answer", "sessionId": st.SessionID,
		"clarificationId": r.ClarificationID, "decision": "allow_session"}, nil))
	require.True(t, toolCall(t, cs, map[string]any{"op": "read-turn", "sessionId": st.SessionID, "timeoutMs": 60000}, &r))
	assert.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	var stop messages.StopResult
	require.True(t, toolCall(t, cs, map[string]any{"op": "stop", "sessionId": st.SessionID, "outcome": "success"}, &stop))
	assert.Equal(t, messages.OutcomeSuccess, stop.Outcome)
	return st
}

func TestMCPCommandEmbedded(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	sc := writeScenario(t, opsScenario)
	cs, wait := mcpProc(t, nil, "--home", home, "--env", "CODESESSION_SCRIPT="+sc, "--max-posture", "default", "--max-rounds", "3")

	var lb messages.ListBackendsResult
	require.True(t, toolCall(t, cs, map[string]any{"op": "list-backends"}, &lb))
	ids := map[string]bool{}
	for _, b := range lb.Backends {
		ids[b.Descriptor.ID] = true
		assert.NotEmpty(t, b.Descriptor.PostureMap, b.Descriptor.ID)
		assert.False(t, b.Availability.CheckedAt.IsZero(), "%s was not probed", b.Descriptor.ID)
	}
	assert.True(t, ids["script"] && ids["claude-code"], "the default backends: %v", ids)

	// compact: one short row per backend, the same backends (issue 37: the
	// whole matrix is tens of KB a call)
	var cb messages.CompactBackendsResult
	require.True(t, toolCall(t, cs, map[string]any{"op": "list-backends", "compact": true}, &cb))
	require.Len(t, cb.Backends, len(lb.Backends))
	full, _ := json.Marshal(lb)
	compact, _ := json.Marshal(cb)
	t.Logf("list-backends: %d bytes; compact: %d bytes", len(full), len(compact))
	assert.Less(t, 4*len(compact), len(full), "compact is a fraction of the whole matrix")
	for i, b := range cb.Backends {
		assert.Equal(t, lb.Backends[i].Descriptor.ID, b.ID)
		assert.Equal(t, lb.Backends[i].Availability.Available, b.Available, b.ID)
	}

	// the flags are the ceilings; the calling agent cannot raise them
	var e *messages.Error
	require.False(t, toolCall(t, cs, map[string]any{"op": "start", "backend": "script", "brief": "x", "cwd": t.TempDir(), "maxPosture": "acceptEdits"}, &e))
	assert.Equal(t, messages.CodeCeilingExceeded, e.Code)

	st := drive(t, cs, t.TempDir())
	assert.Equal(t, messages.PostureDefault, st.MaxPosture)
	assert.Equal(t, 3, st.MaxRounds)
	assert.Equal(t, exitOK, wait(), "closing stdin ends the server cleanly")
}

func TestMCPCommandThroughADaemon(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	addr, _, stopDaemon := inProcessDaemon(t, home, writeScenario(t, opsScenario))

	// `codesession mcp --addr`: the daemon's runtime, its token from the home
	cs, wait := mcpProc(t, nil, "--addr", addr, "--home", home, "--max-posture", "acceptEdits")
	var lb messages.ListBackendsResult
	require.True(t, toolCall(t, cs, map[string]any{"op": "list-backends"}, &lb))
	require.NotEmpty(t, lb.Backends)
	st := drive(t, cs, t.TempDir())
	var e *messages.Error
	require.False(t, toolCall(t, cs, map[string]any{"op": "stop", "sessionId": "cs_x"}, &e))
	assert.Equal(t, messages.CodeInvalid, e.Code)
	assert.Equal(t, exitOK, wait())

	// the session is the daemon's: the console shows it, with the verdict
	r := runCLI(t, invocation{env: map[string]string{"CODESESSION_HOME": home}}, "show", "--addr", addr, "--json", st.SessionID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"outcome":"success"`)

	// serve's own /mcp, behind the same token
	tok, err := controlplane.ReadToken(home)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil)
	hs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{tok}}}, nil)
	require.NoError(t, err)
	require.True(t, toolCall(t, hs, map[string]any{"op": "list-backends"}, &lb))
	require.NoError(t, hs.Close())
	assert.Equal(t, exitOK, stopDaemon())
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestMCPCommandFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--max-posture", "root"}, "--max-posture"},
		{[]string{"mcp", "--max-rounds", "-1"}, "--max-rounds"},
		{[]string{"mcp", "--read-wait", "0s"}, "--read-wait"},
		{[]string{"mcp", "extra"}, "takes no arguments"},
		{[]string{"mcp", "--addr", "127.0.0.1:1", "--env", "A=B"}, "--env"},
	} {
		res := runCLI(t, invocation{}, tc.args...)
		assert.Equal(t, exitUsage, res.code, tc.args)
		assert.Contains(t, res.stderr, tc.want, tc.args)
	}
}

func TestMCPCommandPrintsTheToolSchema(t *testing.T) {
	t.Parallel()
	res := runCLI(t, invocation{}, "mcp", "--schema")
	require.Equal(t, exitOK, res.code, res.stderr)
	var tool struct {
		Name        string         `json:"name"`
		InputSchema map[string]any `json:"inputSchema"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &tool))
	assert.Equal(t, messages.ToolName, tool.Name)
	assert.Equal(t, "object", tool.InputSchema["type"])
	assert.Contains(t, tool.InputSchema["properties"], "sessionId")
}

func TestMCPCommandWithTheDaemonDown(t *testing.T) {
	t.Parallel()
	cs, _ := mcpProc(t, map[string]string{"CODESESSION_TOKEN": "t"}, "--addr", freeAddr(t), "--home", t.TempDir())
	var e *messages.Error
	require.False(t, toolCall(t, cs, map[string]any{"op": "list-backends"}, &e))
	assert.Equal(t, messages.CodeInternal, e.Code)
	assert.True(t, e.Retryable)
	assert.Contains(t, e.Message, "cannot reach the codesession daemon")
}
