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

// TestOutputReArmsTheStallTimer: a turn that keeps talking, each silence
// shorter than StallAfter, is never called stalled however long it runs:
// every sign of life re-arms the timer (without the re-arm, this turn is
// called stalled StallAfter after its start).
func TestOutputReArmsTheStallTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		cfg.StallAfter = config.Duration(5 * time.Minute)
		mem := store.NewMemory()
		var steps []script.Step
		for i := 0; i < 4; i++ {
			steps = append(steps, script.Text("still working"), script.Delay(4*time.Minute))
		}
		sc := &script.Scenario{Fallback: &script.Turn{Steps: append(steps, script.Text("done"))}}
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
		require.Greater(t, evs[len(evs)-1].At.Sub(evs[0].At), 15*time.Minute, "the turn ran for 16 virtual minutes")
		for _, e := range evs {
			assert.False(t, e.Event.Type == messages.EvWarning && strings.HasPrefix(e.Event.Text, "stalled"), "called stalled: %+v", e)
		}
		require.NoError(t, rt.Close(ctx))
	})
}
