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

// TestFullHeldArrayIsNotCopied: when the held array is full, the events
// still waiting for the store stay where they are (prev) and the next
// ones go to a new array; nothing held is copied to make room.
func TestFullHeldArrayIsNotCopied(t *testing.T) {
	h := newHarness(t)
	h.startTurn1()
	h.c.Persisted(h.tick(), h.c.LastSeq(), nil)
	h.drain()
	ev := messages.Event{Type: messages.EvThinking, Text: "thinking"}
	h.c.AgentEvent(h.tick(), 1, ev)
	first := &h.c.held[0]
	for len(h.c.held) < cap(h.c.held) {
		h.c.AgentEvent(h.tick(), 1, ev)
	}
	h.c.AgentEvent(h.tick(), 1, ev) // past the full array
	require.NotEmpty(t, h.c.prev, "the events of the full array are kept in place")
	assert.Same(t, first, &h.c.prev[0], "the oldest event held was not moved")
	assert.Len(t, h.c.held, 1)

	// the persist child is handed the older array's events first, told
	// that more wait (so they are not held back as if they were all)
	evs, more := h.c.unsent(0, 0)
	assert.Equal(t, h.c.prev[0].Seq, evs[0].Seq)
	assert.Equal(t, h.c.prev[len(h.c.prev)-1].Seq, evs[len(evs)-1].Seq)
	assert.True(t, more)
	evs, more = h.c.unsent(evs[len(evs)-1].Seq, 0)
	assert.Equal(t, []uint64{h.c.LastSeq()}, seqsOf(evs))
	assert.False(t, more)
	assert.Len(t, h.c.Unpersisted(0), h.c.heldLen())
}

func seqsOf(evs []messages.PersistedEvent) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// TestHeldEventsAgainstAModel drives the core with random bursts of
// events, acknowledgements (in order, of any prefix) and drains, and holds
// what it hands out to a plain model: every Drain's Events are exactly the
// events emitted or acknowledged since the last one, its Durable exactly
// those newly acknowledged, Unpersisted and unsent the ones after the
// acknowledged seq; and nothing once handed out ever changes.
func TestHeldEventsAgainstAModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			h := newHarness(t)
			h.startTurn1()
			h.drain()
			require.Zero(t, h.c.DurableSeq())
			emitted := slices.Clone(h.c.Unpersisted(0)) // the model: every event, in seq order
			drained := h.c.LastSeq()
			durable := h.c.DurableSeq()
			type handed struct{ view, was []messages.PersistedEvent }
			var views []handed
			keep := func(v []messages.PersistedEvent) {
				views = append(views, handed{v, slices.Clone(v)})
			}
			for range 400 {
				switch op := rng.IntN(10); {
				case op < 6: // a burst of events
					for range 1 + rng.IntN(40) {
						h.c.AgentEvent(h.tick(), 1, messages.Event{Type: messages.EvThinking, Text: fmt.Sprint("e", h.c.LastSeq()+1)})
						emitted = append(emitted, h.c.held[len(h.c.held)-1])
					}
				case op < 9: // the store acknowledges a prefix
					if h.c.LastSeq() > durable {
						durable += 1 + uint64(rng.IntN(int(h.c.LastSeq()-durable)))
						h.c.Persisted(h.tick(), durable, nil)
					}
				}
				if rng.IntN(3) == 0 {
					continue // no drain this step
				}
				o := h.drain()
				var wantEvents []uint64
				for _, e := range emitted {
					if e.Seq > drained && e.Seq <= h.c.LastSeq() {
						wantEvents = append(wantEvents, e.Seq)
					}
				}
				require.Equal(t, wantEvents, nilIfEmpty(seqsOf(o.Events)), "a Drain's events")
				drained = h.c.LastSeq()
				keep(o.Events)
				keep(o.Durable)
				var wantHeld []uint64
				for _, e := range emitted {
					if e.Seq > durable {
						wantHeld = append(wantHeld, e.Seq)
					}
				}
				held := h.c.Unpersisted(0)
				require.Equal(t, wantHeld, nilIfEmpty(seqsOf(held)), "Unpersisted")
				keep(held)
				// unsent walks the held events array by array
				var got []uint64
				after := durable
				for {
					evs, more := h.c.unsent(after, 16)
					got = append(got, seqsOf(evs)...)
					if len(evs) > 0 {
						after = evs[len(evs)-1].Seq
					}
					if !more {
						break
					}
					require.NotEmpty(t, evs, "more, and nothing now")
				}
				require.Equal(t, wantHeld, nilIfEmpty(got), "unsent")
			}
			for i, v := range views {
				require.Equal(t, v.was, v.view, "view %d changed after it was handed out", i)
			}
			for i, e := range emitted {
				if e.Event.Type != messages.EvThinking {
					continue
				}
				require.Equal(t, fmt.Sprint("e", e.Seq), e.Event.Text, "event %d", i)
			}
		})
	}
}

func nilIfEmpty(s []uint64) []uint64 {
	if len(s) == 0 {
		return nil
	}
	return s
}
