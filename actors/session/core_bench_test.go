package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
)

// benchIdleCore returns a core whose first turn is over and read: idle,
// ready for guidance to start the next one.
func benchIdleCore(b *testing.B) *Core {
	b.Helper()
	spec := testSpec()
	c := New(spec, t0, 0)
	now := t0
	c.Created(now)
	c.BaselineReady(now, 1)
	c.AgentEvent(now, 1, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted})
	c.DiffReady(now, 1, nil)
	c.Persisted(now, c.LastSeq(), nil)
	if err := c.ReadTurn(1, false); err != nil {
		b.Fatal(err)
	}
	out := c.Drain()
	if len(out.Replies) != 1 {
		b.Fatalf("first turn: %d replies", len(out.Replies))
	}
	return c
}

// BenchmarkCoreAgentEvent is the session core's step for one agent event:
// AgentEvent (a thinking event: assigned a seq, queued for persistence)
// and Drain, the shell's whole use of the core per backend event, with
// the store's acknowledgement every heldChunk events.
func BenchmarkCoreAgentEvent(b *testing.B) {
	c := benchIdleCore(b)
	now := t0.Add(time.Second)
	if err := c.Guide(now, messages.Guide{Text: "go on", Mode: messages.GuideQueue}); err != nil {
		b.Fatal(err)
	}
	c.BaselineReady(now, c.Turn())
	c.Drain()
	ev := messages.Event{Type: messages.EvThinking, Text: "considering the next step"}
	turn := c.Turn()
	b.ReportAllocs()
	for b.Loop() {
		c.AgentEvent(now, turn, ev)
		out := c.Drain()
		if len(out.Events) != 1 {
			b.Fatal("no event")
		}
		if c.LastSeq()%heldChunk == 0 {
			// the store acknowledges as it would under load, a batch at a
			// time: without it the held array grows with b.N and the
			// benchmark times the collector scanning it
			c.Persisted(now, c.LastSeq(), nil)
			c.Drain()
		}
	}
}

// benchTurnEvents are a bench turn's 20 agent events: six rounds of
// thinking, a Read and its result, then the closing text and the turn's end.
func benchTurnEvents() []messages.Event {
	var evs []messages.Event
	for i := range 6 {
		evs = append(evs, messages.Event{Type: messages.EvThinking, Text: fmt.Sprintf("step %d", i)},
			messages.Event{Type: messages.EvToolUse, ToolUseID: fmt.Sprintf("t%d", i), ToolName: "Read", Input: []byte(`{"file_path":"a.go"}`)},
			messages.Event{Type: messages.EvToolResult, ToolUseID: fmt.Sprintf("t%d", i), Output: "package a\n"})
	}
	return append(evs, messages.Event{Type: messages.EvText, Text: "Done.", Delta: false},
		messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted, NumTurns: 1})
}

// BenchmarkCoreTurn is a whole turn through the core, as the shell drives
// it: guidance starts it, the baseline is ready, 20 agent events (thinking,
// tool calls, text deltas, the turn's end), the diff is ready, the events
// are persisted, a reader takes the result; every step drained. ns/event
// divides by the 20 agent events.
func BenchmarkCoreTurn(b *testing.B) { benchCoreTurns(b, false) }

// benchCoreTurns drives whole turns through an idle core; startDurable
// acknowledges the turn's start before its streamed output comes, as
// the shell sees under load.
func benchCoreTurns(b *testing.B, startDurable bool) {
	c := benchIdleCore(b)
	now := t0.Add(time.Second)
	evs := benchTurnEvents()
	token := uint64(1)
	turns := 0
	b.ReportAllocs()
	for b.Loop() {
		turns++
		if err := c.Guide(now, messages.Guide{Text: "next", Mode: messages.GuideQueue}); err != nil {
			b.Fatal(err)
		}
		c.Drain()
		turn := c.Turn()
		c.BaselineReady(now, turn)
		c.Drain()
		if startDurable {
			c.Persisted(now, c.LastSeq(), nil)
			c.Drain()
		}
		for _, ev := range evs {
			c.AgentEvent(now, turn, ev)
			c.Drain()
		}
		c.DiffReady(now, turn, nil)
		c.Drain()
		c.Persisted(now, c.LastSeq(), nil)
		token++
		if err := c.ReadTurn(token, false); err != nil {
			b.Fatal(err)
		}
		if out := c.Drain(); len(out.Replies) != 1 || out.Replies[0].Result.Kind != messages.KindTurnComplete {
			b.Fatalf("turn %d: %+v", turn, out.Replies)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(turns*len(evs)), "ns/event")
}

// BenchmarkCoreTextDeltas streams one turn of n text deltas through the
// core (each AgentEvent drained, as the shell does) and reports ns/delta.
// The cost of a delta must not grow with the turn: compare ns/delta at
// 1000 and 8000 deltas in the same run (a string += per delta made it grow
// with the turn's length).
func BenchmarkCoreTextDeltas(b *testing.B) {
	for _, n := range []int{1000, 8000} {
		b.Run(fmt.Sprintf("deltas=%d", n), func(b *testing.B) {
			delta := messages.Event{Type: messages.EvText, Delta: true, Text: "a streamed piece of the answer, some forty bytes "}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				c := benchIdleCore(b)
				now := t0.Add(time.Second)
				if err := c.Guide(now, messages.Guide{Text: "go on", Mode: messages.GuideQueue}); err != nil {
					b.Fatal(err)
				}
				c.BaselineReady(now, c.Turn())
				c.Drain()
				turn := c.Turn()
				b.StartTimer()
				for range n {
					c.AgentEvent(now, turn, delta)
					c.Drain()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delta")
		})
	}
}

// BenchmarkCoreTurnPersisted is BenchmarkCoreTurn with the acknowledgements
// the shell sees under load: the turn's start is durable before its
// streamed output comes (which is held for the rest of the turn), the
// rest once the turn has ended. B/op is what the held events cost.
func BenchmarkCoreTurnPersisted(b *testing.B) { benchCoreTurns(b, true) }
