package main

import (
	"io"
	"strings"
	"sync"

	"github.com/codesession/codesession/messages"
)

// liveText prints a turn's text as the agent writes it: the runtime's
// event listener hands it each text delta (it never blocks the session:
// deltas are queued and written by a goroutine of its own), and the
// printer flushes it before each read-turn result, so the live text comes
// first and the result (the record, text included) follows it. Only the
// text mode streams; --json keeps one object per line.
//
// The printer writes through the same output lock (printerWriter): the
// next turn's deltas can arrive while a result is being printed, and two
// unsynchronized writers would interleave mid-line (and race on a buffer).
type liveText struct {
	w io.Writer

	mu     sync.Mutex // guards the queue; the listener only ever takes this one
	wake   *sync.Cond
	queue  []string
	busy   bool // the writer holds text taken from the queue
	closed bool
	done   chan struct{} // closed when the writer has returned

	outMu   sync.Mutex // serializes every write to w
	midLine bool       // guarded by outMu: the last live text did not end a line

	streamed bool // guarded by mu: text was written since the last flush
}

func newLiveText(w io.Writer) *liveText {
	l := &liveText{w: w, done: make(chan struct{})}
	l.wake = sync.NewCond(&l.mu)
	go l.write()
	return l
}

// listen is the runtime's event listener.
func (l *liveText) listen(_ string, ev messages.PersistedEvent) {
	if ev.Event.Type != messages.EvText || !ev.Event.Delta || ev.Event.Text == "" {
		return
	}
	l.mu.Lock()
	if !l.closed {
		l.queue = append(l.queue, ev.Event.Text)
		l.wake.Broadcast()
	}
	l.mu.Unlock()
}

func (l *liveText) write() {
	defer close(l.done)
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for len(l.queue) == 0 && !l.closed {
			l.wake.Wait()
		}
		if len(l.queue) == 0 {
			return
		}
		text := strings.Join(l.queue, "")
		l.queue, l.busy = nil, true
		l.mu.Unlock()
		l.outMu.Lock()
		var b strings.Builder
		for i, line := range strings.Split(text, "\n") {
			if i > 0 {
				b.WriteByte('\n')
				l.midLine = false
			}
			if line == "" {
				continue
			}
			if !l.midLine {
				b.WriteString("   ") // indented as the result's text is
			}
			b.WriteString(line)
			l.midLine = true
		}
		_, _ = io.WriteString(l.w, b.String())
		l.outMu.Unlock()
		l.mu.Lock()
		l.busy = false
		l.streamed = l.streamed || strings.TrimSpace(text) != ""
		l.wake.Broadcast()
	}
}

// flush waits until every delta received so far is written, ends the
// line the live text left open, and reports whether any text was streamed
// since the last flush (the result then does not print it a second time).
func (l *liveText) flush() (streamed bool) {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.queue) > 0 || l.busy {
		l.wake.Wait()
	}
	l.outMu.Lock()
	l.endLineLocked()
	l.outMu.Unlock()
	streamed, l.streamed = l.streamed, false
	return streamed
}

// endLineLocked ends the line live text left open; outMu is held.
func (l *liveText) endLineLocked() {
	if l.midLine {
		_, _ = io.WriteString(l.w, "\n")
		l.midLine = false
	}
}

// printerWriter is the writer the text printer uses while text streams:
// each write takes the output lock and starts on a line of its own.
func (l *liveText) printerWriter() io.Writer { return printerWriter{l} }

type printerWriter struct{ l *liveText }

func (p printerWriter) Write(b []byte) (int, error) {
	p.l.outMu.Lock()
	defer p.l.outMu.Unlock()
	p.l.endLineLocked()
	return p.l.w.Write(b)
}

// close writes what is queued, ends an open line and stops the writer;
// nothing is written after it returns.
func (l *liveText) close() {
	l.flush()
	l.mu.Lock()
	l.closed = true
	l.wake.Broadcast()
	l.mu.Unlock()
	<-l.done
}
