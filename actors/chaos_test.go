package actors

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// chaos injects panics at random messages of the registry, the sessions and
// their transport hosts, diff capture and persist children. Lifecycle
// messages (Initialized, Started, Stopped) are spared: a panic there is
// covered by the supervise package's own tests.
type chaos struct {
	mu       sync.Mutex
	rng      *rand.Rand
	perMille int
	panics   map[string]int
	registry atomic.Bool // allowed to panic the registry (once)
}

func (ch *chaos) maybe(who string, msg any) {
	switch msg.(type) {
	case actor.Initialized, actor.Started, actor.Stopped:
		return
	}
	ch.mu.Lock()
	hit := ch.rng.IntN(1000) < ch.perMille
	if hit {
		ch.panics[who]++
	}
	ch.mu.Unlock()
	if hit {
		panic(fmt.Sprintf("chaos in %s at %T", who, msg))
	}
}

// TestChaos: 1,000 ops from 8 concurrent callers while panics hit the
// registry, sessions, hosts, diff capture and persist at random messages.
// Every op answers, ok or with a typed error, before its deadline; after
// Close and a reboot on the same store every record is final or orphaned
// and every log gapless; the bubble ends with no goroutine left (synctest
// fails a test whose goroutines outlive it; goleak checks the rest).
func TestChaos(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		fastSupervision(&cfg)
		mem := store.NewMemory()
		first := keepOpen{mem} // the reboot below reads the same memory
		ch := &chaos{rng: rand.New(rand.NewPCG(11, 2026)), perMille: 4, panics: map[string]int{}}
		sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{
			script.Text("working"), script.Delay(2 * time.Second), script.Text("done with {{input}}")}}}
		backends := func() Option { return WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc)))) }
		rt, err := New(cfg, WithStore(first), backends(),
			withRegistryFault(func(msg any) {
				if ch.registry.Load() {
					if _, ok := msg.(regOp); ok && ch.registry.CompareAndSwap(true, false) {
						ch.mu.Lock()
						ch.panics["registry"]++
						ch.mu.Unlock()
						panic("chaos in the registry")
					}
				}
			}),
			withActorFault(func(_ string, who string, msg any) { ch.maybe(who, msg) }))
		require.NoError(t, err)

		const callers, opsTotal = 8, 1000
		var done atomic.Int32
		var okOps, errOps atomic.Int32
		codes := sync.Map{}
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), 7))
				scope := fmt.Sprintf("scope-%d", i%3)
				var sids []string
				for {
					n := done.Add(1)
					if n > opsTotal {
						return
					}
					if n == opsTotal*9/10 {
						ch.registry.Store(true) // late: a registry panic ends the run fail-fast
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					err := chaosOp(ctx, rt, rng, scope, &sids, t.TempDir)
					if ctx.Err() != nil {
						t.Errorf("an op waited out its deadline: %v", err)
					}
					cancel()
					if err == nil {
						okOps.Add(1)
						continue
					}
					errOps.Add(1)
					var me *messages.Error
					if !errors.As(err, &me) || !me.Code.Valid() {
						t.Errorf("an untyped error: %v", err)
						continue
					}
					v, _ := codes.LoadOrStore(me.Code, new(atomic.Int32))
					v.(*atomic.Int32).Add(1)
				}
			}()
		}
		wg.Wait()
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		err = rt.Close(closeCtx)
		require.False(t, messages.IsCode(err, messages.CodeTimeout), "Close finished: %v", err)

		// a reboot on the same store sweeps what the first run could not release
		rt2, err := New(cfg, WithStore(mem), backends())
		require.NoError(t, err)
		ctx := context.Background()
		recs, err := mem.List(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, recs)
		for _, rec := range recs {
			assert.False(t, rec.Status.Live(), "record %s is %s after the reboot", rec.SessionID, rec.Status)
			evs, err := mem.ReadEvents(ctx, rec.SessionID, 0, 0)
			require.NoError(t, err)
			for i, e := range evs {
				require.Equal(t, uint64(i+1), e.Seq, "log of %s is gapless", rec.SessionID)
			}
		}
		require.NoError(t, rt2.Close(ctx))

		ch.mu.Lock()
		t.Logf("ops: %d ok, %d typed errors; panics injected: %v; sessions: %d", okOps.Load(), errOps.Load(), ch.panics, len(recs))
		ch.mu.Unlock()
		codes.Range(func(k, v any) bool {
			t.Logf("  %s: %d", k, v.(*atomic.Int32).Load())
			return true
		})
		assert.Equal(t, int32(opsTotal), okOps.Load()+errOps.Load(), "every op answered")
		var injected int
		for _, n := range ch.panics {
			injected += n
		}
		assert.Positive(t, injected, "chaos happened")
	})
}

// chaosOp runs one random op of a caller on one of its sessions (starting
// one when it has none).
func chaosOp(ctx context.Context, rt *Runtime, rng *rand.Rand, scope string, sids *[]string, tempDir func() string) error {
	if len(*sids) == 0 || rng.IntN(10) == 0 {
		st, err := rt.Start(ctx, scope, messages.Start{Brief: "chaos", Cwd: tempDir()})
		if err == nil {
			*sids = append(*sids, st.SessionID)
		}
		return err
	}
	sid := (*sids)[rng.IntN(len(*sids))]
	switch rng.IntN(7) {
	case 0, 1:
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := rt.ReadTurn(rctx, scope, messages.ReadTurn{SessionID: sid})
		if messages.IsCode(err, messages.CodeTimeout) && ctx.Err() == nil {
			return nil // the read's own short deadline: not a stranded caller
		}
		return err
	case 2:
		_, err := rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "more"})
		return err
	case 3:
		p := []messages.Posture{messages.PosturePlan, messages.PostureDefault}[rng.IntN(2)]
		_, err := rt.SetPosture(ctx, scope, messages.SetPosture{SessionID: sid, Posture: p})
		return err
	case 4:
		_, err := rt.Interrupt(ctx, scope, messages.Interrupt{SessionID: sid})
		return err
	case 5:
		_, err := rt.Stop(ctx, scope, messages.Stop{SessionID: sid})
		return err
	default:
		_, err := rt.Resume(ctx, scope, messages.Resume{SessionID: sid})
		return err
	}
}

// keepOpen is a store whose Close leaves it open, for a reboot on it.
type keepOpen struct{ store.Store }

func (keepOpen) Close() error { return nil }
