package actors

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// deafClose is the script backend whose sessions ignore Close's context and
// never return from it until the test ends.
type deafClose struct {
	*script.Transport
	release <-chan struct{}
}

func (d deafClose) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	s, err := d.Transport.Open(ctx, spec, sink)
	if err != nil {
		return nil, err
	}
	return deafSession{Session: s, release: d.release}, nil
}

type deafSession struct {
	transports.Session
	release <-chan struct{}
}

func (s deafSession) Close(context.Context) error {
	<-s.release
	return s.Session.Close(context.Background())
}

// A backend that ignores Close's context cannot hold the shutdown: its host
// abandons it after a bounded wait, kills its process groups, and says so in
// the log and the metrics; stop and Close both finish (on main the host's
// Stopped blocked, and hollywood's unbounded child stop kept the registry,
// and Close, waiting for ever).
func TestABackendThatWillNotCloseIsAbandonedAndReported(t *testing.T) {
	cfg := testConfig(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt, err := New(cfg, WithBackends(transports.NewRegistry(deafClose{Transport: script.New(script.WithScenario(sc)), release: release})))
	require.NoError(t, err)
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)

	evs := stopThenLog(t, rt, st.SessionID)
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq)
	}
	assert.True(t, supervisionSays(evs, "abandoned"), "the log says the backend was abandoned")
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(rt.metrics.abandoned.WithLabelValues("transport")) == 1
	}, time.Minute, 10*time.Millisecond)

	closeCtx, cancelClose := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelClose()
	require.NoError(t, rt.Close(closeCtx), "Close finishes")
}

// stopThenLog stops session sid of scope "s" (the stop must answer within
// its two-minute bound: only a hang misses it) and returns its log, whose
// last event must be released.
func stopThenLog(t *testing.T, rt *Runtime, sid string) []messages.PersistedEvent {
	t.Helper()
	stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := rt.Stop(stopCtx, "s", messages.Stop{SessionID: sid})
	require.NoError(t, err)
	evs, err := rt.Store().ReadEvents(ctxT(t), sid, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	assert.Equal(t, messages.EvReleased, evs[len(evs)-1].Event.Type, "released stays last")
	return evs
}

// supervisionSays reports whether a supervision event of evs says text.
func supervisionSays(evs []messages.PersistedEvent, text string) bool {
	for _, e := range evs {
		if e.Event.Type == messages.EvSupervision && strings.Contains(e.Event.Text, text) {
			return true
		}
	}
	return false
}

// stuckStart is the script backend whose StartTurn ignores its context and
// never returns until the test ends.
type stuckStart struct {
	*script.Transport
	release <-chan struct{}
}

func (d stuckStart) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	s, err := d.Transport.Open(ctx, spec, sink)
	if err != nil {
		return nil, err
	}
	return stuckStartSession{Session: s, release: d.release}, nil
}

type stuckStartSession struct {
	transports.Session
	release <-chan struct{}
}

func (s stuckStartSession) StartTurn(context.Context, int, string) error {
	<-s.release
	return nil
}

// A backend call that ignores its context runs off the host's Receive, so
// it cannot block the session's stop (on main the host's Receive was stuck
// in StartTurn and its stop never ran).
func TestAStuckBackendCallDoesNotBlockStop(t *testing.T) {
	cfg := testConfig(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	rt, err := New(cfg, WithBackends(transports.NewRegistry(stuckStart{Transport: script.New(), release: release})))
	require.NoError(t, err)
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := rt.Stop(stopCtx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	assert.True(t, res.OK)
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelClose()
	require.NoError(t, rt.Close(closeCtx))
}

// panicsThenDeaf is the script backend whose sessions panic in a
// StartTurn while panics is positive and ignore Close's context until
// release.
type panicsThenDeaf struct {
	*script.Transport
	panics  *atomic.Int32
	release <-chan struct{}
}

func (p panicsThenDeaf) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	s, err := p.Transport.Open(ctx, spec, sink)
	if err != nil {
		return nil, err
	}
	return deafSession{Session: panickySession{Session: s, panics: p.panics}, release: p.release}, nil
}

// A backend that fails (a panic in StartTurn: its host is restarted and
// the failed one's session closed) and then will not close, at the
// restart and at the stop: the session is stopped, its log ends released,
// and the runtime closes, each within its bound. It is the case where a
// session's own cleanup could still meet a child that is stopping (the
// supervisor's), which hollywood waits on without a deadline.
func TestABackendThatFailsAndWillNotCloseIsAbandoned(t *testing.T) {
	cfg := testConfig(t)
	fastSupervision(&cfg)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	panics := new(atomic.Int32)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt, err := New(cfg, WithBackends(transports.NewRegistry(panicsThenDeaf{Transport: script.New(script.WithScenario(sc)), panics: panics, release: release})))
	require.NoError(t, err)
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)

	panics.Store(1)
	_, err = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "two"})
	require.NoError(t, err)
	r := readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindError, r.Kind, "%+v", r)

	evs := stopThenLog(t, rt, st.SessionID)
	assert.True(t, supervisionSays(evs, "restarting"), "the log says the failed backend's host was restarted")
	assert.True(t, supervisionSays(evs, "abandoned"), "the log says the backend that would not close was abandoned")

	closeCtx, cancelClose := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelClose()
	require.NoError(t, rt.Close(closeCtx), "Close finishes")
}
