package session

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// TestHandedOutEventsAreNeverOverwritten: the events of a Drain, its
// Durable and an Unpersisted view stay as they were handed out while the
// core goes on emitting, acknowledging and draining (they are shared with
// the shell and the persist child, not copied), even when the shell
// appends to them; an event acknowledged before a Drain saw it is still
// in that Drain's Events.
func TestHandedOutEventsAreNeverOverwritten(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	text := func(i int) messages.Event { return messages.Event{Type: messages.EvText, Text: fmt.Sprint("t", i)} }

	first := h.agent(1, text(0)).Events
	pending := h.c.Unpersisted(0)
	firstWas, pendingWas := slices.Clone(first), slices.Clone(pending)
	var durable [][]messages.PersistedEvent
	var durableWas [][]messages.PersistedEvent
	for i := 1; i < 40; i++ {
		h.c.AgentEvent(h.tick(), 1, text(i))
		if i%3 == 0 {
			h.c.Persisted(h.tick(), h.c.LastSeq()-1, nil)
		}
		o := h.drain()
		require.Len(t, o.Events, 1, "event %d", i)
		assert.Equal(t, text(i), o.Events[0].Event)
		if len(o.Durable) > 0 {
			durable = append(durable, o.Durable)
			durableWas = append(durableWas, slices.Clone(o.Durable))
		}
		// the shell merging outputs appends to what it was handed
		merged := append(first, o.Events...)
		merged[len(merged)-1].Event.Text = "changed by the shell's copy"
	}
	assert.Equal(t, firstWas, first, "a Drain's events")
	assert.Equal(t, pendingWas, pending, "an Unpersisted view")
	assert.Equal(t, durableWas, durable, "a Drain's durable events")
	for _, ev := range h.c.Unpersisted(0) {
		assert.NotEqual(t, "changed by the shell's copy", ev.Event.Text)
	}

	// acknowledged before drained: still this Drain's event, and durable
	h.c.AgentEvent(h.tick(), 1, text(40))
	h.c.AgentEvent(h.tick(), 1, text(41))
	h.c.Persisted(h.tick(), h.c.LastSeq()-1, nil)
	o := h.drain()
	require.Len(t, o.Events, 2)
	assert.Equal(t, []messages.Event{text(40), text(41)}, []messages.Event{o.Events[0].Event, o.Events[1].Event})
	assert.Equal(t, h.c.LastSeq()-1, o.Durable[len(o.Durable)-1].Seq)
	assert.Empty(t, h.drain().Events)
}

// TestEmitReusesCapacity: a streamed turn, drained after every event and
// acknowledged every eighth, allocates less than once per event (the core
// used to allocate each Drain's Events anew and start the held events
// over from capacity one after every acknowledgement).
func TestEmitReusesCapacity(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	ev := messages.Event{Type: messages.EvText, Text: "a whole text"}
	const events = 64
	allocs := testing.AllocsPerRun(20, func() {
		for i := range events {
			h.c.AgentEvent(h.now, 1, ev)
			if i%8 == 7 {
				h.c.Persisted(h.now, h.c.LastSeq(), nil)
			}
			h.c.Drain()
		}
	})
	assert.Less(t, allocs/events, 0.5, "allocations per event (%v per %d)", allocs, events)
}

// TestHeldArraysShrinkAfterABacklog: after the store caught up with a
// backlog, the next array of held events is sized by heldChunk again,
// not by the backlog (an idle session keeps at most that).
func TestHeldArraysShrinkAfterABacklog(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	ev := messages.Event{Type: messages.EvText, Text: "a whole text"}
	for range 1000 {
		h.c.AgentEvent(h.now, 1, ev)
	}
	h.drain()
	require.GreaterOrEqual(t, cap(h.c.held), 1000)
	h.c.Persisted(h.now, h.c.LastSeq(), nil)
	h.drain()
	left := cap(h.c.held) // what is left of the backlog's array is used first
	for range left + 1 {
		h.c.AgentEvent(h.now, 1, ev)
	}
	assert.LessOrEqual(t, cap(h.c.held), max(heldChunk, 2*left), "the array after the backlog's")
	assert.Less(t, cap(h.c.held), 1000)
	assert.Len(t, h.c.Unpersisted(0), left+1)
}
