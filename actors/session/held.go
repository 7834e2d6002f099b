package session

import "github.com/codesession/codesession/messages"

// heldEvents are a session's events after the store's last acknowledged
// seq, in seq order, kept in a list of chunks that are never copied whole.
//
// Every chunk is write-once: only the last one is appended to, into its
// spare capacity, and acknowledgement only reslices or drops chunks, so no
// element once written is written again and a view of one (capped at its
// length) is safe to hand to the shell and on to the store without a copy.
//
// When the last chunk is full, the events in it that the shell has not
// handed to the store yet (after sent, markSent) move to the new chunk with
// the ones that follow: what the next persist request takes is then one
// chunk's run, never split across two (a split would cost the store a
// second append per request). The events already handed to the store stay
// where they are until acknowledged: at 10,000 sessions the store answers
// about a second behind, and copying them into every new array (as a
// single growing array did) was most of emit's cost.
type heldEvents struct {
	chunks [][]messages.PersistedEvent // views; only the last is appended to
	n      int
	sent   uint64 // the last seq the shell handed to the store
	// size is the capacity of the last chunk made: a new one is at least
	// that large, up to heldChunk, not four again after every
	// acknowledgement; after release, the size of the next turn's first
	// chunk
	size int
	// added counts the events added since the last release (a turn's
	// burst), last the count before it: the next turn's first chunk is
	// sized by what the last two turns held, not by the capacity their
	// chunks grew to (after one long turn, a turn of 24 events got a
	// chunk of 64: 17 KiB allocated and never used, every turn)
	added, last int
}

// heldChunk bounds how much of a new chunk is sized by the last one rather
// than by the events that move into it, within a turn.
const heldChunk = 16

// heldTurn bounds the first chunk of a turn, sized by the last turns'
// events (release): a backlog's size is not kept.
const heldTurn = 64

func (h *heldEvents) len() int { return h.n }

// add makes room for the next event and returns its slot.
func (h *heldEvents) add() *messages.PersistedEvent {
	k := len(h.chunks) - 1
	if k < 0 || len(h.chunks[k]) == cap(h.chunks[k]) {
		h.grow()
		k = len(h.chunks) - 1
	}
	t := h.chunks[k][:len(h.chunks[k])+1]
	h.chunks[k] = t
	h.n++
	h.added++
	return &t[len(t)-1]
}

// grow starts a new last chunk, moving into it the full last chunk's events
// not handed to the store yet.
func (h *heldEvents) grow() {
	var tail []messages.PersistedEvent
	k := len(h.chunks) - 1
	if k >= 0 {
		tail = h.chunks[k]
	}
	i := len(tail)
	for i > 0 && tail[i-1].Seq > h.sent {
		i--
	}
	moved := tail[i:]
	if tail == nil && h.size > 0 {
		// the first chunk after release: as large as the last turns'
		// bursts (release), so a turn like them fills it without a move
		h.chunks = append(h.chunks, make([]messages.PersistedEvent, 0, h.size))
		return
	}
	// sized by the whole full chunk, as a single array was: a turn's burst
	// mostly waits unsent behind the request in flight, and a chunk sized
	// by what moves alone would fill, and move it, again
	h.size = max(2*len(tail), min(2*h.size, heldChunk), 4)
	next := make([]messages.PersistedEvent, len(moved), h.size)
	copy(next, moved)
	switch {
	case k < 0:
		h.chunks = append(h.chunks, next)
	case i == 0: // nothing stays in the old chunk
		h.chunks[k] = next
	default:
		h.chunks[k] = tail[:i:i]
		h.chunks = append(h.chunks, next)
	}
}

// release lets go of the last chunk once nothing is held: an idle
// session keeps no array of events already durable, and its next turn's
// first chunk is sized by the events the last two turns added (turnSize),
// not grown again from heldChunk with its burst copied.
func (h *heldEvents) release() {
	if h.n == 0 && len(h.chunks) > 0 {
		clear(h.chunks)
		h.chunks = h.chunks[:0]
		h.size = turnSize(max(h.added, h.last))
		h.added, h.last = 0, h.added
	}
}

// turnSize is the first chunk for a turn of n events: a little room over
// n (a turn one or two events longer than the last ones is not moved to a
// new chunk), at most heldTurn (a backlog's size is not kept).
func turnSize(n int) int {
	return min(max(n+n/8+2, 4), heldTurn)
}

// markSent says the shell handed the events up to seq to the store.
func (h *heldEvents) markSent(seq uint64) { h.sent = seq }

// takeFront removes and returns the first chunk's events up to seq (a
// capped view); empty when the first held event is after seq. Called until
// empty, it takes every event up to seq.
func (h *heldEvents) takeFront(seq uint64) []messages.PersistedEvent {
	if len(h.chunks) == 0 {
		return nil
	}
	c := h.chunks[0]
	n := 0
	for n < len(c) && c[n].Seq <= seq {
		n++
	}
	if n == len(c) && len(h.chunks) > 1 {
		h.chunks[0] = nil
		h.chunks = h.chunks[1:]
	} else {
		h.chunks[0] = c[n:] // the last chunk keeps its spare capacity
	}
	h.n -= n
	return c[:n:n]
}

// from returns the held events after seq after, oldest first, at most max
// of them (max <= 0: all): a capped view when they lie in one chunk, else
// a copy (only after a failed write, when everything held goes again, or
// for the tests' views).
func (h *heldEvents) from(after uint64, max int) []messages.PersistedEvent {
	j := len(h.chunks) - 1
	if j < 0 {
		return nil
	}
	for j > 0 && h.chunks[j-1][len(h.chunks[j-1])-1].Seq > after {
		j--
	}
	c := h.chunks[j]
	i := 0
	for i < len(c) && c[i].Seq <= after {
		i++
	}
	c = c[i:]
	if j == len(h.chunks)-1 || (max > 0 && len(c) >= max) {
		if max > 0 && len(c) > max {
			c = c[:max]
		}
		return c[:len(c):len(c)]
	}
	total := len(c)
	for _, r := range h.chunks[j+1:] {
		total += len(r)
	}
	if max > 0 {
		total = min(total, max)
	}
	out := make([]messages.PersistedEvent, 0, total)
	out = append(out, c...)
	for _, r := range h.chunks[j+1:] {
		if len(out) == total {
			break
		}
		out = append(out, r[:min(len(r), total-len(out))]...)
	}
	return out
}

// tailCap is the capacity of the chunk appended to (tests).
func (h *heldEvents) tailCap() int {
	if len(h.chunks) == 0 {
		return 0
	}
	return cap(h.chunks[len(h.chunks)-1])
}
