package actors

import (
	"bytes"
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// Tests of issue 10's bullets that need a whole runtime on a real file
// store: repair that keeps what is intact (resume refuses a corrupt log or
// record with the reason), Close's ordering, and a persist writer that
// keeps failing longer than any restart window.

// stoppedSessionOnDisk runs one session through a turn and a stop on a
// file store under home, closes the runtime and returns the session's id.
func stoppedSessionOnDisk(t *testing.T, home string) string {
	t.Helper()
	cfg := testConfig(t)
	cfg.Home = home
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("a"), script.Text("b"), script.Text("c")}}}
	rt := newRuntime(t, cfg, sc)
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)
	_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	require.NoError(t, rt.Close(ctx))
	return st.SessionID
}

// TestResumeRefusesACorruptLog: a log with a corrupt middle line is
// reported (corrupt on read) and resume is refused with that reason; the
// file is never appended to or cut.
func TestResumeRefusesACorruptLog(t *testing.T) {
	home := t.TempDir()
	sid := stoppedSessionOnDisk(t, home)
	path := filestore.EventsPath(home, sid)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	require.Greater(t, len(lines), 4)
	lines[2] = []byte("{not json\n")
	corrupted := bytes.Join(lines, nil)
	require.NoError(t, os.WriteFile(path, corrupted, 0o600))

	cfg := testConfig(t)
	cfg.Home = home
	rt := newRuntime(t, cfg, &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("x")}}})
	ctx := ctxT(t)
	_, err = rt.Store().ReadEvents(ctx, sid, 0, 0)
	assert.Equal(t, messages.CodeCorrupt, messages.ErrorCode(err), "%v", err)
	_, err = rt.Resume(ctx, "s", messages.Resume{SessionID: sid})
	require.Equal(t, messages.CodeCorrupt, messages.ErrorCode(err), "%v", err)
	assert.Contains(t, err.Error(), "line 3")
	require.NoError(t, rt.Close(ctx))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, corrupted, after, "the corrupt log was neither appended to nor cut")
}

// TestResumeOfAGarbageRecordIsCorrupt: a meta.json that does not parse is
// corrupt for resume as for a read (it used to be not_found on resume).
func TestResumeOfAGarbageRecordIsCorrupt(t *testing.T) {
	home := t.TempDir()
	sid := stoppedSessionOnDisk(t, home)
	require.NoError(t, os.WriteFile(filestore.MetaPath(home, sid), []byte(`{"sessionId": "cs_`), 0o600))
	cfg := testConfig(t)
	cfg.Home = home
	rt := newRuntime(t, cfg, &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("x")}}})
	ctx := ctxT(t)
	_, err := rt.Store().GetMeta(ctx, sid)
	assert.Equal(t, messages.CodeCorrupt, messages.ErrorCode(err), "%v", err)
	_, err = rt.Resume(ctx, "s", messages.Resume{SessionID: sid})
	assert.Equal(t, messages.CodeCorrupt, messages.ErrorCode(err), "%v", err)
}

// TestSecondCloseWaitsForTheFirst: a Close that comes while the first is
// still shutting a slow session down returns only once the store is closed;
// the lease is held while sessions run and the store closes, and given up
// last.
func TestSecondCloseWaitsForTheFirst(t *testing.T) {
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	cfg := testConfig(t)
	rt := newRuntime(t, cfg, sc, WithStore(faulty))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)
	var storeClosed, leaseLost atomic.Bool
	faulty.SetFailure(func(op, _ string) error {
		if !leaseHeld(cfg.Home, rt.id) {
			leaseLost.Store(true)
		}
		switch op {
		case store.OpAppend, store.OpPutMeta:
			time.Sleep(300 * time.Millisecond) // the release takes a while
		case store.OpClose:
			storeClosed.Store(true)
		}
		return nil
	})
	first := make(chan error, 1)
	go func() { first <- rt.Close(context.Background()) }()
	require.Eventually(t, func() bool { return rt.closed.Load() }, time.Minute, time.Millisecond, "the first Close began")
	require.NoError(t, rt.Close(context.Background()))
	assert.True(t, storeClosed.Load(), "the second Close returned before the shutdown closed the store")
	require.NoError(t, <-first)
	assert.False(t, leaseLost.Load(), "the lease was given up while the session or the store still worked")
	assert.False(t, leaseHeld(cfg.Home, rt.id), "the lease is given up once the store is closed")
}

