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
	for i := range evs { // by index: a range value would copy each 430-byte event
		if !streamed(evs[i].Event.Type) {
			return false
		}
	}
	return true
}

// overtakes decides whether a batch may start while another is still in
// flight (the second of persistDepth's slots) instead of waiting for its
// ack: only when a reader or an op waits on it, that is when it holds what
// closes or interrupts a turn for its reader (waitedOn) or a seq a parked op
// answer waits for (oldestParked, 0 for none). Everything else (streamed
// output, the backend's start, warnings, record changes) waits for the ack
// and goes in the next batch, as with one in flight: letting every batch
// take the slot split native turns at c=1 into 2.85 group commits each
// instead of 2.10, each a device flush.
func overtakes(evs []messages.PersistedEvent, oldestParked uint64) bool {
	if len(evs) == 0 {
		return false
	}
	if oldestParked != 0 && oldestParked <= evs[len(evs)-1].Seq {
		return true
	}
	for i := range evs { // by index, as in mayHold
		if waitedOn(evs[i].Event.Type) {
			return true
		}
	}
	return false
}

// waitedOn reports whether a turn's reader waits for an event of this type
// to be durable: the turn's end and its diff, a clarification to answer,
// an error, the agent's or the session's end.
func waitedOn(t messages.EventType) bool {
	switch t {
	case messages.EvTurnEnd, messages.EvTurnDiff, messages.EvClarification, messages.EvError, messages.EvEnded, messages.EvReleased:
		return true
	}
	return false
}
