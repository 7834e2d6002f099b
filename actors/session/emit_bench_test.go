package session

import (
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
)

// BenchmarkEmitFlush is the core's share of a streamed turn: an agent
// event emitted and drained per flush (as the shell drains after every
// message), the store acknowledging every eighth. Compare with benchstat
// against the parent commit.
func BenchmarkEmitFlush(b *testing.B) {
	c := New(testSpec(), t0, 0)
	now := t0
	c.Created(now)
	c.BaselineReady(now, 1)
	c.Drain()
	// whole texts: a delta would time the turn text's concatenation
	ev := messages.Event{Type: messages.EvText, Text: "The agent writes a line of prose. "}
	n := 0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		c.AgentEvent(now, 1, ev)
		if n++; n%8 == 0 {
			c.Persisted(now, c.LastSeq(), nil)
		}
		c.Drain()
	}
}
