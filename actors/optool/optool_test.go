package optool

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

const sid = "cs_2222222222222222222222222222222222222222222222222222222222222222"

// fakeOps records what reaches the runtime; ReadTurn blocks until ctx ends
// unless a result is queued.
type fakeOps struct {
	mu     sync.Mutex
	scope  string
	start  messages.Start
	guide  messages.Guide
	result chan messages.TurnResult
}

func (f *fakeOps) Start(_ context.Context, scope string, op messages.Start) (messages.StartResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scope, f.start = scope, op
	return messages.StartResult{SessionID: sid, MaxPosture: op.MaxPosture, MaxRounds: op.MaxRounds}, nil
}

func (f *fakeOps) ReadTurn(ctx context.Context, _ string, op messages.ReadTurn) (messages.TurnResult, error) {
	select {
	case r := <-f.result:
		return r, nil
	case <-ctx.Done():
		return messages.TurnResult{}, messages.Wrap(messages.CodeTimeout, messages.OpReadTurn, ctx.Err(), "the deadline passed")
	}
}

func (f *fakeOps) Answer(context.Context, string, messages.Answer) (messages.AnswerResult, error) {
	return messages.AnswerResult{OK: true}, nil
}

func (f *fakeOps) Guide(_ context.Context, _ string, op messages.Guide) (messages.OKResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.guide = op
	return messages.OKResult{OK: true}, nil
}

func (f *fakeOps) SetPosture(_ context.Context, _ string, op messages.SetPosture) (messages.SetPostureResult, error) {
	return messages.SetPostureResult{OK: true, Posture: op.Posture}, nil
}

func (f *fakeOps) Interrupt(context.Context, string, messages.Interrupt) (messages.OKResult, error) {
	return messages.OKResult{OK: true}, nil
}

func (f *fakeOps) Stop(context.Context, string, messages.Stop) (messages.StopResult, error) {
	return messages.StopResult{OK: true}, nil
}

func (f *fakeOps) ListBackends(context.Context, string) (messages.ListBackendsResult, error) {
	return messages.ListBackendsResult{}, nil
}

func newDispatcher(t *testing.T, o Options) (*Dispatcher, *fakeOps) {
	t.Helper()
	f := &fakeOps{result: make(chan messages.TurnResult, 1)}
	o.Ops = f
	if o.Scope == "" {
		o.Scope = "server-scope"
	}
	d, err := New(o)
	require.NoError(t, err)
	return d, f
}

func call(t *testing.T, d *Dispatcher, args string, progress ProgressFunc) (any, *messages.Error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := d.Call(ctx, json.RawMessage(args), progress)
	if err != nil {
		e, ok := err.(*messages.Error)
		require.True(t, ok, "not a *messages.Error: %T %v", err, err)
		return nil, e
	}
	return res, nil
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Scope: "s"},
		{Ops: &fakeOps{}},
		{Ops: &fakeOps{}, Scope: "s", Limits: messages.ScopeConstraints{MaxPosture: "root"}},
		{Ops: &fakeOps{}, Scope: "s", DefaultMaxPosture: "root"},
		{Ops: &fakeOps{}, Scope: "s", ReadTurnWait: time.Hour},
	} {
		_, err := New(o)
		assert.Error(t, err, "%+v", o)
	}
}

