package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// flakyOpen is the script backend whose first Open fails: the host reopens
// it for the next turn. It records the spec of every Open. A failing Open
// returns only once turnQueued is closed (when set).
type flakyOpen struct {
	*script.Transport
	failures   atomic.Int32
	turnQueued <-chan struct{}
	mu         sync.Mutex
	specs      []transports.SessionSpec
}

func (f *flakyOpen) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	f.mu.Unlock()
	if f.failures.Add(-1) >= 0 {
		// the first turn must be queued on the opening host when the Open
		// fails, so that the failure is its answer (a sleep of 300 ms here
		// was a hope a loaded machine could miss: the turn waits for its
		// diff baseline first, and then the host reopened for it)
		if f.turnQueued != nil {
			select {
			case <-f.turnQueued:
			case <-time.After(time.Minute): // only stops a hang
			}
		}
		return nil, errors.New("the backend would not start")
	}
	return f.Transport.Open(ctx, spec, sink)
}

func (f *flakyOpen) opened() []transports.SessionSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]transports.SessionSpec(nil), f.specs...)
}

// The host reopens its backend from a spec snapshot the session sent it, so
// a reopen racing SetPosture shares no state (on main the host called a
// closure reading the session core's record while SetPosture wrote it, which
// `go test -race` reports).
func TestHostReopensFromASpecSnapshotWithoutARace(t *testing.T) {
	cfg := testConfig(t)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("reply to {{input}}")}}}
	// the session sends the host its first turn in the flush that emits
	// turn_started, and the feed sees that event only once it is durable,
	// in a later flush: once the listener has it, the turn is in the
	// host's mailbox, ahead of the failed Open's answer
	turnQueued := make(chan struct{})
	var once sync.Once
	listener := func(_ string, ev messages.PersistedEvent) {
		if ev.Event.Type == messages.EvTurnStarted {
			once.Do(func() { close(turnQueued) })
		}
	}
	backend := &flakyOpen{Transport: script.New(script.WithScenario(sc)), turnQueued: turnQueued}
	backend.failures.Store(1)
	rt, err := New(cfg, WithBackends(transports.NewRegistry(backend)), WithEventListener(listener))
	require.NoError(t, err)
	defer rt.Close(context.Background())
	ctx := ctxT(t)

	st, err := rt.Start(ctx, "s", messages.Start{Brief: "one", Cwd: t.TempDir(), InitialPosture: messages.PostureAcceptEdits, MaxPosture: messages.PostureAcceptEdits})
	require.NoError(t, err)
	r := readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindError, r.Kind, "%+v", r)
	assert.Contains(t, r.Message, "would not start")

	// the guide makes the host reopen; posture changes race that reopen
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "two"})
		assert.NoError(t, err)
	}()
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := []messages.Posture{messages.PosturePlan, messages.PostureDefault}[i%2]
			_, err := rt.SetPosture(ctx, "s", messages.SetPosture{SessionID: st.SessionID, Posture: p})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	r = readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Contains(t, r.Text, "two")

	specs := backend.opened()
	require.Len(t, specs, 2, "opened once more after the failure")
	assert.Equal(t, messages.PostureAcceptEdits, specs[0].Posture)
	assert.Equal(t, st.SessionID, specs[1].SessionID)
	assert.True(t, specs[1].Posture == messages.PostureAcceptEdits || specs[1].Posture == messages.PosturePlan ||
		specs[1].Posture == messages.PostureDefault, "a whole snapshot: %q", specs[1].Posture)
}

// slowOpen blocks in Open until its context ends, and reports the context
// it was given.
type slowOpen struct {
	*script.Transport
	start  time.Duration // StartTimeout, when > 0
	opened chan context.Context
}

func (s *slowOpen) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	s.opened <- ctx
	<-ctx.Done()
	return nil, ctx.Err()
}

type slowOpenWithTimeout struct{ *slowOpen }

func (s slowOpenWithTimeout) StartTimeout() time.Duration { return s.start }

// Open gets no deadline shorter than the backend's own start timeout (on
// main: 4*shutdownTimeout+1min, whatever the backend needed), and a stuck
// Open ends when its session stops.
func TestOpenIsBoundedByTheBackendsStartTimeout(t *testing.T) {
	for _, withTimeout := range []bool{false, true} {
		t.Run(fmt.Sprint("startTimeout=", withTimeout), func(t *testing.T) {
			cfg := testConfig(t)
			so := &slowOpen{Transport: script.New(), start: 30 * time.Minute, opened: make(chan context.Context, 4)}
			var backend transports.Transport = so
			if withTimeout {
				backend = slowOpenWithTimeout{so}
			}
			rt, err := New(cfg, WithBackends(transports.NewRegistry(backend)))
			require.NoError(t, err)
			defer rt.Close(context.Background())
			ctx := ctxT(t)
			st, err := rt.Start(ctx, "s", messages.Start{Brief: "one", Cwd: t.TempDir()})
			require.NoError(t, err)
			var openCtx context.Context
			select {
			case openCtx = <-so.opened:
			case <-ctx.Done():
				t.Fatal("Open never called")
			}
			dl, has := openCtx.Deadline()
			if withTimeout {
				require.True(t, has)
				assert.Greater(t, time.Until(dl), 30*time.Minute, "never shorter than the backend's start timeout")
			} else {
				assert.False(t, has, "no wall clock of ours: the backend bounds its own start (deadline in %s)", time.Until(dl))
			}
			_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
			require.NoError(t, err)
			select {
			case <-openCtx.Done(): // the stopped host ended its Open
			case <-ctx.Done():
				t.Fatal("a stuck Open outlived its session")
			}
		})
	}
}
