package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// lifeStep is one input to the core's release protocol and what must come
// out of it.
type lifeStep struct {
	do   string // begin, begin-shutdown, children, persist, persisted-all, deadline, create-failed, created
	life Lifecycle
	effs []LifeEffect
}

func (h *harness) lifeInput(do string) {
	h.t.Helper()
	switch do {
	case "created":
		h.c.Created(h.tick())
	case "begin":
		h.c.BeginRelease(h.tick(), messages.ReleaseExplicit, "", "", "")
	case "begin-shutdown":
		h.c.BeginRelease(h.tick(), messages.ReleaseShutdown, "", "", "")
	case "children":
		h.c.ChildrenStopped(h.tick())
	case "persisted-all":
		h.c.Persisted(h.tick(), h.c.LastSeq(), nil)
	case "persist":
		h.c.PersistStopped()
	case "deadline":
		h.c.ReleaseDeadline()
	case "create-failed":
		h.c.CreateFailed()
	default:
		h.t.Fatalf("unknown input %q", do)
	}
}

// TestLifecycleTable: the session's end, decided in the core: each input
// moves the lifecycle only from the state it belongs to, and the effects
// come in the one safe order (workers stop, released is durable, persist
// stops, then the registry is told). An input out of turn changes nothing.
func TestLifecycleTable(t *testing.T) {
	cases := []struct {
		name  string
		steps []lifeStep
		// abandoned: the release was given up on (never reported released)
		abandoned bool
	}{
		{name: "release", steps: []lifeStep{
			{do: "created", life: LifeRunning},
			{do: "persist", life: LifeRunning},  // out of turn
			{do: "children", life: LifeRunning}, // out of turn
			{do: "begin", life: LifeStoppingChildren, effs: []LifeEffect{StopWorkers}},
			{do: "begin", life: LifeStoppingChildren},         // idempotent
			{do: "persisted-all", life: LifeStoppingChildren}, // released is not emitted yet
			{do: "persist", life: LifeStoppingChildren},       // out of turn
			{do: "children", life: LifePersistingReleased},    // released emitted, not durable
			{do: "persist", life: LifePersistingReleased},     // out of turn
			{do: "persisted-all", life: LifeStoppingPersist, effs: []LifeEffect{StopPersist}},
			{do: "deadline", life: LifeStoppingPersist}, // too late to abandon
			{do: "persist", life: LifeDone, effs: []LifeEffect{ReportDone}},
			{do: "persist", life: LifeDone},
			{do: "begin", life: LifeDone},
		}},
		{name: "shutdown deadline while persisting released", abandoned: true, steps: []lifeStep{
			{do: "created", life: LifeRunning},
			{do: "begin-shutdown", life: LifeStoppingChildren, effs: []LifeEffect{StopWorkers}},
			{do: "children", life: LifePersistingReleased},
			{do: "deadline", life: LifeStoppingPersist, effs: []LifeEffect{StopPersist}},
			{do: "persisted-all", life: LifeStoppingPersist}, // no second stop
			{do: "persist", life: LifeDone, effs: []LifeEffect{ReportDone}},
		}},
		{name: "shutdown deadline while children stop", abandoned: true, steps: []lifeStep{
			{do: "created", life: LifeRunning},
			{do: "begin-shutdown", life: LifeStoppingChildren, effs: []LifeEffect{StopWorkers}},
			{do: "deadline", life: LifeStoppingPersist, effs: []LifeEffect{StopPersist}},
			{do: "children", life: LifeStoppingPersist}, // released is never emitted
			{do: "persist", life: LifeDone, effs: []LifeEffect{ReportDone}},
		}},
		{name: "create failed", steps: []lifeStep{
			{do: "deadline", life: LifeRunning},
			{do: "create-failed", life: LifeStoppingPersist, effs: []LifeEffect{StopEverything}},
			{do: "create-failed", life: LifeStoppingPersist},
			{do: "persist", life: LifeDone, effs: []LifeEffect{ReportDone}},
		}},
		{name: "a created session cannot fail its create", steps: []lifeStep{
			{do: "created", life: LifeRunning},
			{do: "create-failed", life: LifeRunning},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			require.Equal(t, LifeRunning, h.c.Life())
			for i, st := range tc.steps {
				h.lifeInput(st.do)
				out := h.drain()
				require.Equal(t, st.life, h.c.Life(), "step %d (%s): lifecycle", i, st.do)
				require.Equal(t, st.effs, out.Life, "step %d (%s): effects", i, st.do)
			}
			assert.Equal(t, tc.abandoned, h.c.ReleaseAbandoned())
		})
	}
}

// The released event is the last of the log, and comes only once the
// workers are stopped.
func TestReleasedIsEmittedOnlyOnceChildrenStopped(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	h.c.BeginRelease(h.tick(), messages.ReleaseExplicit, "", "", "")
	for _, ev := range h.drain().Events {
		require.NotEqual(t, messages.EvReleased, ev.Event.Type, "released before the workers stopped")
	}
	h.c.ChildAbandoned(h.tick(), ChildTransport, "abandoned") // still written: it precedes released
	h.c.ChildrenStopped(h.tick())
	evs := h.drain().Events
	require.NotEmpty(t, evs)
	assert.Equal(t, messages.EvReleased, evs[len(evs)-1].Event.Type)
	h.c.ChildAbandoned(h.tick(), ChildPersist, "too late")
	assert.Empty(t, h.drain().Events, "nothing after released")
}

func TestLifecycleStrings(t *testing.T) {
	for l := LifeRunning; l <= LifeDone; l++ {
		assert.NotEqual(t, "invalid", l.String())
	}
	assert.Equal(t, "invalid", lifeInvalid.String())
	for e := StopWorkers; e <= ReportDone; e++ {
		assert.NotEqual(t, "invalid", e.String())
	}
	assert.Equal(t, "invalid", lifeEffectInvalid.String())
}
