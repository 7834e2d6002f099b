package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/cluster"
	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/messages"
)

// clusterProc is one `codesession serve` node of a test cluster.
type clusterProc struct {
	*daemonProc
	id, home, addr, gossip string
	args                   []string
	// prefix runs the binary under another command (ip netns exec NS).
	prefix []string
	// env is added to the daemon's environment.
	env []string
}

// freeGossipAddr is a 127.0.0.1 port free for gossip (TCP and UDP) with
// the next one free for the wire.
func freeGossipAddr(t *testing.T) string {
	t.Helper()
	for range 50 {
		a := freeAddr(t)
		_, ps, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(ps)
		next := net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1))
		l, err := net.Listen("tcp", next)
		if err != nil {
			continue
		}
		l.Close()
		u, err := net.ListenPacket("udp", a)
		if err != nil {
			continue
		}
		u.Close()
		return a
	}
	t.Fatal("no free gossip port")
	return ""
}

func startClusterProc(t *testing.T, bin, id, root, scenario, join string) *clusterProc {
	t.Helper()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	cfgPath := filepath.Join(dir, "config.json")
	// the loopback profile: a node that stops answering is declared dead
	// (its lease ends) within seconds
	require.NoError(t, os.WriteFile(cfgPath, []byte(`{"cluster": {"profile": "local"}}`), 0o600))
	p := &clusterProc{id: id, home: home, addr: freeAddr(t), gossip: freeGossipAddr(t)}
	p.args = []string{"serve", "--addr", p.addr, "--home", home, "--config", cfgPath, "--env", "CODESESSION_SCRIPT=" + scenario,
		"--node-id", id, "--cluster-listen", p.gossip, "--cluster-root", root}
	if join != "" {
		p.args = append(p.args, "--join", join)
	}
	p.start(t, bin)
	return p
}

func (p *clusterProc) start(t *testing.T, bin string) {
	t.Helper()
	argv := append(append(append([]string(nil), p.prefix...), bin), p.args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "CODESESSION_BACKEND=script", "CODESESSION_LOG_LEVEL=warn", "CODESESSION_ADDR=", "CODESESSION_CONFIG="), p.env...)
	d := &daemonProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr, cmd.Stdout = d.stderr, d.stderr
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.done
		sweepHome(p.home)
	})
	require.Equal(t, p.addr, waitListening(t, d.stderr))
	p.daemonProc = d
}

// api calls the node's control plane; it returns the error envelope, if
// any, and decodes the data into out.
func (p *clusterProc) api(t *testing.T, method, path string, body, out any) *messages.Error {
	t.Helper()
	tok, err := os.ReadFile(controlplane.TokenPath(p.home))
	require.NoError(t, err)
	return p.apiAs(t, strings.TrimSpace(string(tok)), method, path, body, out)
}

