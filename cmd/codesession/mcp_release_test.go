package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
)

// A host that drives through MCP gets a driver's end: when it disconnects
// (stdio closed), the sessions it started are released, here with reason
// sweep (the embedded runtime's scope is the process's own).
func TestMCPDisconnectReleasesItsSessionsEmbedded(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	cs, wait := mcpProc(t, nil, "--home", home, "--env", "CODESESSION_SCRIPT="+writeScenario(t, opsScenario))
	var st messages.StartResult
	require.True(t, toolCall(t, cs, map[string]any{"op": "start", "backend": "script", "brief": "SLOW please", "cwd": t.TempDir()}, &st))
	assert.Equal(t, exitOK, wait())

	fs, err := filestore.Open(home)
	require.NoError(t, err)
	defer fs.Close()
	ctx := context.Background()
	rec, err := fs.GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, rec.Status, "released, not orphaned")
	evs, err := fs.ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	last := evs[len(evs)-1].Event
	assert.Equal(t, messages.EvReleased, last.Type)
	assert.Equal(t, messages.ReleaseSweep, last.ReleaseReason)
}

// Through a daemon (stdio `mcp --addr`, and the daemon's own /mcp), a
// disconnecting client's sessions are stopped; other clients' are not.
func TestMCPDisconnectReleasesItsSessionsThroughADaemon(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	addr, _, _ := inProcessDaemon(t, home, writeScenario(t, opsScenario))
	inv := invocation{env: map[string]string{"CODESESSION_HOME": home}}
	show := func(sid string) messages.SessionRecord {
		t.Helper()
		r := runCLI(t, inv, "show", "--addr", addr, "--json", sid)
		require.Equal(t, 0, r.code, r.stderr)
		var v struct {
			Record messages.SessionRecord `json:"record"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
		return v.Record
	}

	// a session started by the console is not the MCP client's
	r := runCLI(t, inv, "start", "--addr", addr, "--json", "--cwd", t.TempDir(), "--backend", "script", "SLOW other")
	require.Equal(t, 0, r.code, r.stderr)
	var other messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &other))

	cs, wait := mcpProc(t, nil, "--addr", addr, "--home", home)
	var st messages.StartResult
	require.True(t, toolCall(t, cs, map[string]any{"op": "start", "backend": "script", "brief": "SLOW please", "cwd": t.TempDir()}, &st))
	assert.Equal(t, exitOK, wait())
	assert.Equal(t, messages.StatusEnded, show(st.SessionID).Status, "stopped when its client went away")
	assert.True(t, show(other.SessionID).Status.Live(), "another client's session goes on")

	tok, err := controlplane.ReadToken(home)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil)
	hs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{tok}}}, nil)
	require.NoError(t, err)
	require.True(t, toolCall(t, hs, map[string]any{"op": "start", "backend": "script", "brief": "SLOW http", "cwd": t.TempDir()}, &st))
	require.NoError(t, hs.Close())
	waitUntil(t, "the HTTP client's session to be released", func() bool { return !show(st.SessionID).Status.Live() })
	assert.True(t, show(other.SessionID).Status.Live())
}
