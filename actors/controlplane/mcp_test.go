package controlplane

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// bearer adds the token to every request of the MCP client.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

func TestMCPIsMountedBehindTheToken(t *testing.T) {
	f := newFixture(t, func(o *DaemonOptions) { o.Config.DefaultMaxPosture = messages.PostureAcceptEdits })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// no token: the control plane's 401 envelope, before MCP sees anything
	r := f.call(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "Authorization", "")
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Equal(t, messages.CodeUnauthorized, r.code())

	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil)
	_, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: "wrong", rt: http.DefaultTransport}}, MaxRetries: -1}, nil)
	require.Error(t, err, "a wrong token connected")

	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: f.token, rt: http.DefaultTransport}}}, nil)
	require.NoError(t, err)
	defer cs.Close()
	callTool := func(args map[string]any) (string, bool) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: messages.ToolName, Arguments: args})
		require.NoError(t, err)
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	text, isErr := callTool(map[string]any{"op": "list-backends"})
	require.False(t, isErr, text)
	assert.Contains(t, text, `"postureMap"`)

	// the daemon's ceiling (its config), not the host's wish
	text, isErr = callTool(map[string]any{"op": "start", "brief": "hi", "cwd": f.cwd, "maxPosture": "full"})
	require.True(t, isErr, text)
	assert.Contains(t, text, `"code":"ceiling_exceeded"`)

	// a session started through /mcp is the daemon's: the console sees it
	text, isErr = callTool(map[string]any{"op": "start", "brief": "hi", "cwd": f.cwd})
	require.False(t, isErr, text)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(text), &st))
	got := f.call(http.MethodGet, "/api/code-sessions/"+st.SessionID, nil)
	assert.True(t, got.OK, "%+v", got)
	assert.Equal(t, DefaultScope, f.d.Scope())
	text, isErr = callTool(map[string]any{"op": "stop", "sessionId": st.SessionID})
	require.False(t, isErr, text)
}
