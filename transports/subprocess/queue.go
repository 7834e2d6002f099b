package subprocess

import (
	"io"
	"sync"
)

// Queue is an unbounded FIFO with one waiting consumer: what a session
// writes to its process's stdin (a writer goroutine drains it, so a slow
// reader on the other end never blocks the session), or the events it
// hands to its sink in order.
type Queue[T any] struct {
	mu     sync.Mutex
	items  []T
	closed bool
	ready  chan struct{}
}

// NewQueue returns an empty, open queue.
func NewQueue[T any]() *Queue[T] { return &Queue[T]{ready: make(chan struct{}, 1)} }

// Push appends v; after Close it drops it.
func (q *Queue[T]) Push(v T) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	q.wake()
}

// Close ends the queue: Wait returns what is left, then ok false.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *Queue[T]) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Wait returns everything queued, waiting until there is something; ok is
// false once the queue is closed (with the last items) or stop is closed
// (with none). A nil stop never closes.
func (q *Queue[T]) Wait(stop <-chan struct{}) (items []T, ok bool) {
	for {
		q.mu.Lock()
		items, q.items = q.items, nil
		closed := q.closed
		q.mu.Unlock()
		if len(items) > 0 || closed {
			return items, !closed
		}
		select {
		case <-q.ready:
		case <-stop:
			return nil, false
		}
	}
}

// Pump writes the queued lines to w (a process's stdin) in order until the
// queue is closed, then closes w. A nil entry closes w early (end of
// input); after a failed write the rest is dropped: the process is gone,
// and whoever waits for it reports that.
func Pump(q *Queue[[]byte], w io.WriteCloser) {
	broken := false
	for {
		items, ok := q.Wait(nil)
		for _, b := range items {
			switch {
			case b == nil:
				_ = w.Close()
				broken = true
			case !broken:
				if _, err := w.Write(b); err != nil {
					broken = true
				}
			}
		}
		if !ok {
			_ = w.Close()
			return
		}
	}
}
