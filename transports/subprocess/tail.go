package subprocess

import (
	"sync"

	"github.com/codesession/codesession/transports"
)

// DefaultTailBytes is how much a zero Tail keeps.
const DefaultTailBytes = 16 << 10

// Tail keeps the last bytes written to it: a process's stderr, for the
// error that reports how it died. The zero value keeps DefaultTailBytes.
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTail returns a Tail that keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

// Write keeps the end of b; it never fails.
func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := t.max
	if limit <= 0 {
		limit = DefaultTailBytes
	}
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// Text is at most the last n bytes kept, on one line (transports.TailText).
func (t *Tail) Text(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return transports.TailText(t.buf, n)
}
