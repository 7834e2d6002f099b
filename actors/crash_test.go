package actors

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// panicky wraps the script backend; its sessions panic in StartTurn while
// panics > 0, which the transport host runs inside its Receive: a transport
// bug, exactly what supervision is for.
type panicky struct {
	*script.Transport
	panics *atomic.Int32
}

func (p panicky) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	s, err := p.Transport.Open(ctx, spec, sink)
	if err != nil {
		return nil, err
	}
	return panickySession{Session: s, panics: p.panics}, nil
}

type panickySession struct {
	transports.Session
	panics *atomic.Int32
}

func (s panickySession) StartTurn(ctx context.Context, turn int, input string) error {
	if s.panics.Add(-1) >= 0 {
		panic("transport bug in StartTurn")
	}
	return s.Session.StartTurn(ctx, turn, input)
}

func (s panickySession) Interrupt(ctx context.Context) error {
	return s.Session.(transports.Interrupter).Interrupt(ctx)
}

func fastSupervision(cfg *config.Config) {
	cfg.Supervision.BackoffInitial = config.Duration(5 * time.Millisecond)
	cfg.Supervision.BackoffMax = config.Duration(20 * time.Millisecond)
	cfg.Supervision.Window = config.Duration(time.Minute)
	cfg.Supervision.MaxRestarts = 3
}

func readKind(t *testing.T, rt *Runtime, scope, sid string) messages.TurnResult {
	t.Helper()
	r, err := rt.ReadTurn(ctxT(t), scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	return r
}

func TestTransportPanicIsRestartedWithoutLosingQueuedMessages(t *testing.T) {
	cfg := testConfig(t)
	fastSupervision(&cfg)
	panics := new(atomic.Int32)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("reply to {{input}}")}}}
	backend := panicky{Transport: script.New(script.WithScenario(sc)), panics: panics}
	rt, err := New(cfg, WithBackends(transports.NewRegistry(backend)), WithStore(store.NewMemory()))
	require.NoError(t, err)
	defer rt.Close(context.Background())
	ctx := ctxT(t)

	st, err := rt.Start(ctx, "s", messages.Start{Brief: "fix one", Cwd: t.TempDir()})
	require.NoError(t, err)
	r := readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindTurnComplete, r.Kind)

	// turn 2's StartTurn panics inside the transport host
	panics.Store(1)
	_, err = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "two"})
	require.NoError(t, err)
	// guidance sent right away lands while the host is down or restarting:
	// it is queued (by the session, then the supervisor) and not lost
	_, err = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "three"})
	require.NoError(t, err)

	r = readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindError, r.Kind, "%+v", r)
	assert.Contains(t, r.Message, "transport")
	r = readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Contains(t, r.Text, "three", "the queued guidance reached the restarted backend")

	evs, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	var sup int
	for _, e := range evs {
		if e.Event.Type == messages.EvSupervision {
			sup++
			assert.Equal(t, "transport", e.Event.Child)
		}
	}
	assert.Equal(t, 1, sup, "one supervision event for one restart")

	stop, err := rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	// the echo backend changed nothing for a brief that asked for a fix:
	// the inferred verdict is honest (learning.Infer), the session ended cleanly
	assert.Equal(t, messages.OutcomeFailed, stop.Outcome)
}

