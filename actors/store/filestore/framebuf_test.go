package filestore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
)

// TestFrameClassIsTheSmallestThatFits: a need maps to the smallest kept
// size at least as large, and past the largest to none.
func TestFrameClassIsTheSmallestThatFits(t *testing.T) {
	for _, c := range []struct{ need, class int }{
		{0, 0}, {1, 0}, {1024, 0}, {1025, 1}, {2048, 1}, {2049, 2},
		{32 << 10, 5}, {32<<10 + 1, 6}, {64 << 10, 6}, {64<<10 + 1, -1},
	} {
		assert.Equal(t, c.class, frameClass(c.need), "need %d", c.need)
	}
}

// TestGetBufferHasRoomForItsNeed: whatever the free lists hold, a buffer
// has room for the need it was asked with and is empty; one given back
// (grown past its class or not) serves a later need of its class, and a
// large append's own buffer is not kept.
func TestGetBufferHasRoomForItsNeed(t *testing.T) {
	for _, need := range []int{1, 700, 1024, 1500, 3000, 9000, 40 << 10, 64 << 10, 200 << 10} {
		for range 3 {
			buf := getBuffer(need)
			assert.GreaterOrEqual(t, buf.Cap(), need)
			assert.Zero(t, buf.Len())
			buf.Write(make([]byte, need+need/3)) // an estimate short of the batch: it grows
			putBuffer(buf)
		}
	}
	big := getBuffer(300 << 10)
	putBuffer(big)
	for c := range spareFrames {
		for len(spareFrames[c]) > 0 {
			b := <-spareFrames[c]
			assert.GreaterOrEqual(t, b.Cap(), 1<<(minFrameShift+c), "class %d", c)
			if c < frameClasses-1 {
				assert.Less(t, b.Cap(), 2<<(minFrameShift+c), "class %d", c)
			}
			assert.NotSame(t, big, b, "a large append's buffer is not kept")
		}
	}
}

// TestSmallBatchAfterALargeOneGetsASmallBuffer: the buffer of a batch of
// a few events is sized for them, not for the largest batch encoded
// before it. One free list of every size gave each append the buffer the
// last large batch had grown, so at ten thousand sessions every append
// in flight held 9 KiB for under 1 KiB of events.
func TestSmallBatchAfterALargeOneGetsASmallBuffer(t *testing.T) {
	large, err := encodeEventsFrame(store.OpAppend, "cs_frames", encodeBenchEvents(100), nil)
	require.NoError(t, err)
	largeCap := large.Cap()
	putBuffer(large)
	small, err := encodeEventsFrame(store.OpAppend, "cs_frames", encodeBenchEvents(3), nil)
	require.NoError(t, err)
	defer putBuffer(small)
	assert.GreaterOrEqual(t, largeCap, 100*200, "100 events of about 240 bytes")
	assert.LessOrEqual(t, small.Cap(), 4<<10, "3 events of about 240 bytes, with the estimate's margin and the class's rounding")
	assert.False(t, large == small, "not the large batch's buffer")
}

// TestLineEstimateFollowsTheLines: the estimate starts at the first
// guess, moves toward the lines observed, and ignores a batch of none.
func TestLineEstimateFollowsTheLines(t *testing.T) {
	var e lineEstimator
	e.mean.Store(firstLineGuess << 4)
	assert.Equal(t, firstLineGuess*10*5/4, e.room(10))
	for range 100 {
		e.observe(100*8, 8) // batches of 8 lines of 100 bytes
	}
	assert.InDelta(t, 100*10*5/4, e.room(10), 20, "the mean of the lines, with a quarter to spare")
	e.observe(0, 0)
	e.observe(500, 0)
	assert.InDelta(t, 100*10*5/4, e.room(10), 20, "a batch of no events moves nothing")
	for range 100 {
		e.observe(1000*2, 2)
	}
	assert.InDelta(t, 1000*10*5/4, e.room(10), 150, "and follows the lines when they grow")
}
