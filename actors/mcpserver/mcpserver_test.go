package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/mcpserver"
	"github.com/codesession/codesession/actors/optool"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// scenario: turn 1 asks for Bash; turn 2 takes a few seconds and logs as
// it goes (progress); turn 3 waits a minute (cancel the read, interrupt it).
func scenario() *script.Scenario {
	return &script.Scenario{Turns: []script.Turn{
		{Steps: []script.Step{
			script.Text("looking"),
			script.Tool("Bash", map[string]any{"command": "ls"}, "README.md").Asking(),
			script.Text("turn one done"),
		}},
		{Match: "slowly", Steps: []script.Step{
			script.Text("one"), script.Delay(700 * time.Millisecond),
			script.Text("two"), script.Delay(700 * time.Millisecond),
			script.Text("three"), script.Delay(700 * time.Millisecond),
			script.Text("turn two done"),
		}},
		{Match: "wait", Steps: []script.Step{script.Delay(time.Minute), script.Text("never")}},
	}}
}

type fixture struct {
	rt   *actors.Runtime
	d    *optool.Dispatcher
	srv  *mcp.Server
	work string
}

func newFixture(t *testing.T, limits messages.ScopeConstraints) *fixture {
	t.Helper()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = "script"
	cfg.DefaultMaxPosture = messages.PostureAcceptEdits
	cfg.Supervision.ShutdownTimeout = config.Duration(2 * time.Second)
	rt, err := actors.New(cfg, actors.WithBackends(transports.NewRegistry(script.New(script.WithScenario(scenario())))))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rt.Close(ctx)
	})
	d, err := optool.New(optool.Options{Ops: rt, Scope: "mcp-test", Limits: limits,
		DefaultMaxPosture: cfg.DefaultMaxPosture, Watch: optool.StoreWatch(rt.Store()), ProgressEvery: 100 * time.Millisecond})
	require.NoError(t, err)
	srv, err := mcpserver.New(d, mcpserver.Options{Version: "test"})
	require.NoError(t, err)
	return &fixture{rt: rt, d: d, srv: srv, work: t.TempDir()}
}

type progressLog struct {
	mu    sync.Mutex
	notes []*mcp.ProgressNotificationParams
}

func (p *progressLog) add(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, r.Params)
}

func (p *progressLog) all() []*mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), p.notes...)
}

// connect runs the server on one end of the SDK's in-memory transports and
// returns a client session on the other.
func (f *fixture) connect(t *testing.T, progress *progressLog) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := f.srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	opts := &mcp.ClientOptions{}
	if progress != nil {
		opts.ProgressNotificationHandler = progress.add
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, opts)
	cs, err := c.Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// call calls the tool and decodes its text into out (a result or a
// mcpserver.ToolError, by IsError).
func call(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: messages.ToolName, Arguments: args})
	require.NoError(t, err, "a tool call is never a protocol error")
	require.Len(t, res.Content, 1)
	text := res.Content[0].(*mcp.TextContent).Text
	if out != nil {
		require.NoError(t, json.Unmarshal([]byte(text), out), text)
	}
	return res
}

func mustOK[T any](t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) T {
	t.Helper()
	var out T
	res := call(t, ctx, cs, args, &out)
	require.False(t, res.IsError, "%v: %s", args, res.Content[0].(*mcp.TextContent).Text)
	return out
}

func toolError(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) *messages.Error {
	t.Helper()
	var out mcpserver.ToolError
	res := call(t, ctx, cs, args, &out)
	require.True(t, res.IsError, "%v should fail", args)
	require.NotNil(t, out.Error)
	return out.Error
}

func TestToolIsListedWithAValidSchema(t *testing.T) {
	f := newFixture(t, messages.ScopeConstraints{})
	cs := f.connect(t, nil)
	lt, err := cs.ListTools(testCtx(t), nil)
	require.NoError(t, err)
	require.Len(t, lt.Tools, 1, "one tool, the op field picks the op")
	tool := lt.Tools[0]
	assert.Equal(t, messages.ToolName, tool.Name)
	assert.Contains(t, tool.Description, "list-backends")
	// the schema the host sees is the one generated from the op types
	want, err := messages.ToolInputSchema()
	require.NoError(t, err)
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(tool.InputSchema)
	assert.JSONEq(t, string(wb), string(gb))
	var got map[string]any
	require.NoError(t, json.Unmarshal(gb, &got))
	assert.Equal(t, "object", got["type"])
	assert.Equal(t, []any{"op"}, got["required"])
}