func TestTransportBeyondItsRestartWindowFailsTheSession(t *testing.T) {
	cfg := testConfig(t)
	fastSupervision(&cfg)
	// every turn crashes the backend process: the host restarts it each time
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Crash("segfault")}}}
	rt, err := New(cfg, WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc)))))
	require.NoError(t, err)
	defer rt.Close(context.Background())
	ctx := ctxT(t)

	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	sid := st.SessionID
	var last messages.TurnResult
	for i := 0; i < 10; i++ {
		r, err := rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: sid})
		if messages.ErrorCode(err) == messages.CodeNotLive {
			break
		}
		require.NoError(t, err)
		last = r
		require.Equal(t, messages.KindError, r.Kind, "%+v", r)
		if _, err := rt.Guide(ctx, "s", messages.Guide{SessionID: sid, Text: "again"}); err != nil {
			require.Equal(t, messages.CodeNotLive, messages.ErrorCode(err), err)
			break
		}
	}
	require.Equal(t, messages.KindError, last.Kind)

	// the session ends failed and released; the process (this test) survives
	require.Eventually(t, func() bool {
		rec, err := rt.Store().GetMeta(ctx, sid)
		return err == nil && rec.Status == messages.StatusFailed
	}, time.Minute, 10*time.Millisecond)
	evs, err := rt.Store().ReadEvents(ctx, sid, 0, 0)
	require.NoError(t, err)
	lastEv := evs[len(evs)-1].Event
	assert.Equal(t, messages.EvReleased, lastEv.Type)
	assert.Equal(t, messages.ReleaseFailed, lastEv.ReleaseReason)
	assert.Equal(t, messages.OutcomeFailed, lastEv.Outcome)
	var sup int
	for i, e := range evs {
		assert.Equal(t, uint64(i+1), e.Seq)
		if e.Event.Type == messages.EvSupervision {
			sup++
		}
	}
	assert.Equal(t, 3, sup, "restarted up to the policy's intensity, then escalated")
	stop, err := rt.Stop(ctx, "s", messages.Stop{SessionID: sid})
	require.NoError(t, err)
	assert.True(t, stop.AlreadyStopped)
	assert.Equal(t, messages.OutcomeFailed, stop.Outcome)

	// the runtime still works
	st2, err := rt.Start(ctx, "s", messages.Start{Brief: "x", Cwd: t.TempDir(), Backend: "script"})
	require.NoError(t, err)
	assert.NotEqual(t, sid, st2.SessionID)
}

// TestKilledRuntimeLeavesAnOrphanAndATornLine simulates a process killed in
// the middle of an append: the record is still running and the log ends in
// half a line. A new runtime replays the write-ahead log over the torn line
// and marks the record orphaned with an event that continues the seq.
func TestKilledRuntimeLeavesAnOrphanAndATornLine(t *testing.T) {
	cfg := testConfig(t)
	ctx := ctxT(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, cfg, sc)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)
	// "kill" it: read what is on disk now, then abandon the runtime without
	// releasing anything (its goroutines are left to the test's end)
	before, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	rec, err := rt.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	require.True(t, rec.Status.Live())
	rt.closed.Store(true) // no op reaches it any more, as if the process were gone
	rt.lease.release()    // the kernel drops a dead process's flock
	t.Cleanup(func() {
		// after the test, stop the abandoned runtime's goroutines; it must
		// not write (its records were already swept by rt2)
		rt.closed.Store(false)
	})

	// a torn write: half of a next event, no newline
	line, err := json.Marshal(messages.PersistedEvent{Seq: uint64(len(before) + 1), At: time.Now(), Turn: 1,
		Event: messages.Event{Type: messages.EvText, Text: "never finished"}})
	require.NoError(t, err)
	logPath := filepath.Join(cfg.Home, "sessions", st.SessionID, "events.jsonl")
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(line[:len(line)/2])
	require.NoError(t, err)
	require.NoError(t, f.Close())

	fs, err := filestore.Open(cfg.Home)
	require.NoError(t, err)
	rt2, err := New(cfg, WithStore(fs), WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc)))))
	require.NoError(t, err)
	defer rt2.Close(context.Background())

	// the write-ahead log held every acknowledged event: replay rewrote the
	// log from it, torn bytes gone, with nothing left to cut
	assert.Empty(t, fs.Repairs())
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "never finished")

	rec, err = rt2.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusOrphaned, rec.Status)
	after, err := rt2.Store().ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	require.Len(t, after, len(before)+1)
	for i, e := range after {
		assert.Equal(t, uint64(i+1), e.Seq)
	}
	assert.Equal(t, messages.EvOrphaned, after[len(after)-1].Event.Type)
	// the orphan is not live: ops say so, stop is idempotent
	_, err = rt2.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "x"})
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(err))
	_, err = rt2.Guide(ctx, "other", messages.Guide{SessionID: st.SessionID, Text: "x"})
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err))
}