func TestStartIsHeldToTheServersLimits(t *testing.T) {
	d, f := newDispatcher(t, Options{DefaultMaxPosture: messages.PostureDefault, Limits: messages.ScopeConstraints{
		MaxPosture: messages.PostureAcceptEdits, MaxRounds: 5, AllowedTools: []string{"Read", "Grep"}}})

	_, e := call(t, d, `{"op":"start","brief":"b","maxPosture":"full"}`, nil)
	require.NotNil(t, e)
	assert.Equal(t, messages.CodeCeilingExceeded, e.Code)
	_, e = call(t, d, `{"op":"start","brief":"b","allowedTools":["Bash"]}`, nil)
	require.NotNil(t, e)
	assert.Equal(t, "allowedTools", e.Field)

	_, e = call(t, d, `{"op":"start","brief":"b","maxRounds":50,"allowedTools":["Bash","Read"]}`, nil)
	require.Nil(t, e)
	assert.Equal(t, "server-scope", f.scope, "the scope is the server's")
	assert.Equal(t, messages.PostureDefault, f.start.MaxPosture, "omitted: the default, under the limit")
	assert.Equal(t, 5, f.start.MaxRounds)
	assert.Equal(t, []string{"Read"}, f.start.AllowedTools, "intersected with the limit")

	_, e = call(t, d, `{"op":"start","brief":"b","maxPosture":"plan"}`, nil)
	require.Nil(t, e)
	assert.Equal(t, messages.PosturePlan, f.start.MaxPosture, "below the limit is the caller's to choose")
	assert.Equal(t, []string{"Read", "Grep"}, f.start.AllowedTools, "omitted: the limit's list")

	_, e = call(t, d, `{"op":"set-posture","sessionId":"`+sid+`","posture":"full"}`, nil)
	require.NotNil(t, e)
	assert.Equal(t, messages.CodeCeilingExceeded, e.Code)
}

func TestGuideIsAlwaysTheDrivers(t *testing.T) {
	d, f := newDispatcher(t, Options{})
	_, e := call(t, d, `{"op":"guide","sessionId":"`+sid+`","text":"more tests"}`, nil)
	require.Nil(t, e)
	assert.Equal(t, messages.SourceDriver, f.guide.Source)
}

func TestReadTurnWaitIsARetryableTimeout(t *testing.T) {
	d, f := newDispatcher(t, Options{})
	_, e := call(t, d, `{"op":"read-turn","sessionId":"`+sid+`","timeoutMs":50}`, nil)
	require.NotNil(t, e)
	assert.Equal(t, messages.CodeTimeout, e.Code)
	assert.True(t, e.Retryable)
	assert.Contains(t, e.Message, "read-turn again")

	f.result <- messages.TurnResult{Kind: messages.KindTurnComplete, SessionID: sid, Turn: 1}
	res, e := call(t, d, `{"op":"read-turn","sessionId":"`+sid+`"}`, nil)
	require.Nil(t, e)
	assert.Equal(t, messages.KindTurnComplete, res.(messages.TurnResult).Kind)

	// the caller cancelling is not the wait passing: no "read again"
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := d.Call(ctx, json.RawMessage(`{"op":"read-turn","sessionId":"`+sid+`"}`), nil)
	require.Error(t, err)
	assert.False(t, err.(*messages.Error).Retryable)
}

// The watch ticks in a bubble: virtual time, so the 100 ms with the log
// unchanged are exactly ten ticks of ProgressEvery on any machine, and
// none of them may send a note.
func TestReadTurnReportsProgressOnlyWhenTheLogMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seq atomic.Uint64
		seq.Store(10)
		watch := func(context.Context, string) (Mark, error) {
			return Mark{Seq: seq.Load(), Last: messages.EvText}, nil
		}
		d, f := newDispatcher(t, Options{Watch: watch, ProgressEvery: 10 * time.Millisecond})
		var mu sync.Mutex
		var got []float64
		saw := make(chan float64, 8)
		progress := func(p float64, msg string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, p)
			assert.Contains(t, msg, "text")
			saw <- p
		}
		go func() {
			time.Sleep(100 * time.Millisecond) // ten ticks, log unchanged: nothing sent
			seq.Store(12)
			<-saw
			time.Sleep(100 * time.Millisecond) // unchanged again
			seq.Store(15)
			<-saw
			f.result <- messages.TurnResult{Kind: messages.KindTurnComplete, SessionID: sid, Turn: 1}
		}()
		_, e := call(t, d, `{"op":"read-turn","sessionId":"`+sid+`"}`, progress)
		require.Nil(t, e)
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []float64{2, 5}, got, "one note per move, counting events since the read began")
	})
}