func TestEveryOpDispatches(t *testing.T) {
	f := newFixture(t, messages.ScopeConstraints{})
	progress := &progressLog{}
	cs := f.connect(t, progress)
	ctx := testCtx(t)

	lb := mustOK[messages.ListBackendsResult](t, ctx, cs, map[string]any{"op": "list-backends"})
	require.Len(t, lb.Backends, 1)
	assert.Equal(t, "script", lb.Backends[0].Descriptor.ID)
	assert.NotEmpty(t, lb.Backends[0].Descriptor.PostureMap, "the posture map is in the listing")
	assert.True(t, lb.Backends[0].Availability.Available, "the availability probe is in the listing: %+v", lb.Backends[0].Availability)

	st := mustOK[messages.StartResult](t, ctx, cs, map[string]any{"op": "start", "brief": "look around", "cwd": f.work})
	sid := st.SessionID
	require.True(t, messages.ValidSessionID(sid))
	assert.Equal(t, messages.PostureAcceptEdits, st.MaxPosture)

	r := mustOK[messages.TurnResult](t, ctx, cs, map[string]any{"op": "read-turn", "sessionId": sid})
	require.Equal(t, messages.KindClarification, r.Kind, "%+v", r)
	assert.Equal(t, "Bash", r.ToolName)
	ans := mustOK[messages.AnswerResult](t, ctx, cs, map[string]any{"op": "answer", "sessionId": sid,
		"clarificationId": r.ClarificationID, "decision": "allow_once"})
	assert.True(t, ans.OK)
	r = mustOK[messages.TurnResult](t, ctx, cs, map[string]any{"op": "read-turn", "sessionId": sid})
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, "turn one done", r.Text)

	// a slow turn, read with a progress token: the host sees it move
	mustOK[messages.OKResult](t, ctx, cs, map[string]any{"op": "guide", "sessionId": sid, "text": "now slowly"})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: messages.ToolName, Meta: mcp.Meta{"progressToken": "turn-2"},
		Arguments: map[string]any{"op": "read-turn", "sessionId": sid}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &r))
	require.Equal(t, "turn two done", r.Text)
	notes := progress.all()
	require.NotEmpty(t, notes, "a read-turn that blocked for seconds sent no progress")
	last := 0.0
	for _, n := range notes {
		assert.Equal(t, "turn-2", n.ProgressToken)
		assert.Greater(t, n.Progress, last, "progress must increase")
		assert.Contains(t, n.Message, "new events")
		last = n.Progress
	}

	p := mustOK[messages.SetPostureResult](t, ctx, cs, map[string]any{"op": "set-posture", "sessionId": sid, "posture": "plan"})
	assert.Equal(t, messages.PosturePlan, p.Posture)

	// the host cancels a blocked read: the read ends, the session does not
	mustOK[messages.OKResult](t, ctx, cs, map[string]any{"op": "guide", "sessionId": sid, "text": "wait for it"})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: messages.ToolName,
			Arguments: map[string]any{"op": "read-turn", "sessionId": sid}})
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.Error(t, err, "the cancelled call returns")
	case <-time.After(time.Minute):
		t.Fatal("cancelling the call did not end it")
	}
	// the session is live, and the read slot is free again
	var rec messages.SessionRecord
	require.Eventually(t, func() bool {
		rec, err = f.rt.Store().GetMeta(ctx, sid)
		return err == nil
	}, time.Minute, 50*time.Millisecond)
	assert.True(t, rec.Status.Live(), "cancelling a read must not end the session: %s", rec.Status)

	mustOK[messages.OKResult](t, ctx, cs, map[string]any{"op": "interrupt", "sessionId": sid})
	r = mustOK[messages.TurnResult](t, ctx, cs, map[string]any{"op": "read-turn", "sessionId": sid})
	assert.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, messages.TurnInterrupted, r.State, "%+v", r)

	stop := mustOK[messages.StopResult](t, ctx, cs, map[string]any{"op": "stop", "sessionId": sid, "outcome": "partial"})
	assert.True(t, stop.OK)
	assert.Equal(t, messages.OutcomePartial, stop.Outcome)
	again := mustOK[messages.StopResult](t, ctx, cs, map[string]any{"op": "stop", "sessionId": sid})
	assert.True(t, again.AlreadyStopped, "stop is idempotent")
}