// TestPersistFailuresAreSoft: a store that fails appends never crashes a
// session; the failure becomes an error event and a metric, and the session
// carries on.
func TestPersistFailuresAreSoft(t *testing.T) {
	cfg := testConfig(t)
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, cfg, sc, WithStore(faulty))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	r := readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindTurnComplete, r.Kind)

	faulty.FailAppends(2)
	_, err = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "next"})
	require.NoError(t, err)
	r = readKind(t, rt, "s", st.SessionID)
	assert.Equal(t, messages.KindTurnComplete, r.Kind, "the turn is still delivered")
	_, err = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "after"})
	require.NoError(t, err)
	r = readKind(t, rt, "s", st.SessionID)
	assert.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.GreaterOrEqual(t, testutil.ToFloat64(rt.metrics.persistErrors), 1.0)

	stop, err := rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	assert.False(t, stop.AlreadyStopped)
	evs, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	var sawError bool
	for _, e := range evs {
		if e.Event.Type == messages.EvError {
			sawError = true
		}
	}
	assert.True(t, sawError, "the failed write is reported as an error event once the store recovers")
	assert.Equal(t, messages.EvReleased, evs[len(evs)-1].Event.Type)
	for i, e := range evs {
		assert.Equal(t, uint64(i+1), e.Seq, "the failed batches were retried: nothing is missing")
	}
}

// TestSessionActorPanicEscalatesToTheRegistry: a panic in the session actor
// itself (here from a faulty event listener) is contained: the registry
// stops that session, marks its record failed with a final released event,
// answers the op it panicked on, and goes on serving others.
func TestSessionActorPanicEscalatesToTheRegistry(t *testing.T) {
	cfg := testConfig(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	var armed atomic.Bool
	listener := func(sid string, ev messages.PersistedEvent) {
		if ev.Event.Type == messages.EvGuidance && armed.CompareAndSwap(true, false) {
			panic("listener bug") // once
		}
	}
	rt := newRuntime(t, cfg, sc, WithEventListener(listener))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)

	armed.Store(true)
	// the guide is answered exactly once: ok when it was answered before
	// the listener panicked, else failed naming the cause (the waiting
	// reader, start and stop cases are in stranded_test.go)
	_, err = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "boom"})
	if err != nil {
		require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "%v", err)
		assert.Contains(t, err.Error(), "listener bug")
	}

	require.Eventually(t, func() bool {
		rec, err := rt.Store().GetMeta(ctx, st.SessionID)
		return err == nil && rec.Status == messages.StatusFailed
	}, time.Minute, 10*time.Millisecond)
	evs, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq)
	}
	assert.Equal(t, messages.ReleaseFailed, evs[len(evs)-1].Event.ReleaseReason)
	_, err = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "again"})
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(err))

	st2, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, messages.KindTurnComplete, readKind(t, rt, "s", st2.SessionID).Kind)
}

// TestSharedHomeLeavesOtherLiveRuntimesAlone: a second process on the same
// home does not orphan the first one's live sessions (its lease is held);
// once the first is gone, the next boot does.
func TestSharedHomeLeavesOtherLiveRuntimesAlone(t *testing.T) {
	cfg := testConfig(t)
	ctx := ctxT(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt1 := newRuntime(t, cfg, sc)
	st, err := rt1.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt1, "s", st.SessionID)

	rt2 := newRuntime(t, cfg, sc)
	rec, err := rt2.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	assert.True(t, rec.Status.Live(), "a live runtime's session is not orphaned by another boot")
	_, err = rt2.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "x"})
	assert.Equal(t, messages.CodeConflict, messages.ErrorCode(err), "it is live elsewhere")
	require.NoError(t, rt2.Close(ctx))

	// the first runtime dies without releasing
	rt1.closed.Store(true)
	rt1.lease.release()
	t.Cleanup(func() { rt1.closed.Store(false) })
	rt3 := newRuntime(t, cfg, sc)
	rec, err = rt3.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusOrphaned, rec.Status)
}

func TestStartChecksTheWorkingDirectory(t *testing.T) {
	rt := newRuntime(t, testConfig(t), nil)
	ctx := ctxT(t)
	_, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: filepath.Join(t.TempDir(), "missing")})
	var e *messages.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, messages.CodeInvalid, e.Code)
	assert.Equal(t, "cwd", e.Field)
}
