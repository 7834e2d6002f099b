package actors

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// TestLifetimeReleaseInVirtualTime: a session whose lifetime elapses is
// released with reason lifetime. The lifetime is hours; under synctest the
// test takes milliseconds of real time.
func TestLifetimeReleaseInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		cfg.SessionLifetime = config.Duration(3 * time.Hour)
		mem := store.NewMemory()
		sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("ok")}}}
		rt, err := New(cfg, WithStore(mem), WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc)))))
		require.NoError(t, err)
		ctx := context.Background()
		start := time.Now()
		st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
		require.NoError(t, err)
		r, err := rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: st.SessionID})
		require.NoError(t, err)
		require.Equal(t, messages.KindTurnComplete, r.Kind)

		time.Sleep(2 * time.Hour)
		synctest.Wait()
		live, err := rt.LiveSessions(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{st.SessionID}, live, "still live before its lifetime")

		// a reader waiting when the lifetime ends is told the session is gone
		readErr := make(chan error, 1)
		go func() {
			_, err := rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: st.SessionID})
			readErr <- err
		}()
		time.Sleep(time.Hour + time.Second)
		synctest.Wait()
		assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(<-readErr))
		live, err = rt.LiveSessions(ctx)
		require.NoError(t, err)
		assert.Empty(t, live)
		evs, err := mem.ReadEvents(ctx, st.SessionID, 0, 0)
		require.NoError(t, err)
		last := evs[len(evs)-1]
		assert.Equal(t, messages.EvReleased, last.Event.Type)
		assert.Equal(t, messages.ReleaseLifetime, last.Event.ReleaseReason)
		assert.Equal(t, 3*time.Hour, last.At.Sub(start).Truncate(time.Hour), "released at its lifetime, in virtual time")
		require.NoError(t, rt.Close(ctx))
	})
}

// TestStallWarningInVirtualTime: a running turn with no output for
// StallAfter gets one "stalled" warning event, derived from the protocol's
// silence, not from any screen.
func TestStallWarningInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		cfg.StallAfter = config.Duration(5 * time.Minute)
		mem := store.NewMemory()
		sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("thinking"), script.Delay(12 * time.Minute), script.Text("done")}}}
		rt, err := New(cfg, WithStore(mem), WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc)))))
		require.NoError(t, err)
		ctx := context.Background()
		st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
		require.NoError(t, err)
		r, err := rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: st.SessionID})
		require.NoError(t, err)
		require.Equal(t, messages.KindTurnComplete, r.Kind)
		evs, err := mem.ReadEvents(ctx, st.SessionID, 0, 0)
		require.NoError(t, err)
		var stalls int
		for _, e := range evs {
			if e.Event.Type == messages.EvWarning && strings.HasPrefix(e.Event.Text, "stalled") {
				stalls++
			}
		}
		assert.Equal(t, 1, stalls, "one warning per silence, none after the turn ended")
		require.NoError(t, rt.Close(ctx))
	})
}
