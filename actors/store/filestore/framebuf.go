package filestore

import (
	"bytes"
	"math/bits"
	"sync/atomic"
)

// An append's WAL frames are encoded into a buffer that lives until the
// append is committed and applied, and at ten thousand sessions twelve
// thousand appends can be in flight at once. One free list of every size
// handed each append whatever buffer came back, so every buffer grew to
// the largest batch any session had sent (9 KiB, with the events of a
// typical batch under 1 KiB): 150 MiB of the turns phase's live heap,
// whose growth is paid in page faults. The buffers are kept in size
// classes instead, each append takes one of the class its estimate
// needs, and the estimate follows the lines this store has encoded.

// The buffer sizes kept for reuse are frameClasses powers of two, from
// 1<<minFrameShift to 1<<maxFrameShift bytes. A larger append gets a
// buffer of its own, not kept.
const (
	minFrameShift = 10 // 1 KiB
	maxFrameShift = 16 // 64 KiB
	frameClasses  = maxFrameShift - minFrameShift + 1
	// spareBytesPerClass bounds what each class keeps between appends
	spareBytesPerClass = 4 << 20
)

// spareFrames keeps append buffers across garbage collections, which
// would empty a sync.Pool: at ten thousand sessions a collection runs
// every few hundred milliseconds, and each append then grew a new buffer
// (a tenth of the store's CPU per append).
var spareFrames = func() (c [frameClasses]chan *bytes.Buffer) {
	for i := range c {
		c[i] = make(chan *bytes.Buffer, spareBytesPerClass>>(minFrameShift+i))
	}
	return c
}()

// frameClass is the class of the smallest kept size of at least n bytes,
// or -1 when n is past the largest.
func frameClass(n int) int {
	if n <= 1<<minFrameShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - minFrameShift
	if c >= frameClasses {
		return -1
	}
	return c
}

// getBuffer is an empty buffer with room for at least need bytes.
func getBuffer(need int) *bytes.Buffer {
	c := frameClass(need)
	if c < 0 {
		return bytes.NewBuffer(make([]byte, 0, need))
	}
	select {
	case buf := <-spareFrames[c]:
		return buf
	default:
		return bytes.NewBuffer(make([]byte, 0, 1<<(minFrameShift+c)))
	}
}

// putBuffer keeps buf for reuse in the largest class it holds (a buffer
// that grew past its estimate moves up), if that class has room.
func putBuffer(buf *bytes.Buffer) {
	n := buf.Cap()
	if n < 1<<minFrameShift || n >= 2<<maxFrameShift {
		return // too small to keep, or a large append's own
	}
	c := min(bits.Len(uint(n))-1-minFrameShift, frameClasses-1)
	buf.Reset()
	select {
	case spareFrames[c] <- buf:
	default:
	}
}

// lineEstimator estimates the bytes an append's event lines take, from
// the lines encoded so far: a running mean per event, in 1/16 bytes.
type lineEstimator struct{ mean atomic.Int64 }

// lineEstimate follows every store of the process: the agents' events
// are alike whatever store holds them.
var lineEstimate = func() *lineEstimator {
	e := &lineEstimator{}
	e.mean.Store(firstLineGuess << 4)
	return e
}()

// firstLineGuess is about the size of an event's line (a text or tool
// event of an agent turn) before any was encoded.
const firstLineGuess = 256

// room is the bytes to make room for n events' lines: the mean plus a
// quarter, so a batch a little above the mean does not grow its buffer.
func (e *lineEstimator) room(n int) int {
	return int(e.mean.Load()>>4) * n * 5 / 4
}

// observe moves the mean an eighth of the way to this batch's. Updates
// racing from several goroutines may lose one another's step: it is an
// estimate, and the next batch moves it again.
func (e *lineEstimator) observe(size, n int) {
	if n <= 0 || size <= 0 {
		return
	}
	m := e.mean.Load()
	e.mean.Store(m + (int64(size)<<4/int64(n)-m)/8)
}
