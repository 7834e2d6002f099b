package bench

import (
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
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

// TestFeedSubscribersInProcess runs the suite with the subscribers as
// goroutines of this process (--subscribers-in-process): the same checks
// pass, and the slow subscriber is dropped or cut.
func TestFeedSubscribersInProcess(t *testing.T) {
	t.Parallel()
	o := small(t)
	o.SubscribersInProcess = true
	res := run(t, SuiteFeed, o)
	requirePassed(t, res)
	rows := map[string]float64{}
	for _, r := range res.Rows {
		rows[r.Figure] = r.Value
	}
	assert.Zero(t, rows["events missed by subscribers that kept up"])
	slow := rows["slow subscribers dropped (queue full, told to reconnect; of 1)"] + rows["slow subscribers cut by the write deadline (of 1)"]
	assert.Equal(t, 1.0, slow, "%+v", rows)
	assert.Positive(t, rows["delivery latency p50"])
}

// TestFeedFailsWhenASubscriberMissesAnEventInEitherMode: a server that
// skips one event of one subscriber fails the run whether the subscribers
// read in a child process or in this one.
func TestFeedFailsWhenASubscriberMissesAnEventInEitherMode(t *testing.T) {
	t.Parallel()
	for _, inProcess := range []bool{false, true} {
		t.Run(fmt.Sprintf("in-process=%v", inProcess), func(t *testing.T) {
			t.Parallel()
			o := small(t)
			o.SlowSubscribers, o.FeedEvents, o.WrapHandler, o.SubscribersInProcess = -1, 200, dropOneFrame, inProcess
			res := run(t, SuiteFeed, o)
			assert.Equal(t, []string{"subscribers that kept up got every event"}, failed(res))
			for _, c := range res.Checks {
				if !c.OK {
					assert.Contains(t, c.Detail, "a gap of 1")
				}
			}
		})
	}
}

// childFeedRun is a small run of the raw fan-out with its subscribers in a
// child process (this test binary, re-run through TestMain).
func childFeedRun(t *testing.T, events int) (*feedRun, *rawTarget, *progress) {
	t.Helper()
	o := small(t)
	o.SlowSubscribers, o.FeedEvents, o.Subscribers = 1, events, 4
	o = o.withDefaults()
	sids := make([]string, feedSessions)
	for i := range sids {
		sids[i] = messages.NewSessionID()
	}
	rt := newRawTarget()
	t.Cleanup(func() { _ = rt.close(context.Background()) })
	return newFeedRun(o, sids), rt, newProgress(o, SuiteFeed)
}

// requireGone fails unless process pid no longer exists (it was waited
// for: not even a zombie is left).
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.NotZero(t, pid, "no child process was started")
	err := syscall.Kill(pid, 0)
	require.ErrorIs(t, err, syscall.ESRCH, "the subscribers' child process %d outlived the run", pid)
}

// TestFeedSubscribersRunInAChildProcess: by default the subscribers are
// another process, which reports every event back (the checks and the
// latency come from its report), and is gone when the run returns.
func TestFeedSubscribersRunInAChildProcess(t *testing.T) {
	t.Parallel()
	f, rt, p := childFeedRun(t, 1500)
	out, err := f.run(context.Background(), rt, p)
	require.NoError(t, err)
	require.NotEqual(t, os.Getpid(), f.childPID)
	requireGone(t, f.childPID)
	assert.Zero(t, out.missed)
	assert.Empty(t, out.disorder)
	assert.Empty(t, out.errs)
	assert.Equal(t, 4*(1500-f.warm), out.lat.n, "a latency per fast subscriber and event past the warm-up")
	assert.Positive(t, out.lat.p50)
	assert.Equal(t, 1500-f.warm, out.last.n)
	// more than its queue and socket buffers hold, however fast the machine
	assert.Equal(t, 1, out.slowDropd+out.slowCut, "the slow subscriber reads nothing while 1,500 events go by")
}

