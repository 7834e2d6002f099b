package actors

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// writeCalls records which events each store write carried.
type writeCalls struct {
	store.Store
	mu    sync.Mutex
	calls [][]messages.EventType
}

func (w *writeCalls) note(evs []messages.PersistedEvent) {
	var ts []messages.EventType
	for _, e := range evs {
		ts = append(ts, e.Event.Type)
	}
	w.mu.Lock()
	w.calls = append(w.calls, ts)
	w.mu.Unlock()
}

func (w *writeCalls) Append(ctx context.Context, sid string, evs []messages.PersistedEvent) error {
	w.note(evs)
	return w.Store.Append(ctx, sid, evs)
}

func (w *writeCalls) AppendRecord(ctx context.Context, sid string, evs []messages.PersistedEvent, rec messages.SessionRecord) error {
	w.note(evs)
	return w.Store.AppendRecord(ctx, sid, evs, rec)
}

// TestStreamedOutputSharesItsTurnsWrite: a turn's output that comes in
// bursts while nothing is being written goes to the store with the turn's
// end, one durable write, not one per burst (on the old code each text
// below was its own write: three group commits more per turn, the last
// often still in flight when the turn ended, which the result waited for).
func TestStreamedOutputSharesItsTurnsWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &writeCalls{Store: store.NewMemory()}
		var steps []script.Step
		for _, s := range []string{"a", "b", "c"} {
			steps = append(steps, script.Delay(100*time.Microsecond), script.Text(s))
		}
		sc := &script.Scenario{Fallback: &script.Turn{Steps: steps}}
		rt, err := New(testConfig(t), WithStore(w), WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc)))))
		require.NoError(t, err)
		ctx := context.Background()
		st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
		require.NoError(t, err)
		r, err := rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: st.SessionID})
		require.NoError(t, err)
		require.Equal(t, messages.KindTurnComplete, r.Kind)
		_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
		require.NoError(t, err)
		requireWholeLog(t, w.Store, st.SessionID, messages.ReleaseExplicit)
		w.mu.Lock()
		calls := w.calls
		w.mu.Unlock()
		writes := 0
		for _, c := range calls {
			if slices.Contains(c, messages.EvText) {
				writes++
				assert.Contains(t, c, messages.EvTurnEnd, "a text written before its turn's end: %v", calls)
			}
		}
		assert.Equal(t, 1, writes, "the turn's texts went in one write: %v", calls)
		require.NoError(t, rt.Close(ctx))
	})
}

// TestHeldOutputReachesTheFeedWhileTheTurnIsSilent: streamed output is held
// only briefly: a turn that talks, then works silently for a minute, has
// its text durable and on the feed long before the minute is over.
func TestHeldOutputReachesTheFeedWhileTheTurnIsSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		var mu sync.Mutex
		var textSeen time.Time
		var early bool
		listener := func(sid string, ev messages.PersistedEvent) {
			mu.Lock()
			defer mu.Unlock()
			if ev.Event.Type == messages.EvText && ev.Event.Text == "thinking aloud" && textSeen.IsZero() {
				textSeen = time.Now()
				last, err := mem.LastSeq(context.Background(), sid)
				early = err != nil || last < ev.Seq
			}
		}
		sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{
			script.Delay(time.Millisecond), script.Text("thinking aloud"), script.Delay(time.Minute), script.Text("done")}}}
		rt, err := New(testConfig(t), WithStore(mem), WithEventListener(listener),
			WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc)))))
		require.NoError(t, err)
		ctx := context.Background()
		t0 := time.Now()
		st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
		require.NoError(t, err)
		r, err := rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: st.SessionID})
		require.NoError(t, err)
		require.Equal(t, messages.KindTurnComplete, r.Kind)
		mu.Lock()
		seen, wasEarly := textSeen, early
		mu.Unlock()
		require.False(t, seen.IsZero(), "the feed saw the text")
		assert.False(t, wasEarly, "the feed saw the text before the store had it")
		assert.Less(t, seen.Sub(t0), time.Second, "held for the silent minute")
		require.NoError(t, rt.Close(ctx))
	})
}