// apiAs is api under token.
func (p *clusterProc) apiAs(t *testing.T, token, method, path string, body, out any) *messages.Error {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+p.addr+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 3 * time.Minute} // only stops a hang
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var env struct {
		OK    bool            `json:"ok"`
		Data  json.RawMessage `json:"data"`
		Error *messages.Error `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&env))
	if !env.OK {
		return env.Error
	}
	if out != nil {
		require.NoError(t, json.Unmarshal(env.Data, out))
	}
	return nil
}

// apiRetrying is a body-less api call that retries a request the
// connection failed (refused, reset, cut off mid-answer) for up to two
// minutes: a daemon on a loaded machine can drop a connection while it
// starts or its peers churn, and a poll's verdict belongs to its own wait,
// not to one connection. An answer the daemon gave is returned as it is.
func (p *clusterProc) apiRetrying(t *testing.T, method, path string, out any) *messages.Error {
	t.Helper()
	tok, err := os.ReadFile(controlplane.TokenPath(p.home))
	require.NoError(t, err)
	client := &http.Client{Timeout: 3 * time.Minute} // only stops a hang
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, err := http.NewRequest(method, "http://"+p.addr+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := client.Do(req)
		if err != nil {
			if time.Now().After(deadline) {
				require.NoError(t, err, "%s %s on %s kept failing", method, path, p.id)
			}
			t.Logf("%s %s on %s: %v (retrying)", method, path, p.id, err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		var env struct {
			OK    bool            `json:"ok"`
			Data  json.RawMessage `json:"data"`
			Error *messages.Error `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if err != nil {
			if time.Now().After(deadline) {
				require.NoError(t, err, "%s %s on %s: the answer kept being cut off", method, path, p.id)
			}
			t.Logf("%s %s on %s: answer cut off: %v (retrying)", method, path, p.id, err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if !env.OK {
			return env.Error
		}
		if out != nil {
			require.NoError(t, json.Unmarshal(env.Data, out))
		}
		return nil
	}
}

func (p *clusterProc) verifiedPeers(t *testing.T) []string {
	t.Helper()
	var ms []cluster.Member
	if e := p.apiRetrying(t, "GET", "/api/cluster/nodes", &ms); e != nil {
		return nil
	}
	var ids []string
	for _, m := range ms {
		if m.State == "alive" && m.Verified {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// session is sid's record in p's listing; a connection the loaded daemon
// dropped is asked again (apiRetrying), a poll's verdict is its own wait's.
func (p *clusterProc) session(t *testing.T, sid string) (cluster.NodeRecord, bool) {
	var list struct {
		Sessions []cluster.NodeRecord `json:"sessions"`
	}
	if e := p.apiRetrying(t, "GET", "/api/code-sessions", &list); e != nil {
		return cluster.NodeRecord{}, false
	}
	for _, r := range list.Sessions {
		if r.SessionID == sid {
			return r, true
		}
	}
	return cluster.NodeRecord{}, false
}

// waitFor polls cond; the deadline only stops a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterOfThreeServeProcesses: three `codesession serve` nodes. A
// session placed on n2 (it holds the workspace) is driven through n1; n2
// is SIGKILLed mid-turn and n1 and n3 show its session orphaned once n2's
// lease expires; n2 restarts on the same home and ports, rejoins, and the
// session is resumed and driven to its end through n3, with one gapless log.
func TestClusterOfThreeServeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three daemon processes")
	}
	bin := buildServe(t)
	scenario := writeScenario(t, opsScenario)
	roots := []string{t.TempDir(), t.TempDir(), t.TempDir()}

	n1 := startClusterProc(t, bin, "n1", roots[0], scenario, "")
	n2 := startClusterProc(t, bin, "n2", roots[1], scenario, n1.gossip)
	n3 := startClusterProc(t, bin, "n3", roots[2], scenario, n1.gossip)
	nodes := []*clusterProc{n1, n2, n3}
	for _, n := range nodes {
		waitFor(t, n.id+" to verify both peers", func() bool { return len(n.verifiedPeers(t)) == 2 })
	}

	var placed cluster.Placed
	require.Nil(t, n1.api(t, "POST", "/api/code-sessions", map[string]any{"brief": "first task", "cwd": roots[1]}, &placed))
	require.Equal(t, "n2", placed.Node, "placed on the node holding the workspace")
	sid := placed.SessionID

	// driven through n1
	var tr messages.TurnResult
	require.Nil(t, n1.api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 120000}, &tr))
	require.Equal(t, messages.KindTurnComplete, tr.Kind)
	require.Nil(t, n1.api(t, "POST", "/api/code-sessions/"+sid+"/guidance", map[string]any{"text": "SLOW now"}, nil))
	waitFor(t, "the slow turn to run on n2", func() bool {
		var v struct {
			Events []messages.PersistedEvent `json:"events"`
		}
		if n1.api(t, "GET", "/api/code-sessions/"+sid+"?limit=5000", nil, &v) != nil {
			return false
		}
		for _, ev := range v.Events {
			if ev.Event.Type == messages.EvText && !ev.Event.Delta && ev.Event.Text == "working on it" {
				return true
			}
		}
		return false
	})

	require.NoError(t, n2.cmd.Process.Signal(syscall.SIGKILL))
	n2.wait(t, time.Minute)
	killed := time.Now()
	for _, n := range []*clusterProc{n1, n3} {
		waitFor(t, n.id+" to show n2's session orphaned", func() bool {
			r, ok := n.session(t, sid)
			return ok && r.Node == "n2" && r.Status == messages.StatusOrphaned
		})
	}
	t.Logf("n2's session showed orphaned on n1 and n3 %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	e := n3.api(t, "POST", "/api/code-sessions/"+sid+"/stop", map[string]any{}, nil)
	require.NotNil(t, e)
	assert.Equal(t, messages.CodeUnavailable, e.Code, "ops on a lost node's session fail as unavailable")

	// n2 comes back on its home; its boot marks the session orphaned
	n2.start(t, bin)
	waitFor(t, "n3 to verify the returned n2", func() bool {
		for _, id := range n3.verifiedPeers(t) {
			if id == "n2" {
				return true
			}
		}
		return false
	})
	waitFor(t, "n3 to list the session as n2 reports it", func() bool {
		r, ok := n3.session(t, sid)
		return ok && r.Node == "n2" && r.Status == messages.StatusOrphaned
	})

	// resumed and driven to the end through n3
	var res cluster.Placed
	require.Nil(t, n3.api(t, "POST", "/api/code-sessions/"+sid+"/resume", map[string]any{"brief": "carry on"}, &res))
	assert.Equal(t, sid, res.SessionID)
	assert.Equal(t, "n2", res.Node, "a resume through another node says where the session runs")
	require.Nil(t, n3.api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 120000}, &tr))
	assert.Equal(t, messages.KindTurnComplete, tr.Kind)
	assert.Contains(t, tr.Text, "carry on")
	var st messages.StopResult
	require.Nil(t, n3.api(t, "POST", "/api/code-sessions/"+sid+"/stop", map[string]any{"outcome": "success"}, &st))
	assert.False(t, st.AlreadyStopped)

	var final struct {
		Record  messages.SessionRecord    `json:"record"`
		Events  []messages.PersistedEvent `json:"events"`
		LastSeq uint64                    `json:"lastSeq"`
		Node    string                    `json:"node"`
	}
	require.Nil(t, n3.api(t, "GET", "/api/code-sessions/"+sid+"?limit=5000", nil, &final))
	assert.Equal(t, "n2", final.Node)
	assert.Equal(t, messages.StatusEnded, final.Record.Status)
	assert.Len(t, final.Record.Runs, 2, "one record, two runs")
	var types []messages.EventType
	for i, ev := range final.Events {
		require.Equal(t, uint64(i+1), ev.Seq, "one gapless log across the kill")
		types = append(types, ev.Event.Type)
	}
	assert.Contains(t, types, messages.EvOrphaned)
	assert.Contains(t, types, messages.EvAdopted)
	assert.Equal(t, messages.EvReleased, types[len(types)-1])

	// SIGTERM: n1 (the seed, started with no --join) leaves and frees its
	// ports before it exits, so it restarts at once on the same addresses;
	// n3 learned of it and joins it again (retry join)
	require.NoError(t, n1.cmd.Process.Signal(syscall.SIGTERM))
	n1.wait(t, time.Minute)
	n1.start(t, bin)
	waitFor(t, "n3 to verify the restarted n1", func() bool {
		for _, id := range n3.verifiedPeers(t) {
			if id == "n1" {
				return true
			}
		}
		return false
	})
	waitFor(t, "the restarted n1 to list the session on n2", func() bool {
		r, ok := n1.session(t, sid)
		return ok && r.Node == "n2"
	})
}

func TestServeRefusesAnUnroutableClusterAddress(t *testing.T) {
	home := t.TempDir()
	var stderr syncBuffer
	code := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--home", home, "--node-id", "n1", "--cluster-listen", "0.0.0.0:7946"},
		func(k string) string { return map[string]string{"CODESESSION_HOME": home}[k] }, nil, io.Discard, &stderr)
	assert.Equal(t, exitUsage, code, stderr.String())
	assert.Contains(t, stderr.String(), "cluster.listen")
	assert.Contains(t, stderr.String(), "every interface")
}

// buildServe builds this command into a temporary folder of t's and
// returns its path: every multi-process cluster test runs that binary.
func buildServe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "codesession")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// waitAllVerified waits until each node has verified the others.
func waitAllVerified(t *testing.T, nodes ...*clusterProc) {
	t.Helper()
	for _, n := range nodes {
		waitFor(t, n.id+" to verify its peers", func() bool { return len(n.verifiedPeers(t)) == len(nodes)-1 })
	}
}