func TestBadInputIsATypedToolError(t *testing.T) {
	f := newFixture(t, messages.ScopeConstraints{})
	cs := f.connect(t, nil)
	ctx := testCtx(t)
	const nosuch = "cs_1111111111111111111111111111111111111111111111111111111111111111"
	for _, c := range []struct {
		args  map[string]any
		code  messages.Code
		field string
	}{
		{map[string]any{}, messages.CodeInvalid, "op"},
		{map[string]any{"op": "launch"}, messages.CodeInvalid, "op"},
		{map[string]any{"op": "start"}, messages.CodeInvalid, "brief"},
		{map[string]any{"op": "start", "brief": "x", "maxPosture": "root"}, messages.CodeInvalid, "maxPosture"},
		{map[string]any{"op": "start", "brief": "x", "maxRounds": "lots"}, messages.CodeInvalid, "maxRounds"},
		{map[string]any{"op": "start", "brief": "x", "scope": "admin"}, messages.CodeInvalid, "scope"},
		{map[string]any{"op": "read-turn", "sessionId": "nope"}, messages.CodeInvalid, "sessionId"},
		{map[string]any{"op": "guide", "sessionId": nosuch, "text": "hi", "source": "user"}, messages.CodeInvalid, "source"},
		{map[string]any{"op": "answer", "sessionId": nosuch, "clarificationId": "c", "decision": "perhaps"}, messages.CodeInvalid, "decision"},
		{map[string]any{"op": "stop", "sessionId": nosuch}, messages.CodeNotFound, ""},
		{map[string]any{"op": "start", "brief": "x", "backend": "nope"}, messages.CodeNotFound, ""},
	} {
		e := toolError(t, ctx, cs, c.args)
		assert.Equal(t, c.code, e.Code, "%v: %+v", c.args, e)
		if c.field != "" {
			assert.Equal(t, c.field, e.Field, "%v: %+v", c.args, e)
		}
		assert.NotEmpty(t, e.Message)
	}
	// the server is still serving
	mustOK[messages.ListBackendsResult](t, ctx, cs, map[string]any{"op": "list-backends"})
}

func TestACeilingAboveTheServersIsRefused(t *testing.T) {
	f := newFixture(t, messages.ScopeConstraints{MaxPosture: messages.PostureDefault, MaxRounds: 2, Backend: "script"})
	cs := f.connect(t, nil)
	ctx := testCtx(t)

	e := toolError(t, ctx, cs, map[string]any{"op": "start", "brief": "x", "cwd": f.work, "maxPosture": "full"})
	assert.Equal(t, messages.CodeCeilingExceeded, e.Code)
	assert.Equal(t, "maxPosture", e.Field)
	e = toolError(t, ctx, cs, map[string]any{"op": "start", "brief": "x", "cwd": f.work, "initialPosture": "acceptEdits"})
	assert.Equal(t, messages.CodeCeilingExceeded, e.Code)
	e = toolError(t, ctx, cs, map[string]any{"op": "start", "brief": "x", "cwd": f.work, "backend": "claude-code"})
	assert.Equal(t, "backend", e.Field, "a pinned backend cannot be swapped: %+v", e)

	// omitted: the server's limits, not the runtime's looser defaults
	st := mustOK[messages.StartResult](t, ctx, cs, map[string]any{"op": "start", "brief": "x", "cwd": f.work, "maxRounds": 50})
	assert.Equal(t, messages.PostureDefault, st.MaxPosture)
	assert.Equal(t, 2, st.MaxRounds, "maxRounds is clamped to the server's")
	e = toolError(t, ctx, cs, map[string]any{"op": "set-posture", "sessionId": st.SessionID, "posture": "acceptEdits"})
	assert.Equal(t, messages.CodeCeilingExceeded, e.Code)
	mustOK[messages.StopResult](t, ctx, cs, map[string]any{"op": "stop", "sessionId": st.SessionID})
}

func TestStreamableHTTP(t *testing.T) {
	f := newFixture(t, messages.ScopeConstraints{})
	h := mcpserver.NewHTTPHandler(f.srv, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	ctx := testCtx(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
	require.NoError(t, err)
	defer cs.Close()
	lb := mustOK[messages.ListBackendsResult](t, ctx, cs, map[string]any{"op": "list-backends"})
	assert.Equal(t, "script", lb.Backends[0].Descriptor.ID)
	e := toolError(t, ctx, cs, map[string]any{"op": "nope"})
	assert.Equal(t, messages.CodeInvalid, e.Code)

	// over HTTP too, the host cancelling a blocked read ends the read only
	// (the brief picks the scenario's minute-long turn)
	st := mustOK[messages.StartResult](t, ctx, cs, map[string]any{"op": "start", "brief": "please wait", "cwd": f.work})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: messages.ToolName,
			Arguments: map[string]any{"op": "read-turn", "sessionId": st.SessionID}})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(time.Minute):
		t.Fatal("cancelling the call over HTTP did not end it")
	}
	// the server withdrew the read: a new read takes the slot, and the
	// session answers it once interrupted
	mustOK[messages.OKResult](t, ctx, cs, map[string]any{"op": "interrupt", "sessionId": st.SessionID})
	r := mustOK[messages.TurnResult](t, ctx, cs, map[string]any{"op": "read-turn", "sessionId": st.SessionID, "timeoutMs": 60000})
	assert.Equal(t, messages.TurnInterrupted, r.State, "%+v", r)
	mustOK[messages.StopResult](t, ctx, cs, map[string]any{"op": "stop", "sessionId": st.SessionID})

	// Close ends the requests in flight and refuses new ones
	h.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: messages.ToolName, Arguments: map[string]any{"op": "list-backends"}})
	assert.Error(t, err, "a closed handler still served")
}
