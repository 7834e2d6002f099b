package controlplane

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// TestLiveStep is the stream's drop/fill decision for a queued event,
// case by case. An event at the cursor is dropped (it was sent: with "<"
// for "<=" it goes out twice); one past cursor+1 fills from the store.
func TestLiveStep(t *testing.T) {
	cases := []struct {
		name      string
		last      uint64
		known     bool
		from, seq uint64
		want      LiveAction
	}{
		{"first event of a session the all-sessions feed has not seen", 0, false, 7, 7, LiveSend},
		{"unknown session, coalesced text", 0, false, 3, 9, LiveSend},
		{"the next event", 4, true, 5, 5, LiveSend},
		{"the first event after an empty replay", 0, true, 1, 1, LiveSend},
		{"the event at the cursor: replayed already", 5, true, 5, 5, LiveDrop},
		{"an event below the cursor", 5, true, 2, 2, LiveDrop},
		{"the event at cursor 0 of a fresh stream", 0, true, 0, 0, LiveDrop},
		{"coalesced text ending at the cursor", 9, true, 6, 9, LiveDrop},
		{"coalesced text straddling the cursor", 7, true, 6, 9, LiveSend},
		{"coalesced text starting right after the cursor", 5, true, 6, 9, LiveSend},
		{"one event skipped", 4, true, 6, 6, LiveFill},
		{"many events skipped", 2, true, 40, 40, LiveFill},
		{"coalesced text after a gap", 2, true, 5, 9, LiveFill},
		{"a gap from a fresh cursor", 0, true, 2, 2, LiveFill},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, LiveStep(c.last, c.known, c.from, c.seq), "last=%d known=%v from=%d seq=%d", c.last, c.known, c.from, c.seq)
		})
	}
	assert.Equal(t, "invalid", liveInvalid.String())
}

// feedSession writes a session record straight into the fixture's store:
// the test, not the runtime, then appends its events and hands them (or
// not) to the bridge, as the runtime does once they are durable.
func feedSession(t *testing.T, f *fixture) string {
	t.Helper()
	now := time.Now().UTC()
	rec := messages.SessionRecord{SessionID: messages.NewSessionID(), BackendID: "script", Status: messages.StatusRunning,
		CreatedAt: now, UpdatedAt: now, Version: messages.RecordVersion,
		Runs: []messages.Run{{StartedAt: now, OwnerScopeID: DefaultScope}}}
	require.NoError(t, f.d.rt.Store().Create(context.Background(), rec))
	return rec.SessionID
}

// appendEvent makes event seq of sid durable and, when live, hands it to
// the bridge.
func appendEvent(t *testing.T, f *fixture, sid string, seq uint64, live bool) {
	t.Helper()
	ev := pe(seq, messages.EvThinking, false)
	require.NoError(t, f.d.rt.Store().Append(context.Background(), sid, []messages.PersistedEvent{ev}))
	if live {
		f.d.bridge.Listen(sid, ev)
	}
}

// liveGate makes the fixture's streams signal when they go live (their
// replay is over and they read their queue next).
func liveGate(f *fixture) <-chan struct{} {
	live := make(chan struct{})
	var once sync.Once
	f.d.srv.stallLive = func() { once.Do(func() { close(live) }) }
	return live
}

// eventSeqs reads n code_session_event events of sid from c.
func eventSeqs(t *testing.T, c *sseConn, sid string, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for len(seqs) < n {
		ev, ok := c.next(hang)
		require.True(t, ok, "the stream ended or stalled after %v", seqs)
		if ev.event != TopicEvent {
			continue
		}
		d := ev.eventData(t)
		require.Equal(t, sid, d.SessionID)
		require.Equal(t, EventID(sid, d.Seq), ev.id)
		seqs = append(seqs, d.Seq)
	}
	return seqs
}

// TestSSELiveFeedFillsSkippedEvents: events 3-5 are durable but never
// reach the bridge; event 6 does. The stream reads 3-5 from the store
// before 6, and sends nothing twice. Fails with the gap fill disabled.
func TestSSELiveFeedFillsSkippedEvents(t *testing.T) {
	for _, feed := range []string{"one session", "every session"} {
		t.Run(feed, func(t *testing.T) {
			f := newFixture(t)
			sid := feedSession(t, f)
			live := liveGate(f)
			query := "topics=" + TopicEvent
			if feed == "one session" {
				query += "&sessionId=" + sid + "&afterSeq=0"
			}
			c := f.sse(query, "")
			require.Equal(t, http.StatusOK, c.status)
			<-live

			appendEvent(t, f, sid, 1, true)
			appendEvent(t, f, sid, 2, true)
			for seq := uint64(3); seq <= 5; seq++ {
				appendEvent(t, f, sid, seq, false) // skipped by the live seam
			}
			appendEvent(t, f, sid, 6, true)
			appendEvent(t, f, sid, 7, true)
			assert.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7}, eventSeqs(t, c, sid, 7))
		})
	}
}

// TestSSEEventBothReplayedAndQueuedIsSentOnce: an event made durable and
// published between the stream's subscription and its replay is both
// replayed and queued; the queued copy is at the cursor and dropped. Fails
// when the drop compares with "<" instead of "<=".
func TestSSEEventBothReplayedAndQueuedIsSentOnce(t *testing.T) {
	f := newFixture(t)
	sid := feedSession(t, f)
	for seq := uint64(1); seq <= 3; seq++ {
		appendEvent(t, f, sid, seq, true)
	}
	f.d.srv.afterSubscribe = func() { appendEvent(t, f, sid, 4, true) }
	live := liveGate(f)
	c := f.sse("topics="+TopicEvent+"&sessionId="+sid+"&afterSeq=2", "")
	require.Equal(t, http.StatusOK, c.status)
	<-live
	appendEvent(t, f, sid, 5, true)
	assert.Equal(t, []uint64{3, 4, 5}, eventSeqs(t, c, sid, 3))
}

// TestFeedSeesOnlyDurableEvents is the contract the feed stands on: the
// runtime hands the listener an event only once the store has it (so a
// stream sends it at once, and a gap before it is readable). A runtime
// that published before its write was durable fails here.
func TestFeedSeesOnlyDurableEvents(t *testing.T) {
	var mu sync.Mutex
	var seen int
	var early []string
	var f *fixture
	ready := make(chan struct{})
	f = newFixture(t, func(o *DaemonOptions) {
		o.OnEvent = func(sid string, ev messages.PersistedEvent) {
			<-ready
			last, err := f.d.rt.Store().LastSeq(context.Background(), sid)
			mu.Lock()
			defer mu.Unlock()
			seen++
			if err != nil || last < ev.Seq {
				early = append(early, EventID(sid, ev.Seq))
			}
		}
	})
	close(ready)
	st := f.start("STREAM it")
	r := f.read(st.SessionID)
	require.Equal(t, messages.KindTurnComplete, r.Kind)
	mu.Lock()
	defer mu.Unlock()
	require.NotZero(t, seen)
	assert.Empty(t, early, "events handed to the feed before the store had them")
}