// TestStopWaitsForTheFinalRecord: the store refuses every Append (a panic
// inside it, or a full disk) for longer than any supervision window while
// a session stops (the persist child used to exceed its restarts, after
// which release could not reach it and the record stayed idle). Once the
// store works again, stop's answer means released is durable and the
// record is ended, not left idle: the final record rides in the request
// whose Append failed, and must be written again with the retry.
func TestStopWaitsForTheFinalRecord(t *testing.T) {
	faults := []struct {
		name string
		arm  func(f *store.Faulty, n int)
	}{
		{"panic", (*store.Faulty).PanicAppends},
		{"no space", (*store.Faulty).NoSpace},
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) {
			cfg := testConfig(t)
			fastSupervision(&cfg)
			faulty := store.NewFaulty(store.NewMemory())
			sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("a"), script.Text("ok")}}}
			rt := newRuntime(t, cfg, sc, WithStore(faulty), WithPersistLimits(0, 1<<30))
			ctx := ctxT(t)
			st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
			require.NoError(t, err)
			readKind(t, rt, "s", st.SessionID)
			fault.arm(faulty, 1<<20)
			stopped := make(chan error, 1)
			go func() {
				_, err := rt.Stop(context.Background(), "s", messages.Stop{SessionID: st.SessionID})
				stopped <- err
			}()
			// retries back off from 50 ms: several failures, more than MaxRestarts
			time.Sleep(3 * time.Second)
			select {
			case err := <-stopped:
				t.Fatalf("stop answered while released could not be stored: %v", err)
			default:
			}
			fault.arm(faulty, 0)
			select {
			case err := <-stopped:
				require.NoError(t, err)
			case <-time.After(2 * time.Minute): // only stops a hang
				t.Fatal("stop never answered after the store recovered")
			}
			rec, err := faulty.Inner().GetMeta(ctx, st.SessionID)
			require.NoError(t, err)
			assert.Equal(t, messages.StatusEnded, rec.Status, "stop answered ok: the record is final")
			requireWholeLog(t, faulty.Inner(), st.SessionID, messages.ReleaseExplicit)
		})
	}
}

// TestFullDiskOpsSayUnavailableWithTheCause: while the disk stays full (and
// the session has not given up), ops answer a typed, retryable unavailable
// error that names the cause; once there is room, the same op succeeds and
// nothing held was lost.
func TestFullDiskOpsSayUnavailableWithTheCause(t *testing.T) {
	faulty := store.NewFaulty(store.NewMemory())
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
	rt := newRuntime(t, testConfig(t), sc, WithStore(faulty), WithPersistLimits(0, 1<<30))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)
	faulty.NoSpace(1 << 30)
	guided := make(chan error, 1)
	go func() {
		_, err := rt.Guide(context.Background(), "s", messages.Guide{SessionID: st.SessionID, Text: "more"})
		guided <- err
	}()
	var rerr error
	require.Eventually(t, func() bool {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, rerr = rt.ReadTurn(short, "s", messages.ReadTurn{SessionID: st.SessionID})
		return messages.IsCode(rerr, messages.CodeUnavailable)
	}, time.Minute, 20*time.Millisecond, "read-turn never said unavailable: %v", rerr)
	var e *messages.Error
	require.ErrorAs(t, rerr, &e)
	assert.True(t, e.Retryable)
	assert.Contains(t, e.Message, "no space left on device", "the cause is named")
	faulty.NoSpace(0)
	require.NoError(t, <-guided, "the guide's events are durable once there is room")
	r, err := rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: st.SessionID})
	require.NoError(t, err)
	assert.Equal(t, messages.KindTurnComplete, r.Kind)
}
