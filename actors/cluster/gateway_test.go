package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

const testToken = "cluster-test-token"

// daemonNode is a daemon with its node and gateway behind an httptest
// server.
type daemonNode struct {
	node *Node
	d    *controlplane.Daemon
	srv  *httptest.Server
	// refuse, when set, is a backend the node's allowlist refuses to every
	// scope from then on (as if its config had changed since the start)
	refuse atomic.Pointer[string]
}

func startDaemonNode(t *testing.T, id, root, join string, scopes ...config.Scope) *daemonNode {
	t.Helper()
	cfg := config.Default()
	cfg.Daemon.Scopes = scopes
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = "script"
	cfg.Supervision.ShutdownTimeout = config.Duration(2 * time.Second)
	cfg.Learning.Distill = false
	var node atomic.Pointer[Node]
	d, err := controlplane.NewDaemon(controlplane.DaemonOptions{Config: cfg, Token: testToken,
		Backends: transports.NewRegistry(script.New()),
		OnEvent: func(sid string, ev messages.PersistedEvent) {
			if n := node.Load(); n != nil {
				n.Publish(sid, ev)
			}
		}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	dn := &daemonNode{d: d}
	check := func(scope, op, backend string) error {
		if r := dn.refuse.Load(); r != nil && *r == backend {
			return messages.FieldError(op, "backend", "backend %s is not allowed here", backend)
		}
		return d.CheckBackend(scope, op, backend)
	}
	c := Config{NodeID: id, ListenAddr: addr(freePorts(t)), Roots: []string{root}, Profile: ProfileLocal,
		SyncInterval: 500 * time.Millisecond, Runtime: d.Runtime(), Scope: d.Scope(), Visible: d.Visible, CheckBackend: check, DefaultBackend: "script"}
	if join != "" {
		c.Join = []string{join}
	}
	n, err := Start(c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	node.Store(n)
	Wire(n, d)
	srv := httptest.NewServer(NewGateway(n, d))
	t.Cleanup(srv.Close)
	dn.node, dn.srv = n, srv
	return dn
}

// api calls a node's control plane and decodes the envelope's data.
func (dn *daemonNode) api(t *testing.T, method, path string, body any, out any) *messages.Error {
	t.Helper()
	return dn.apiAs(t, testToken, method, path, body, out)
}

// apiAs is api with another bearer token.
func (dn *daemonNode) apiAs(t *testing.T, token, method, path string, body any, out any) *messages.Error {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, dn.srv.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var env struct {
		OK    bool            `json:"ok"`
		Data  json.RawMessage `json:"data"`
		Error *messages.Error `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&env))
	if !env.OK {
		require.NotNil(t, env.Error)
		return env.Error
	}
	if out != nil {
		require.NoError(t, json.Unmarshal(env.Data, out))
	}
	return nil
}

// TestClusterControlPlane: three daemons on one machine. A start on a for
// c's workspace runs on c; its read-turn goes through a; every node lists
// it with node "c"; the SSE feed on a shows its events; an unknown token is
// refused by the gateway's routes too.
func TestClusterControlPlane(t *testing.T) {
	base := t.TempDir()
	roots := []string{filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "c")}
	for _, r := range roots {
		require.NoError(t, mkdir(r))
	}
	a := startDaemonNode(t, "a", roots[0], "")
	b := startDaemonNode(t, "b", roots[1], a.node.cfg.ListenAddr)
	c := startDaemonNode(t, "c", roots[2], a.node.cfg.ListenAddr)
	for _, dn := range []*daemonNode{a, b, c} {
		require.Eventually(t, func() bool { return len(dn.node.livePeers()) == 2 }, deadline, 50*time.Millisecond, describe(dn.node))
	}

	// the SSE feed on a, following every session
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.srv.URL+"/api/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	feed := make(chan controlplane.EventData, 256)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == controlplane.TopicEvent:
				var d controlplane.EventData
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d) == nil {
					feed <- d
				}
			}
		}
		close(feed)
	}()

	var placed Placed
	require.Nil(t, a.api(t, "POST", "/api/code-sessions", map[string]any{"brief": "hello cluster", "cwd": roots[2]}, &placed))
	assert.Equal(t, "c", placed.Node)
	sid := placed.SessionID

	// a node option overrides placement; a wrong one is invalid, saying why
	e := a.api(t, "POST", "/api/code-sessions", map[string]any{"brief": "x", "cwd": roots[2], "node": "b"}, nil)
	require.NotNil(t, e)
	assert.Equal(t, messages.CodeInvalid, e.Code)
	assert.Contains(t, e.Message, "b holds no workspace root containing")

	var res messages.TurnResult
	require.Nil(t, a.api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 60000}, &res))
	assert.Equal(t, messages.KindTurnComplete, res.Kind)
	assert.Equal(t, sid, res.SessionID)

	// the feed on a shows the session on c, gaplessly from its first event
	var seqs []uint64
	sawEnd := false
	timeout := time.After(deadline)
	for !sawEnd {
		select {
		case d, ok := <-feed:
			require.True(t, ok, "the feed ended")
			if d.SessionID == sid {
				seqs = append(seqs, d.Seq)
				sawEnd = d.Event.Type == messages.EvTurnEnd
			}
		case <-timeout:
			t.Fatalf("the feed on a never showed c's turn end; saw %v", seqs)
		}
	}
	for i := 1; i < len(seqs); i++ {
		assert.Greater(t, seqs[i], seqs[i-1], "seq order")
	}
	assert.Equal(t, uint64(1), seqs[0], "the feed subscribed before the start: it shows the first event")

	// every node lists it, on c (b learns of it from its first feed event
	// and a record fetch: the directory is current soon, not at once)
	for _, dn := range []*daemonNode{a, b, c} {
		var list struct {
			Sessions []NodeRecord `json:"sessions"`
		}
		require.Eventually(t, func() bool {
			list.Sessions = nil
			return dn.api(t, "GET", "/api/code-sessions", nil, &list) == nil && len(list.Sessions) == 1
		}, deadline, 20*time.Millisecond, dn.node.ID())
		assert.Equal(t, "c", list.Sessions[0].Node)
	}
	// the record and events through b
	var view sessionView
	require.Nil(t, b.api(t, "GET", "/api/code-sessions/"+sid, nil, &view))
	assert.Equal(t, "c", view.Node)
	assert.NotEmpty(t, view.Events)

	// stop through b, twice
	var st messages.StopResult
	require.Nil(t, b.api(t, "POST", "/api/code-sessions/"+sid+"/stop", map[string]any{"outcome": "success"}, &st))
	assert.False(t, st.AlreadyStopped)
	require.Nil(t, b.api(t, "POST", "/api/code-sessions/"+sid[:12]+"/stop", map[string]any{}, &st))
	assert.True(t, st.AlreadyStopped)

	// the gateway's routes check the token
	r2, err := http.Post(a.srv.URL+"/api/code-sessions", "application/json", strings.NewReader(`{"brief":"x"}`))
	require.NoError(t, err)
	r2.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, r2.StatusCode)
}
