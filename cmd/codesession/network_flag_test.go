package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc"
)

// readRecord reads a session's meta.json under home.
func readRecord(t *testing.T, home, sid string) messages.SessionRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "sessions", sid, "meta.json"))
	require.NoError(t, err)
	var rec messages.SessionRecord
	require.NoError(t, json.Unmarshal(b, &rec))
	return rec
}

// --network on run and start reaches the session: its record's run says
// the mode applied and, where Landlock has TCP rules, the only port its
// processes may connect to (the model's); a value that is no mode is a
// usage error; --help describes the modes (before, neither command had
// the flag: "unknown flag: --network").
func TestNetworkFlag(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mock, err := modelmock.Start(ctx, modelmock.Reference())
	require.NoError(t, err)
	u, err := url.Parse(mock.URL())
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	checkRun := func(rec messages.SessionRecord, mode string) {
		t.Helper()
		require.NotEmpty(t, rec.Runs)
		a := rec.Runs[0].Containment
		require.NotNil(t, a, "the record says what applied")
		assert.Equal(t, mode, a.Network)
		if proc.LandlockABI() >= proc.NetABI {
			assert.Equal(t, []uint16{uint16(port)}, a.ConnectTCP, "the model's port only")
		}
	}

	home, work := t.TempDir(), t.TempDir()
	res := runCLI(t, invocation{env: map[string]string{"CODESESSION_HOME": home}}, "run", "--backend", "native", "--cwd", work,
		"--network", "model-only", "--json", "--env", "ANTHROPIC_BASE_URL="+mock.URL(), "--env", "ANTHROPIC_API_KEY=mock",
		"--answer", "allow", "say hello")
	require.Equal(t, exitOK, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	results, _ := jsonLines(t, res.stdout)
	require.NotEmpty(t, results)
	checkRun(readRecord(t, home, results[0].SessionID), messages.NetworkModelOnly)

	dhome := t.TempDir()
	cli, _ := consoleDaemon(t, dhome, "--env", "ANTHROPIC_BASE_URL="+mock.URL(), "--env", "ANTHROPIC_API_KEY=mock")
	st := cli("start", "--backend", "native", "--cwd", t.TempDir(), "--network", "loopback", "--json", "say hello")
	require.Equal(t, exitOK, st.code, st.stderr)
	var started messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(st.stdout), &started), st.stdout)
	var rec messages.SessionRecord
	require.Eventually(t, func() bool {
		show := cli("show", "--json", started.SessionID)
		var d struct {
			Record messages.SessionRecord `json:"record"`
		}
		if show.code != exitOK || json.Unmarshal([]byte(show.stdout), &d) != nil {
			return false
		}
		rec = d.Record
		return len(rec.Runs) > 0 && rec.Runs[0].Containment != nil
	}, 2*time.Minute, 200*time.Millisecond, "the started event's containment reaches the record")
	checkRun(rec, messages.NetworkLoopback)

	for _, cmd := range []string{"run", "start"} {
		bad := runCLI(t, invocation{}, cmd, "--network", "offline", "x")
		assert.Equal(t, exitUsage, bad.code, cmd)
		assert.Contains(t, bad.stderr, "--network: want open, model-only or loopback", cmd)
		help := runCLI(t, invocation{}, cmd, "--help")
		require.Equal(t, exitOK, help.code, cmd)
		assert.Contains(t, help.stdout, "--network", cmd)
		assert.Contains(t, help.stdout, "model-only", cmd)
	}
}
