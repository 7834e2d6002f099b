package droid

import (
	"sync"

	"github.com/codesession/codesession/transports"
)

// fifo is an unbounded queue with one waiting consumer.
type fifo[T any] struct {
	mu     sync.Mutex
	items  []T
	closed bool
	ready  chan struct{}
}

func newFifo[T any]() *fifo[T] { return &fifo[T]{ready: make(chan struct{}, 1)} }

func (q *fifo[T]) push(v T) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *fifo[T]) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// wait returns what is queued, waiting for something; ok is false once
// the queue is closed (with the last items) or stop is closed.
func (q *fifo[T]) wait(stop <-chan struct{}) (items []T, ok bool) {
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

// ring keeps the last max bytes written to it.
type ring struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (r *ring) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, b...)
	if over := len(r.buf) - r.max; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	return len(b), nil
}

// text is the last n bytes, on one line.
func (r *ring) text(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return transports.TailText(r.buf, n)
}
