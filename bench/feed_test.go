package bench

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/messages"
)

// TestFeedSubscriberAccountsEveryEvent feeds the bench's subscriber a
// stream by hand: events in order are counted with their latency (the
// warm-up's without), a duplicate and a gap are reported, an unknown
// session is reported, and a reconnect event marks it dropped with its
// reason.
func TestFeedSubscriberAccountsEveryEvent(t *testing.T) {
	sids := []string{messages.NewSessionID(), messages.NewSessionID()}
	f := newFeedRun(Options{FeedEvents: 8, Rate: 1}, sids) // 4 events a session, 1 of warm-up
	require.Equal(t, 1, f.warm)
	at := time.Now().Add(-time.Second).UnixNano()
	for g := range sids {
		for seq := 2; seq <= 4; seq++ {
			f.pubAt[g][seq].Store(at)
		}
	}
	frame := func(sid string, seq uint64) string {
		return fmt.Sprintf("id: %s\nevent: %s\ndata: {}\n\n", controlplane.EventID(sid, seq), controlplane.TopicEvent)
	}
	var stream strings.Builder
	stream.WriteString("retry: 1000\n\n")
	for _, seq := range []uint64{1, 2, 3, 4} {
		stream.WriteString(frame(sids[0], seq))
	}
	stream.WriteString(frame(sids[1], 1))
	stream.WriteString(frame(sids[1], 1)) // a duplicate
	stream.WriteString(frame(sids[1], 3)) // a gap of 1
	stream.WriteString(frame(messages.NewSessionID(), 1))
	stream.WriteString(": heartbeat\n\n")
	stream.WriteString("event: " + controlplane.ReconnectEvent + "\ndata: {\"reason\":\"slow\",\"lastEventId\":\"x\"}\n\n")

	var progress atomic.Int64
	s := &subscriber{next: make([]uint64, len(sids)), progress: &progress}
	ready := 0
	f.consume(strings.NewReader(stream.String()), s, func() { ready++ })
	assert.Equal(t, 1, ready)
	assert.Equal(t, int64(6), s.received.Load(), "4 + 1 + the one after the gap")
	assert.Equal(t, int64(1), s.finals.Load(), "the first session's last event")
	assert.Len(t, s.lat, 4, "seqs 2-4 of the first session and 3 of the second: not the warm-up's")
	for _, d := range s.lat {
		assert.GreaterOrEqual(t, d, time.Second)
	}
	require.Len(t, s.disorder, 3)
	assert.Contains(t, s.disorder[0], "seq 1 again (duplicate)")
	assert.Contains(t, s.disorder[1], "seq 3 after 1 (a gap of 1)")
	assert.Contains(t, s.disorder[2], "unknown event")
	assert.True(t, s.dropped.Load())
	assert.Equal(t, "slow", s.reason)
	assert.True(t, s.ended.Load())
	assert.NoError(t, s.err)
}

// TestFeedCurve runs the curve at two subscriber counts and finds, at
// each, both fan-outs' latency, losses, drops and load side by side.
func TestFeedCurve(t *testing.T) {
	t.Parallel()
	o := small(t)
	o.SlowSubscribers, o.FeedEvents, o.FeedCurve = -1, 300, []int{2, 5}
	res := run(t, SuiteFeed, o)
	requirePassed(t, res)
	rows := map[string]Row{}
	for _, r := range res.Rows {
		rows[r.Figure] = r
	}
	for _, fig := range []string{"an event's first read, p50 over events", "an event's last read (all subscribers have it), p50 over events", "an event's last read, p99 over events"} {
		r, ok := rows[fig]
		require.True(t, ok, "no row %q", fig)
		require.NotNil(t, r.Baseline, "%s: no raw fan-out beside it", fig)
		assert.Positive(t, r.Value, fig)
	}
	for _, n := range o.FeedCurve {
		for _, fig := range []string{"delivery latency p50", "delivery latency p99", "events lost by subscribers that kept up", "subscribers dropped or cut", "load average (1 min) at the start"} {
			r, ok := rows[fmt.Sprintf("curve, %d subscribers: %s", n, fig)]
			require.True(t, ok, "no row %q at %d subscribers", fig, n)
			require.NotNil(t, r.Baseline, "%s at %d subscribers: no raw fan-out beside it", fig, n)
		}
		assert.Zero(t, rows[fmt.Sprintf("curve, %d subscribers: events lost by subscribers that kept up", n)].Value)
		assert.Positive(t, rows[fmt.Sprintf("curve, %d subscribers: delivery latency p50", n)].Value)
	}
}

// TestFeedSpreadIsTheFirstAndLastReadOfEachEvent: per event past the
// warm-up, the first and the last subscriber's read of it, from its
// publish; a subscriber that did not read an event is left out of it.
func TestFeedSpreadIsTheFirstAndLastReadOfEachEvent(t *testing.T) {
	sids := []string{messages.NewSessionID(), messages.NewSessionID()}
	f := newFeedRun(Options{FeedEvents: 5, Rate: 1}, sids) // events 0-4: (session, seq) 0:1 1:1 0:2 1:2 0:3; event 0 is the warm-up, 4 never published
	require.Equal(t, 1, f.warm)
	const ms = int64(time.Millisecond)
	base := time.Now().UnixNano()
	var progress atomic.Int64
	subs := []*subscriber{
		{next: make([]uint64, 2), progress: &progress, readAt: make([]int64, 6)},
		{next: make([]uint64, 2), progress: &progress, readAt: make([]int64, 6)},
	}
	f.pubAt[1][1].Store(base) // event 1
	f.pubAt[0][2].Store(base) // event 2
	f.pubAt[1][2].Store(base) // event 3
	read := func(s *subscriber, sid string, seq uint64, after int64) {
		f.received(s, []byte(controlplane.EventID(sid, seq)), base+after)
	}
	read(subs[0], sids[0], 1, 50*ms) // the warm-up's: left out
	read(subs[0], sids[1], 1, 2*ms)
	read(subs[1], sids[1], 1, 9*ms)
	read(subs[0], sids[0], 2, 4*ms)
	read(subs[1], sids[0], 2, 3*ms)
	read(subs[1], sids[1], 2, 7*ms) // subs[0] never reads event 3
	first, last := f.spread(subs)
	assert.Equal(t, 3, first.n)
	assert.Equal(t, 3, last.n)
	assert.Equal(t, 3*time.Millisecond, first.p50, "firsts 2, 3, 7 ms")
	assert.Equal(t, 7*time.Millisecond, last.p50, "lasts 9, 4, 7 ms")
	assert.Equal(t, 9*time.Millisecond, last.mx)
}
