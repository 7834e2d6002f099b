package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/session"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// Fault injection for tests: f sees every message of the registry (of each
// session) first, on that actor's goroutine, and may panic.
func withRegistryFault(f func(msg any)) Option {
	return func(o *options) { o.injectRegistry = f }
}

func withSessionFault(f func(sessionID string, msg any)) Option {
	return func(o *options) {
		o.injectSession = func(sid, actor string, msg any) {
			if actor == "session" {
				f(sid, msg)
			}
		}
	}
}

// withActorFault sees the messages of every session actor and its
// children (actor is "session" or the child's name).
func withActorFault(f func(sessionID, actor string, msg any)) Option {
	return func(o *options) { o.injectSession = f }
}

// panicOnce panics the first time armed is set and the message's type name
// is typ (unexported types of other packages are named, e.g.
// "session.persistAck").
func panicOnce(armed *atomic.Bool, typ string) func(msg any) {
	return func(msg any) {
		if fmt.Sprintf("%T", msg) == typ && armed.CompareAndSwap(true, false) {
			panic("injected fault in " + typ)
		}
	}
}

// slowTurns is a scenario whose every turn runs for a minute: a reader
// waits on it until something else answers.
func slowTurns() *script.Scenario {
	return &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Delay(time.Minute), script.Text("late")}}}
}

// A reader waiting on a session whose actor panics gets a typed failed error
// naming the cause at once, not at its deadline (on main it waited its full
// timeout: the registry never answered it).
func TestSessionPanicAnswersTheWaitingReader(t *testing.T) {
	cfg := testConfig(t)
	var armed atomic.Bool
	listener := func(sid string, ev messages.PersistedEvent) {
		if ev.Event.Type == messages.EvGuidance && ev.Event.Text == "boom" && armed.CompareAndSwap(true, false) {
			panic("listener bug")
		}
	}
	readerIn := make(chan struct{}, 1)
	seen := func(_ string, msg any) {
		if _, ok := msg.(session.OpReadTurn); ok {
			readerIn <- struct{}{}
		}
	}
	rt := newRuntime(t, cfg, slowTurns(), WithEventListener(listener), withSessionFault(seen))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)

	// the reader's own deadline is far beyond the test's: only an answer
	// from the runtime ends it in time
	readerCtx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := rt.ReadTurn(readerCtx, "s", messages.ReadTurn{SessionID: st.SessionID})
		got <- err
	}()
	select {
	case <-readerIn: // the reader is waiting in the session
	case <-ctx.Done():
		t.Fatal("the read never reached the session")
	}

	armed.Store(true)
	_, _ = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "boom"})
	select {
	case err := <-got:
		require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "%v", err)
		assert.Contains(t, err.Error(), "listener bug", "the error names the cause")
	case <-ctx.Done():
		t.Fatal("the waiting reader was stranded by the session's panic")
	}
	require.Eventually(t, func() bool {
		rec, err := rt.Store().GetMeta(ctx, st.SessionID)
		return err == nil && rec.Status == messages.StatusFailed
	}, time.Minute, 10*time.Millisecond)
}

// A start whose session panics before its record is durable is answered
// failed, naming the cause.
func TestSessionPanicAnswersTheWaitingStart(t *testing.T) {
	cfg := testConfig(t)
	var armed atomic.Bool
	armed.Store(true)
	inj := panicOnce(&armed, "session.persistAck")
	rt := newRuntime(t, cfg, slowTurns(), withSessionFault(func(_ string, msg any) { inj(msg) }))
	ctx := ctxT(t)
	_, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "%v", err)
	assert.Contains(t, err.Error(), "injected fault")

	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err, "the runtime goes on serving")
	assert.NotEmpty(t, st.SessionID)
}

// A stop waiting for its release when the session panics is answered
// failed, and the record ends failed with a gapless log.
func TestSessionPanicAnswersTheWaitingStop(t *testing.T) {
	cfg := testConfig(t)
	var armed atomic.Bool
	inj := panicOnce(&armed, "session.childrenStopped")
	rt := newRuntime(t, cfg, slowTurns(), withSessionFault(func(_ string, msg any) { inj(msg) }))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	armed.Store(true)
	_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "%v", err)
	assert.Contains(t, err.Error(), "injected fault")

	require.Eventually(t, func() bool {
		rec, err := rt.Store().GetMeta(ctx, st.SessionID)
		return err == nil && rec.Status == messages.StatusFailed
	}, time.Minute, 10*time.Millisecond)
	evs, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq, "gapless")
	}
	// stop stays idempotent
	again, err := rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	assert.True(t, again.AlreadyStopped)
	assert.Equal(t, messages.OutcomeFailed, again.Outcome)
}

