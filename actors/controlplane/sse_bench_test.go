package controlplane

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// BenchmarkFeedFanOut times one event from the publisher to every one of
// N subscribers reading it, through the daemon's /api/events (sse) and
// through a plain net/http fan-out of the same frames (raw), in the same
// run: compare the two ns/op at each N (a ratio; never a verdict).
func BenchmarkFeedFanOut(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("sse/subs=%d", n), func(b *testing.B) { benchFanOut(b, n, true) })
		b.Run(fmt.Sprintf("raw/subs=%d", n), func(b *testing.B) { benchFanOut(b, n, false) })
	}
}

func benchFanOut(b *testing.B, n int, sse bool) {
	var h http.Handler
	var publish func(seq uint64)
	sid := messages.NewSessionID()
	if sse {
		cfg := config.Default()
		cfg.Home = b.TempDir()
		cfg.DefaultBackend = script.ID
		d, err := NewDaemon(DaemonOptions{Config: cfg, Token: testToken, Store: store.NewMemory(),
			Backends: transports.NewRegistry(script.New()), Registry: prometheus.NewRegistry(), Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Shutdown(context.Background()) })
		now := time.Now().UTC()
		rec := messages.SessionRecord{SessionID: sid, BackendID: script.ID, Status: messages.StatusRunning,
			CreatedAt: now, UpdatedAt: now, Version: messages.RecordVersion, Runs: []messages.Run{{StartedAt: now, OwnerScopeID: DefaultScope}}}
		if err := d.rt.Store().Create(context.Background(), rec); err != nil {
			b.Fatal(err)
		}
		h = d.Handler()
		publish = func(seq uint64) {
			ev := pe(seq, messages.EvThinking, false)
			if err := d.rt.Store().Append(context.Background(), sid, []messages.PersistedEvent{ev}); err != nil {
				b.Fatal(err)
			}
			d.bridge.Listen(sid, ev)
		}
	} else {
		raw := &rawFanOut{subs: map[chan []byte]struct{}{}}
		h, publish = raw, func(seq uint64) {
			data, err := json.Marshal(EventData{SessionID: sid, PersistedEvent: pe(seq, messages.EvThinking, false)})
			if err != nil {
				b.Fatal(err)
			}
			raw.publish([]byte("id: " + EventID(sid, seq) + "\nevent: " + TopicEvent + "\ndata: " + string(data) + "\n\n"))
		}
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)

	got := make(chan struct{}, n*64)
	var ready sync.WaitGroup
	ready.Add(n)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	for range n {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events?topics="+TopicEvent+"&sessionId="+sid, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		go func() {
			res, err := client.Do(req)
			if err != nil {
				ready.Done()
				return
			}
			defer res.Body.Close()
			r := bufio.NewReader(res.Body)
			once := false
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return
				}
				switch {
				case !once && strings.HasPrefix(string(line), "retry:"):
					once = true
					ready.Done()
				case len(line) > 4 && string(line[:4]) == "id: ":
					got <- struct{}{}
				}
			}
		}()
	}
	ready.Wait()
	b.ResetTimer()
	for i := range b.N {
		publish(uint64(i + 1))
		for range n {
			<-got
		}
	}
	b.StopTimer()
	cancel()
}

// rawFanOut is the baseline: each frame offered to every subscriber's
// queue, each stream writing and flushing it.
type rawFanOut struct {
	mu   sync.Mutex
	subs map[chan []byte]struct{}
}

func (f *rawFanOut) publish(frame []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- frame:
		default:
		}
	}
}

func (f *rawFanOut) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, DefaultQueueSize)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	defer func() { f.mu.Lock(); delete(f.subs, ch); f.mu.Unlock() }()
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	if _, err := io.WriteString(w, "retry: 1000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	for {
		select {
		case frame := <-ch:
			if _, err := w.Write(frame); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// BenchmarkStreamWake times one wake-up of a stream's select (an item
// handed over, the stream parked again) with its heartbeat on a Ticker's
// channel, on the plain channel heartbeat returns beside the context's
// Done, and on that channel alone, which the context's end rings too (the
// stream's select today), in the same run: a select that blocks on a
// timer channel updates the timer heap on each park and wake-up, and each
// channel a select names is locked and queued on at each park. Compare
// the ns/op (a ratio; never a verdict).
func BenchmarkStreamWake(b *testing.B) {
	run := func(b *testing.B, beat <-chan struct{}, tick <-chan time.Time, withDone bool, ring func()) {
		ch, ack := make(chan *item, 1), make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var done <-chan struct{}
		if withDone {
			done = ctx.Done()
		} else {
			context.AfterFunc(ctx, ring) // the deferred cancel ends the stream
		}
		go func() {
			for {
				select {
				case <-ch:
					ack <- struct{}{}
				case <-beat:
					if ctx.Err() != nil {
						return
					}
				case <-tick:
				case <-done:
					return
				}
			}
		}()
		it := &item{}
		b.ResetTimer()
		for range b.N {
			ch <- it
			<-ack
		}
	}
	b.Run("ticker", func(b *testing.B) {
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		run(b, nil, t.C, true, nil)
	})
	b.Run("func-timer", func(b *testing.B) {
		beat, t := heartbeat(time.Hour)
		defer t.Stop()
		run(b, beat, nil, true, nil)
	})
	b.Run("func-timer-rung-at-end", func(b *testing.B) {
		beat, t := heartbeat(time.Hour)
		defer t.Stop()
		run(b, beat, nil, false, t.ring)
	})
}
