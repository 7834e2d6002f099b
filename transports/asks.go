package transports

import (
	"strconv"
	"sync"

	"github.com/codesession/codesession/messages"
)

// Asks is the permission-question bookkeeping of an in-process agent (the
// script and native backends): one question pending at a time, and every id
// ever raised remembered, so an answer to a stale or foreign id gets the
// right typed error (conflict for a question that is no longer waiting,
// not_found for one never raised). It is safe for concurrent use and takes
// no other lock, so callers may hold their own while calling it.
type Asks struct {
	mu      sync.Mutex
	prefix  string
	seq     int
	pending *Ask
	issued  map[string]bool
}

// Ask is one raised question; C receives its answer at most once.
type Ask struct {
	ID string
	C  <-chan Reply
	ch chan Reply
}

// Reply is the answer to an Ask.
type Reply struct {
	Decision messages.Decision
	Reason   string
}

// NewAsks returns an empty book whose ids are prefix followed by a counter.
func NewAsks(prefix string) *Asks {
	return &Asks{prefix: prefix, issued: map[string]bool{}}
}

// Raise records a new question as the pending one.
func (a *Asks) Raise() *Ask {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	ch := make(chan Reply, 1)
	q := &Ask{ID: a.prefix + strconv.Itoa(a.seq), C: ch, ch: ch}
	a.pending = q
	a.issued[q.ID] = true
	return q
}

// Answer delivers a decision to the pending question with that id.
func (a *Asks) Answer(id string, d messages.Decision, reason string) error {
	if !d.Valid() {
		return messages.FieldError(messages.OpAnswer, "decision", "unknown decision %q", d)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.issued[id] {
		return messages.Errorf(messages.CodeNotFound, messages.OpAnswer, "no clarification %q was raised in this session", id)
	}
	if a.pending == nil || a.pending.ID != id {
		return messages.Errorf(messages.CodeConflict, messages.OpAnswer, "clarification %q is not pending", id)
	}
	a.pending.ch <- Reply{Decision: d, Reason: reason} // buffered 1, sent once
	a.pending = nil
	return nil
}

// Withdraw forgets q if it is still pending (its turn ended unanswered).
func (a *Asks) Withdraw(q *Ask) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == q {
		a.pending = nil
	}
}

// Clear forgets whatever question is pending.
func (a *Asks) Clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending = nil
}