// TestFeedChildThatDiesFailsTheRun: a child that exits mid-run fails the
// run at once with an error that says so (its exit status, its stderr),
// not a hang, and leaves no process behind.
func TestFeedChildThatDiesFailsTheRun(t *testing.T) {
	t.Parallel()
	f, rt, p := childFeedRun(t, 1500)
	f.childEnv = []string{feedChildExitAfterEnv + "=50"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // only stops a hang
	defer cancel()
	_, err := f.run(ctx, rt, p)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the run hung until the test's bound")
	assert.Contains(t, err.Error(), "the subscribers' child process")
	assert.Contains(t, err.Error(), "exit status 3")
	assert.Contains(t, err.Error(), "exiting after 50 events", "the child's stderr")
	requireGone(t, f.childPID)
}

// TestFeedChildGoneWhenTheRunIsCancelled: a run cancelled while it
// publishes returns, and its child process is gone.
func TestFeedChildGoneWhenTheRunIsCancelled(t *testing.T) {
	t.Parallel()
	f, rt, p := childFeedRun(t, 100000)
	f.o.Rate = 1000 // 100 s of publishing: cancelled long before
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// cancelled from the publishing itself, so the child is running by
	// then however slowly a loaded machine started it
	_, err := f.run(ctx, &cancelWhilePublishing{rawTarget: rt, after: 50, cancel: cancel}, p)
	require.ErrorIs(t, err, context.Canceled)
	requireGone(t, f.childPID)
}

// cancelWhilePublishing is a feed target that cancels the run once it has
// been handed after events.
type cancelWhilePublishing struct {
	*rawTarget
	after  int64
	n      atomic.Int64
	cancel context.CancelFunc
}

func (c *cancelWhilePublishing) publish(ctx context.Context, sid string, ev messages.PersistedEvent, at *atomic.Int64) error {
	if c.n.Add(1) == c.after {
		c.cancel()
	}
	return c.rawTarget.publish(ctx, sid, ev, at)
}

// TestFeedChildExitsWhenItsParentIsGone: the child serves its parent over
// stdin; when that ends (the parent died without killing it) it exits.
func TestFeedChildExitsWhenItsParentIsGone(t *testing.T) {
	t.Parallel()
	rt := newRawTarget()
	srv := httptest.NewServer(rt.handler())
	defer srv.Close()
	defer rt.close(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- serveFeedChild(inR, outW, io.Discard) }()
	sids := []string{messages.NewSessionID(), messages.NewSessionID()}
	require.NoError(t, gob.NewEncoder(inW).Encode(childConfig{FastURL: srv.URL, SlowURL: srv.URL, Token: feedToken, Fast: 2, Slow: 1, Sids: sids, Events: 10, Rate: 100}))
	dec := gob.NewDecoder(outR)
	for {
		var m childMsg
		require.NoError(t, dec.Decode(&m))
		require.NotEqual(t, "error", m.Kind, m.Err)
		if m.Kind == "ready" {
			break
		}
	}
	go io.Copy(io.Discard, outR) // its heartbeats
	inW.Close()                  // the parent is gone
	select {
	case code := <-done:
		assert.NotZero(t, code)
	case <-time.After(time.Minute): // only stops a hang
		t.Fatal("the child did not end when its stdin did")
	}
}

// TestFeedChildThatFallsSilentFailsTheRun: a child that stops talking (a
// hang) fails the run once it has been silent too long, and is killed.
func TestFeedChildThatFallsSilentFailsTheRun(t *testing.T) {
	t.Parallel()
	f, rt, p := childFeedRun(t, 300)
	f.childEnv = []string{feedChildHangEnv + "=1"}
	f.childSilence = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // only stops a hang
	defer cancel()
	_, err := f.run(ctx, rt, p)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the run hung until the test's bound")
	assert.Contains(t, err.Error(), "said nothing for")
	assert.Contains(t, err.Error(), "silent from here on", "the child's stderr")
	requireGone(t, f.childPID)
}
