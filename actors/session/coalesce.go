package session

import (
	"time"

	"github.com/codesession/codesession/messages"
)

// persistCoalesce is how long a turn's streamed output (text, thinking,
// tool calls and results) may wait, held, for the rest of its turn before
// it is written on its own. Nobody waits for those events to be durable:
// a reader waits for the turn's end, an op for the events it emitted, so
// writing each burst as it comes only adds group commits that the turn's
// end then queues behind (native measured 2.4-5.4 WAL fsyncs per turn, a
// mid-turn write often still in flight when the turn ended). Held, they
// go in the same write as the event someone waits for. The wait bounds
// how late the live feed sees a turn that is still talking: it is a
// human's blink, and far below a real model's pauses. It never decides
// durability: a held event is acknowledged to nobody, and the feed gets
// it only once the store has it, as before.
const persistCoalesce = 5 * time.Millisecond

// persistFlushDue fires persistCoalesce after streamed output was first
// held back; gen tells a stale timer (its events already went out) apart.
type persistFlushDue struct{ gen int }

// streamed reports whether an event is a turn's streamed output, which no
// reader or op waits on: anything else (a turn's start or end, a
// clarification, guidance, an error, a lifecycle event) is what someone
// is waiting for, and goes out at once.
func streamed(t messages.EventType) bool {
	switch t {
	case messages.EvText, messages.EvThinking, messages.EvToolUse, messages.EvToolResult:
		return true
	}
	return false
}

// mayHold decides whether a batch about to be written may wait for more of
// its turn instead: only when every event in it is streamed output, no
// record change rides with it, no op's answer waits on any of its seqs
// (oldestParked: the lowest seq a parked answer waits for, 0 for none),
// the session is live (a release writes everything) and the batch is
// below a write's bound.
func mayHold(evs []messages.PersistedEvent, recordPending bool, oldestParked uint64, live bool) bool {
	if len(evs) == 0 || recordPending || !live || len(evs) >= persistChunk {
		return false
	}
	if oldestParked != 0 && oldestParked <= evs[len(evs)-1].Seq {
		return false
	}
	for _, e := range evs {
		if !streamed(e.Event.Type) {
			return false
		}
	}
	return true
}
