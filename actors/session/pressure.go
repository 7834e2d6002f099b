package session

import "sync"

// DefaultMaxHeld is how many unacknowledged events a session holds before
// it stops reading its backend.
const DefaultMaxHeld = 4096

// pressure is the backpressure between a session and its backend's reader
// goroutines: when the store falls behind and the session holds more than
// limit unacknowledged events, the transport's sink waits, so the backend's
// output stays in its pipe instead of in memory. It is a plain gate: it
// shares no session state, only a count the session sets.
type pressure struct {
	mu     sync.Mutex
	cond   *sync.Cond
	held   int
	limit  int
	closed bool
}

func newPressure(limit int) *pressure {
	if limit <= 0 {
		limit = DefaultMaxHeld
	}
	p := &pressure{limit: limit}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// set records how many events the session holds.
func (p *pressure) set(held int) {
	p.mu.Lock()
	p.held = held
	if held <= p.limit {
		p.cond.Broadcast()
	}
	p.mu.Unlock()
}

// wait blocks while the session holds more than its limit.
func (p *pressure) wait() {
	p.mu.Lock()
	for p.held > p.limit && !p.closed {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

// close opens the gate for good (the session is releasing: nothing it
// reads from now on is acted on, and its readers must be free to end).
func (p *pressure) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
}
