package session

import (
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// TestEventQueueOneMessagePerBatch: only the push that finds the queue
// empty owes the session a message; take returns every event in order and
// empties the queue, so the next push owes one again; a recycled batch is
// refilled in place.
func TestEventQueueOneMessagePerBatch(t *testing.T) {
	q := &eventQueue{spares: make(chan []agentEvent, 1)}
	ev := func(i int) agentEvent {
		return agentEvent{turn: 1, ev: messages.Event{Type: messages.EvText, Text: strconv.Itoa(i)}}
	}
	assert.True(t, q.push(ev(1)), "the first push sends the message")
	assert.False(t, q.push(ev(2)), "a push behind it does not")
	assert.False(t, q.push(ev(3)))
	got := q.take()
	require.Equal(t, []agentEvent{ev(1), ev(2), ev(3)}, got)
	assert.Empty(t, q.take(), "take emptied it")
	q.recycle(got)
	assert.Equal(t, agentEvent{}, got[0], "a recycled batch keeps no event")
	assert.True(t, q.push(ev(4)), "the push after a take sends a message again")
	again := q.take()
	require.Equal(t, []agentEvent{ev(4)}, again)
	assert.Same(t, &got[:1][0], &again[0], "the recycled array is refilled")
}

// TestEventQueueKeepsOrderUnderConcurrency: a reader pushing while the
// session takes loses nothing and reorders nothing, and every batch was
// announced by exactly one message.
func TestEventQueueKeepsOrderUnderConcurrency(t *testing.T) {
	q := &eventQueue{spares: make(chan []agentEvent, 4)}
	const n = 20000
	notes := make(chan struct{}, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			if q.push(agentEvent{turn: i}) {
				notes <- struct{}{}
			}
		}
	}()
	next, messagesSeen := 0, 0
	for next < n {
		<-notes
		messagesSeen++
		evs := q.take()
		require.NotEmpty(t, evs, "a message always finds its batch")
		for _, e := range evs {
			require.Equal(t, next, e.turn, "in order, each once")
			next++
		}
		q.recycle(evs)
	}
	wg.Wait()
	assert.Empty(t, notes, "no message without a batch")
	assert.LessOrEqual(t, messagesSeen, n)
}

// TestEventQueueArraysGoBackToTheShared: a queue keeps no array between
// bursts; a handled batch's array goes to the spares its queues share, and
// another session's next burst fills it. A queue without spares makes a
// new array each time.
func TestEventQueueArraysGoBackToTheShared(t *testing.T) {
	spares := make(chan []agentEvent, 2)
	a, b := &eventQueue{spares: spares}, &eventQueue{spares: spares}
	a.push(agentEvent{turn: 1})
	evs := a.take()
	a.recycle(evs)
	assert.Nil(t, a.evs, "the idle queue holds no array")
	b.push(agentEvent{turn: 2})
	got := b.take()
	assert.Same(t, &evs[:1][0], &got[0], "the other queue's burst fills the array given back")

	long := make([]agentEvent, maxSpare+1)
	b.recycle(long)
	assert.Empty(t, spares, "a long burst's array is not kept")

	var lone eventQueue
	lone.push(agentEvent{turn: 3})
	first := lone.take()
	lone.recycle(first)
	lone.push(agentEvent{turn: 4})
	second := lone.take()
	assert.NotSame(t, &first[:1][0], &second[0], "no spares: a new array")
	assert.Equal(t, []agentEvent{{turn: 4}}, second)
}
