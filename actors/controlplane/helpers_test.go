package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

const testToken = "test-token-0123456789"

// testScenario is what the scripted backend plays in these tests: a turn
// that asks permission (ASK), a slow one (SLOW), a long streaming one
// (STREAM), a chatty text one (TEXT); anything else gets an echo.
func testScenario() *script.Scenario {
	var stream []script.Step
	for i := 0; i < 12; i++ {
		stream = append(stream, script.Tool("Bash", map[string]any{"command": "step"}, "ok"), script.Delay(40*time.Millisecond))
	}
	stream = append(stream, script.Text("streamed"))
	return &script.Scenario{
		Turns: []script.Turn{
			{Match: "ASK", Steps: []script.Step{script.Text("I will vet it"),
				script.Tool("Bash", map[string]any{"command": "go vet ./..."}, "").Asking(), script.Text("vetted")}},
			{Match: "SLOW", Steps: []script.Step{script.Text("working"), script.Delay(time.Minute), script.Text("finished")}},
			{Match: "STREAM", Steps: stream},
			{Match: "TEXT", Steps: []script.Step{script.Text("one two three four five six seven eight nine ten eleven twelve")}},
		},
		Fallback: &script.Turn{Steps: []script.Step{script.Text("reply to turn {{turn}}: {{input}}")}, CostUSD: 0.25},
	}
}

// fixture is a daemon over a memory store and the scripted backend, served
// by a real HTTP server on 127.0.0.1.
type fixture struct {
	t     *testing.T
	d     *Daemon
	srv   *httptest.Server
	token string
	cwd   string
	home  string
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func testConfig(t *testing.T) config.Config {
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = script.ID
	cfg.Supervision.ShutdownTimeout = config.Duration(2 * time.Second)
	return cfg
}

func newFixture(t *testing.T, opts ...func(*DaemonOptions)) *fixture {
	t.Helper()
	o := DaemonOptions{
		Config:   testConfig(t),
		Token:    testToken,
		Store:    store.NewMemory(),
		Backends: transports.NewRegistry(script.New(script.WithScenario(testScenario()))),
		Registry: prometheus.NewRegistry(),
		Logger:   quietLogger(),
	}
	for _, f := range opts {
		f(&o)
	}
	d, err := NewDaemon(o)
	require.NoError(t, err)
	srv := httptest.NewServer(d.Handler())
	f := &fixture{t: t, d: d, srv: srv, token: o.Token, cwd: t.TempDir(), home: o.Config.Home}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		_ = d.Shutdown(ctx) // idempotent enough: a second runtime Close is a no-op
		srv.CloseClientConnections()
		srv.Close()
	})
	return f
}

// resp is a decoded envelope.
type resp struct {
	status int
	OK     bool            `json:"ok"`
	Data   json.RawMessage `json:"data"`
	Error  *messages.Error `json:"error"`
}

func (r resp) code() messages.Code {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// call sends a request with the fixture's token; body is marshalled unless
// it is a string or []byte (sent as is). POSTs are application/json.
func (f *fixture) call(method, path string, body any, hdr ...string) resp {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(f.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	require.NoError(f.t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(f.t, err)
	out := resp{status: res.StatusCode}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		require.NoError(f.t, json.Unmarshal(raw, &out), "body: %s", raw)
	}
	return out
}

// ok calls and requires success, decoding the data into dst.
func (f *fixture) ok(method, path string, body any, dst any) {
	f.t.Helper()
	r := f.call(method, path, body)
	require.Truef(f.t, r.OK, "%s %s: %d %+v", method, path, r.status, r.Error)
	require.Equal(f.t, http.StatusOK, r.status)
	if dst != nil {
		require.NoError(f.t, json.Unmarshal(r.Data, dst))
	}
}

func (f *fixture) start(brief string) messages.StartResult {
	f.t.Helper()
	var st messages.StartResult
	f.ok("POST", "/api/code-sessions", map[string]any{"brief": brief, "cwd": f.cwd, "backend": script.ID}, &st)
	return st
}

func (f *fixture) read(sid string) messages.TurnResult {
	f.t.Helper()
	var r messages.TurnResult
	f.ok("POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 20000}, &r)
	return r
}

func (f *fixture) storeEvents(sid string) []messages.PersistedEvent {
	f.t.Helper()
	evs, err := f.d.Runtime().Store().ReadEvents(context.Background(), sid, 0, 0)
	require.NoError(f.t, err)
	return evs
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	id, event, data string
}

func (e sseEvent) eventData(t *testing.T) EventData {
	t.Helper()
	var d EventData
	require.NoError(t, json.Unmarshal([]byte(e.data), &d), e.data)
	return d
}

// sseConn is an open SSE stream read by a goroutine.
type sseConn struct {
	status int
	ch     chan sseEvent
	cancel context.CancelFunc
	done   chan struct{}
}

// sse opens GET /api/events?query (with Last-Event-ID when lastID is set).
func (f *fixture) sse(query, lastID string) *sseConn {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/events?"+query, nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	c := &sseConn{status: res.StatusCode, ch: make(chan sseEvent, 4096), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.ch)
		defer res.Body.Close()
		readSSE(res.Body, c.ch)
	}()
	f.t.Cleanup(func() { c.cancel(); <-c.done })
	return c
}

// readSSE parses an event stream into ch until EOF.
func readSSE(r io.Reader, ch chan<- sseEvent) {
	br := bufio.NewReader(r)
	var ev sseEvent
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.event != "" || len(data) > 0 {
				ev.data = strings.Join(data, "\n")
				ch <- ev
			}
			ev, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
}

// next returns the next event, or false when the stream ended or nothing
// came in time.
func (c *sseConn) next(timeout time.Duration) (sseEvent, bool) {
	select {
	case ev, ok := <-c.ch:
		return ev, ok
	case <-time.After(timeout):
		return sseEvent{}, false
	}
}

// until reads events until one satisfies stop (included), failing the test
// if the stream ends or stalls first.
func (c *sseConn) until(t *testing.T, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, ok := c.next(hang)
		require.True(t, ok, "the stream ended or stalled; got %d events", len(out))
		out = append(out, ev)
		if stop(ev) {
			return out
		}
	}
}

func isType(t *testing.T, typ messages.EventType) func(sseEvent) bool {
	return func(e sseEvent) bool {
		return e.event == TopicEvent && e.eventData(t).Event.Type == typ
	}
}

// hang bounds the waits that only stop a hang: generous, since CI runs the
// race detector on a loaded two-core machine, where 20 s was close enough
// to miss.
const hang = time.Minute

// waitFor polls cond until it holds or the test times out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
