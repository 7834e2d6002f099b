package session

import (
	"fmt"
	"math/rand/v2"
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
	require.GreaterOrEqual(t, h.c.held.tailCap(), 1000)
	h.c.Persisted(h.now, h.c.LastSeq(), nil)
	h.drain()
	left := h.c.held.tailCap() // what is left of the backlog's array is used first
	for range left + 1 {
		h.c.AgentEvent(h.now, 1, ev)
	}
	assert.LessOrEqual(t, h.c.held.tailCap(), max(heldChunk, 2*left), "the array after the backlog's")
	assert.Less(t, h.c.held.tailCap(), 1000)
	assert.Len(t, h.c.Unpersisted(0), left+1)
}

// TestFullChunkMovesOnlyUnsentEvents: when the chunk of held events fills,
// the events already handed to the store stay where they are (no copy of
// them, however long the store takes), and those not sent yet move to the
// new chunk with the next ones, so the next request is still one chunk's
// run, handed out without a copy.
func TestFullChunkMovesOnlyUnsentEvents(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	h.drain()
	ev := messages.Event{Type: messages.EvText, Text: "a whole text"}
	for h.c.held.len() < h.c.held.tailCap() {
		h.c.AgentEvent(h.now, 1, ev)
	}
	sent := h.c.Unsent(h.c.DurableSeq(), 0)
	h.c.Sent(sent[len(sent)-1].Seq)
	first := &sent[0]
	h.c.AgentEvent(h.now, 1, ev) // unsent, moves
	h.c.AgentEvent(h.now, 1, ev)
	h.c.AgentEvent(h.now, 1, ev) // the full chunk's
	unsent := h.c.Unsent(sent[len(sent)-1].Seq, 0)
	require.Len(t, unsent, 3)
	assert.Same(t, first, &h.c.Unsent(h.c.DurableSeq(), 1)[0], "the sent events were not copied")
	chunks := h.c.held.chunks
	assert.Same(t, &chunks[len(chunks)-1][0], &unsent[0], "the next request is a view of the new chunk")
	assert.Equal(t, h.c.LastSeq(), unsent[2].Seq)
}

// TestHeldEventsAgainstAModel: random emits, sends, acknowledgements and
// drains against a model: every Drain's Events and Durable, Unpersisted and
// Unsent say what the model says, and no view handed out ever changes.
func TestHeldEventsAgainstAModel(t *testing.T) {
	for seed := range 20 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		h := newHarness(t)
		h.startTurn1()
		h.drain()
		var views, was [][]messages.PersistedEvent
		keep := func(v []messages.PersistedEvent) {
			views, was = append(views, v), append(was, slices.Clone(v))
		}
		drained, sent := h.c.LastSeq(), h.c.DurableSeq()
		for range 400 {
			switch r.IntN(6) {
			case 0, 1, 2:
				h.c.AgentEvent(h.now, 1, messages.Event{Type: messages.EvText, Text: fmt.Sprint(r.Int())})
			case 3:
				if r.IntN(4) == 0 {
					sent = h.c.DurableSeq() // a failed write: everything held goes again
				}
				u := h.c.Unsent(sent, 1+r.IntN(8))
				for i, e := range u {
					require.Equal(t, sent+uint64(i)+1, e.Seq)
				}
				if len(u) > 0 {
					sent = u[len(u)-1].Seq
					h.c.Sent(sent)
					keep(u)
				}
			case 4:
				if sent > h.c.DurableSeq() {
					upTo := h.c.DurableSeq() + 1 + uint64(r.IntN(int(sent-h.c.DurableSeq())))
					before := h.c.DurableSeq()
					h.c.Persisted(h.now, upTo, nil)
					o := h.c.Drain()
					for i, e := range o.Durable {
						require.Equal(t, before+uint64(i)+1, e.Seq)
					}
					require.Len(t, o.Durable, int(upTo-before))
					keep(o.Durable)
					for i, e := range o.Events {
						require.Equal(t, drained+uint64(i)+1, e.Seq)
					}
					drained = h.c.LastSeq()
				}
			case 5:
				o := h.c.Drain()
				for i, e := range o.Events {
					require.Equal(t, drained+uint64(i)+1, e.Seq)
				}
				require.Len(t, o.Events, int(h.c.LastSeq()-drained))
				drained = h.c.LastSeq()
				keep(o.Events)
			}
			u := h.c.Unpersisted(0)
			require.Len(t, u, h.c.Held())
			require.Len(t, u, int(h.c.LastSeq()-h.c.DurableSeq()))
			for i, e := range u {
				require.Equal(t, h.c.DurableSeq()+uint64(i)+1, e.Seq)
			}
		}
		for i := range views {
			require.Equal(t, was[i], views[i], "seed %d: view %d changed", seed, i)
		}
	}
}

// TestIdleSessionLetsGoOfItsChunk: once a turn is over and everything is
// durable the session holds no chunk (an idle session keeps nothing of
// its events), and the next turn's first chunk is as large as the last
// turn's, so a burst like the last one is never moved to a larger chunk
// (it used to be copied once per turn, growing from heldChunk again).
func TestIdleSessionLetsGoOfItsChunk(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	ev := messages.Event{Type: messages.EvText, Text: "a whole text"}
	const burst = 24 // more than heldChunk
	for range burst {
		h.c.AgentEvent(h.now, 1, ev)
	}
	h.endTurn("done", nil)
	require.Equal(t, PhaseIdle, h.c.Phase())
	assert.Zero(t, h.c.held.tailCap(), "idle and durable: no chunk kept")

	require.NoError(t, h.c.Guide(h.tick(), messages.Guide{Text: "again", Mode: messages.GuideQueue}))
	h.c.BaselineReady(h.tick(), 2)
	h.drain()
	first := &h.c.Unpersisted(1)[0]
	for range burst {
		h.c.AgentEvent(h.now, 2, ev) // nothing sent meanwhile: all of it would move
	}
	assert.Same(t, first, &h.c.Unpersisted(1)[0], "the turn's burst stayed in its first chunk")
}

// TestTurnsFirstChunkIsSizedByItsEvents: the first chunk of a turn is as
// large as the last turns' events, not as the capacity their chunks grew
// to: after one long turn, short turns get short chunks again (each turn
// of about 10 events used to zero a chunk of 64, some 27 KiB, forever after
// one long turn), and a short turn's burst still fills its first chunk
// without a move.
func TestTurnsFirstChunkIsSizedByItsEvents(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	ev := messages.Event{Type: messages.EvText, Text: "a whole text"}
	turn := func(n int, next bool) (capAt int) {
		if next {
			require.NoError(t, h.c.Guide(h.tick(), messages.Guide{Text: "again", Mode: messages.GuideQueue}))
			h.c.BaselineReady(h.tick(), h.c.Turn())
		}
		h.drain()
		first := &h.c.Unpersisted(1)[0]
		capAt = h.c.held.tailCap()
		for range n {
			h.c.AgentEvent(h.now, h.c.Turn(), ev) // nothing sent meanwhile: all of it would move
		}
		if next {
			require.Same(t, first, &h.c.Unpersisted(1)[0], "the turn's burst stayed in its first chunk")
		}
		h.endTurn("done", nil)
		require.Equal(t, PhaseIdle, h.c.Phase())
		require.Zero(t, h.c.held.tailCap(), "idle and durable: no chunk kept")
		return capAt
	}
	turn(50, false) // grows its chunks to heldTurn
	const short = 8
	for range 3 {
		turn(short, true)
	}
	capAt := turn(short, true)
	assert.Less(t, capAt, 2*short+heldChunk/2, "a short turn's first chunk after short turns")
}
