package controlplane

import (
	"bufio"
	"context"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// readCountingStore counts every read of a store: records, listings,
// events and last seqs. It keeps the stack of each read since the last
// reset, so a failing count says who read.
type readCountingStore struct {
	store.Store
	reads atomic.Int64

	mu     sync.Mutex
	stacks []string
}

func (s *readCountingStore) read() {
	s.reads.Add(1)
	s.mu.Lock()
	s.stacks = append(s.stacks, string(debug.Stack()))
	s.mu.Unlock()
}

// reset zeroes the count and forgets the stacks.
func (s *readCountingStore) reset() {
	s.mu.Lock()
	s.reads.Store(0)
	s.stacks = nil
	s.mu.Unlock()
}

// who returns the stacks of the reads since the last reset.
func (s *readCountingStore) who() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.stacks, "\n")
}

func (s *readCountingStore) GetMeta(ctx context.Context, sid string) (messages.SessionRecord, error) {
	s.read()
	return s.Store.GetMeta(ctx, sid)
}

func (s *readCountingStore) List(ctx context.Context) ([]messages.SessionRecord, error) {
	s.read()
	return s.Store.List(ctx)
}

func (s *readCountingStore) ReadEvents(ctx context.Context, sid string, after uint64, limit int) ([]messages.PersistedEvent, error) {
	s.read()
	return s.Store.ReadEvents(ctx, sid, after, limit)
}

func (s *readCountingStore) LastSeq(ctx context.Context, sid string) (uint64, error) {
	s.read()
	return s.Store.LastSeq(ctx, sid)
}

// sseLines opens GET /api/events?query and sends every line of the stream
// (heartbeat comments included) to the returned channel until it ends.
func (f *fixture) sseLines(query string) <-chan string {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/events?"+query, nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	require.Equal(f.t, http.StatusOK, res.StatusCode)
	lines, done := make(chan string, 4096), make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		defer res.Body.Close()
		br := bufio.NewReader(res.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			select {
			case lines <- strings.TrimRight(line, "\n"):
			case <-ctx.Done():
				return
			}
		}
	}()
	f.t.Cleanup(func() { cancel(); <-done })
	return lines
}

// TestSSELiveDeliveryReadsNothingFromTheStore holds the feed to being
// woken by the runtime's event seam: once the streams are live, delivering
// events reads nothing from the store, neither per event (as the old
// stream's LastSeq wait for each event to be durable did) nor on a timer
// while the feed is idle (each stream is watched across 20 of its
// heartbeats after the last event, so a poll at any interval up to 20
// heartbeats is seen). Counted in store reads per delivered event, not
// in time. Three streams: two on one session each, one on every session.
// The runtime's own boot work that reads the store (the learning loop's
// outcome reconcile) is waited for first: it is no read of the feed's.
func TestSSELiveDeliveryReadsNothingFromTheStore(t *testing.T) {
	counting := &readCountingStore{Store: store.NewMemory()}
	f := newFixture(t, func(o *DaemonOptions) {
		o.Store = counting
		o.Server.Heartbeat = 5 * time.Millisecond
	})
	// the runtime's boot reconciles the learning loop's outcomes off its
	// own goroutine (one List): on a loaded machine it ran as late as the
	// counted delivery below and was counted there once
	if lp := f.d.rt.Learning(); lp != nil {
		lp.Wait()
	}
	sids := []string{feedSession(t, f), feedSession(t, f)}
	var live sync.WaitGroup
	live.Add(3)
	f.d.srv.stallLive = live.Done
	streams := []<-chan string{
		f.sseLines("topics=" + TopicEvent + "&sessionId=" + sids[0]),
		f.sseLines("topics=" + TopicEvent + "&sessionId=" + sids[1]),
		f.sseLines("topics=" + TopicEvent),
	}
	live.Wait()

	// expect reads every stream's lines up to the id line of want; it
	// returns how many heartbeats the stream sent on the way
	expect := func(c <-chan string, want string) int {
		t.Helper()
		beats := 0
		timeout := time.After(hang)
		for {
			select {
			case line, ok := <-c:
				require.True(t, ok, "the stream ended before %s", want)
				switch {
				case line == ": heartbeat":
					beats++
				case line == "id: "+want:
					return beats
				case strings.HasPrefix(line, "id: "):
					require.Failf(t, "an event out of order", "got %s waiting for %s", line, want)
				}
			case <-timeout:
				require.Failf(t, "stalled", "no %s", want)
			}
		}
	}
	// the first event of each session: the all-sessions stream looks up,
	// once per session, whether its scope sees it; from then on nothing
	for i, sid := range sids {
		appendEvent(t, f, sid, 1, true)
		expect(streams[i], EventID(sid, 1))
		expect(streams[2], EventID(sid, 1))
	}
	counting.reset()

	const events = 100
	for seq := uint64(2); seq <= events; seq++ {
		for i, sid := range sids {
			appendEvent(t, f, sid, seq, true) // a write: not counted
			expect(streams[i], EventID(sid, seq))
			expect(streams[2], EventID(sid, seq))
		}
	}
	assert.Zero(t, counting.reads.Load(), "store reads while the live feed delivered %d events to 3 streams; read by:\n%s", 2*(events-1)*2, counting.who())

	// idle: each stream sends 20 heartbeats and still nothing is read
	counting.reset()
	for _, c := range streams {
		for beats := 0; beats < 20; {
			select {
			case line, ok := <-c:
				require.True(t, ok, "the stream ended while idle")
				if line == ": heartbeat" {
					beats++
				}
			case <-time.After(hang):
				require.Fail(t, "no heartbeat")
			}
		}
	}
	assert.Zero(t, counting.reads.Load(), "store reads by an idle live feed; read by:\n%s", counting.who())
}