// After a registry panic every op fails fast with a typed error, including
// the op the registry panicked on, and Close still finishes and orphans the
// live session's record (on main every op, and Close, waited forever).
func TestRegistryPanicFailsEveryOpFast(t *testing.T) {
	cfg := testConfig(t)
	var armed atomic.Bool
	rt := newRuntime(t, cfg, slowTurns(), withRegistryFault(panicOnce(&armed, "actors.regOp")))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)

	armed.Store(true)
	bg := context.Background() // no deadline: only an answer ends these
	_, err = rt.Guide(bg, "s", messages.Guide{SessionID: st.SessionID, Text: "x"})
	require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "the op the registry panicked on: %v", err)
	assert.Contains(t, err.Error(), "injected fault")

	_, err = rt.ReadTurn(bg, "s", messages.ReadTurn{SessionID: st.SessionID})
	require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "%v", err)
	_, err = rt.Start(bg, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "%v", err)
	_, err = rt.Resume(bg, "s", messages.Resume{SessionID: st.SessionID})
	require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "%v", err)
	_, err = rt.LiveSessions(bg)
	require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "%v", err)
	require.Error(t, rt.SetScopeConstraints(bg, "s", messages.ScopeConstraints{}))

	closeCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = rt.Close(closeCtx)
	require.False(t, messages.IsCode(err, messages.CodeTimeout), "Close finished: %v", err)
	fs, err := filestore.Open(cfg.Home) // the runtime closed its own
	require.NoError(t, err)
	defer fs.Close()
	rec, err := fs.GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusOrphaned, rec.Status, "the session the registry could not release is orphaned")
}

// A read-turn result that reaches a caller whose context has ended (the
// long-poll client hung up as it arrived) is not consumed: the next read
// gets it. On main the gone caller consumed it and the next read waited
// for a turn that never came.
func TestReadResultOfAGoneCallerGoesBackToTheQueue(t *testing.T) {
	cfg := testConfig(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("only result")}}}
	var cancelFirst atomic.Pointer[context.CancelFunc]
	// the first read is cancelled by its caller just as the session takes it
	hangUp := func(_ string, msg any) {
		if _, ok := msg.(session.OpReadTurn); ok {
			if c := cancelFirst.Swap(nil); c != nil {
				(*c)()
			}
		}
	}
	rt := newRuntime(t, cfg, sc, withSessionFault(hangUp))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	// the turn's result is durable and queued before the first read
	require.Eventually(t, func() bool {
		evs, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.Event.Type == messages.EvTurnDiff {
				return true
			}
		}
		return false
	}, time.Minute, 10*time.Millisecond)
	// an op is answered once its own event is durable in the session: by
	// then so is the turn's result, which the next reader gets at once
	_, err = rt.SetPosture(ctx, "s", messages.SetPosture{SessionID: st.SessionID, Posture: messages.PosturePlan})
	require.NoError(t, err)

	first, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelFirst.Store(&cancel)
	_, err = rt.ReadTurn(first, "s", messages.ReadTurn{SessionID: st.SessionID})
	require.Equal(t, messages.CodeTimeout, messages.ErrorCode(err), "the gone caller gets its context's error: %v", err)

	next, cancelNext := context.WithTimeout(ctx, time.Minute) // only stops a hang
	defer cancelNext()
	r, err := rt.ReadTurn(next, "s", messages.ReadTurn{SessionID: st.SessionID})
	require.NoError(t, err, "the result was lost with the gone caller")
	assert.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Contains(t, r.Text, "only result")
}

// A session that panics as it starts (before its core exists) still
// answers its start, failed.
func TestSessionPanicInStartedAnswersTheStart(t *testing.T) {
	cfg := testConfig(t)
	var armed atomic.Bool
	armed.Store(true)
	rt := newRuntime(t, cfg, slowTurns(), withSessionFault(func(_ string, msg any) {
		if fmt.Sprintf("%T", msg) == "actor.Started" && armed.CompareAndSwap(true, false) {
			panic("injected fault in Started")
		}
	}))
	ctx := ctxT(t)
	_, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.Equal(t, messages.CodeFailed, messages.ErrorCode(err), "%v", err)
	assert.Contains(t, err.Error(), "injected fault in Started")
}

// A result that its caller could not pass on (ReadTurnTo's deliver failed:
// the control plane's client hung up mid-answer) goes back to the session
// for the next read; one that was passed on is consumed.
func TestReadResultNotPassedOnGoesBackToTheQueue(t *testing.T) {
	cfg := testConfig(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("only result")}}}
	rt := newRuntime(t, cfg, sc)
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	read := messages.ReadTurn{SessionID: st.SessionID}

	gone := errors.New("the client is gone")
	var got []messages.TurnResult
	err = rt.ReadTurnTo(ctx, "s", read, func(r messages.TurnResult) error {
		got = append(got, r)
		return gone
	})
	require.ErrorIs(t, err, gone, "the deliver error is the read's")
	require.Len(t, got, 1)

	err = rt.ReadTurnTo(ctx, "s", read, func(r messages.TurnResult) error {
		got = append(got, r)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, got[0], got[1], "the result not passed on is read again")
	assert.Equal(t, messages.KindTurnComplete, got[1].Kind)
	assert.Contains(t, got[1].Text, "only result")

	// passed on: consumed; the session holds nothing more until a turn
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = rt.ReadTurn(short, "s", read)
	assert.Equal(t, messages.CodeTimeout, messages.ErrorCode(err), "a delivered result is consumed: %v", err)
}
