package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// feedSessions is how many sessions the feed's events are spread over.
const feedSessions = 8

// Socket buffers of the deliberately slow subscribers: small, so that a
// subscriber that stops reading fills them after a few dozen events and
// its queue on the server side fills next.
const (
	slowServerSendBuf = 8 << 10
	slowClientRecvBuf = 4 << 10
)

// feedToken is the bearer token of the feed's control plane.
const feedToken = "bench-feed-token"

// feedTarget is what subscribers connect to and the publisher feeds: the
// control plane, or the raw fan-out baseline.
type feedTarget interface {
	// publish hands one event of session sid to the fan-out; when at is
	// not nil it stores the time (unix ns) the fan-out was handed the
	// event, the start of its delivery latency: the control plane's after
	// the event is durable, as the runtime hands it to the bridge.
	publish(ctx context.Context, sid string, ev messages.PersistedEvent, at *atomic.Int64) error
	// handler serves the subscribers.
	handler() http.Handler
	// dropped is how many subscribers the fan-out dropped for being slow.
	dropped() float64
	close(ctx context.Context) error
}

// feedRun is one fan-out measured: S subscribers that read as fast as
// they can and D that never read until the publishing is over, fed at a
// target rate.
type feedRun struct {
	o         Options
	sids      []string
	perSess   int
	lastSeq   []uint64         // per session, the seq of its last event
	finals    int64            // sessions with at least one event
	pubAt     [][]atomic.Int64 // [session][seq] publish time, unix ns; 0 for the warm-up's
	published int
	// warm is how many of the published events (the first ones) are the
	// warm-up: delivered and checked like the others, left out of the
	// latency (connections, buffers and the heap reach their working size)
	warm    int
	byID    map[string]int // session id -> index in sids
	pubSpan time.Duration
	// childEnv is added to the subscribers' child process's environment
	// (tests: feedChildExitAfterEnv); childPID is its pid once started;
	// childSilence is how long it may say nothing before it is found hung
	childEnv     []string
	childPID     int
	childSilence time.Duration // 0: childSilence
}

// subscriber is one SSE client's account of what it received.
type subscriber struct {
	slow     bool
	received atomic.Int64
	finals   atomic.Int64 // sessions whose last event it received
	dropped  atomic.Bool  // it got a reconnect event
	ended    atomic.Bool  // its stream ended (dropped, or the server went away)
	progress *atomic.Int64

	// owned by the subscriber's goroutine until it is done
	next     []uint64 // per session (index in sids), the seq it expects next
	disorder []string // gaps, duplicates, reorderings (first few)
	reason   string
	err      error
	lat      []time.Duration
	// readAt is when it read each event's id line (unix ns), by the
	// event's place in the publishing order (0: not read); nil for a slow
	// subscriber
	readAt []int64
}

func (s *subscriber) note(format string, args ...any) {
	if len(s.disorder) < 3 {
		s.disorder = append(s.disorder, fmt.Sprintf(format, args...))
	}
}

// consume reads one SSE stream until it ends or stop is closed; ready is
// called once the stream is live (its "retry" line came: the server
// registers the subscription before it writes that line). It is the
// lightest reader that still checks every event: one goroutine, lines
// read in place from a 64 KiB buffer, dispatched on their first byte,
// and nothing allocated per event (the session is looked up by the id's
// bytes, the seq parsed by hand); only a reconnect event's data is
// decoded. An event's latency is the time of reading its id line less
// the time the publisher handed it to the fan-out, both on the wall clock
// (unix ns): the subscribers may be another process on the same machine.
func (f *feedRun) consume(body io.Reader, s *subscriber, ready func()) {
	r := bufio.NewReaderSize(body, 64<<10)
	reconnect := false // the current event is a reconnect
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			// a reset, or a chunk cut short, is how a slow subscriber
			// learns the write deadline cut it (the server closed the
			// connection mid-write): that is the cut, counted as one, not a
			// broken stream
			cut := s.slow && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF))
			if !cut && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) && !errors.Is(err, net.ErrClosed) {
				s.err = err
			}
			s.ended.Store(true)
			return
		}
		if len(line) <= 1 { // the blank line that ends an event
			reconnect = false
			continue
		}
		switch line[0] {
		case 'i': // id: <sid>:<seq>
			if bytes.HasPrefix(line, idPrefix) {
				f.received(s, line[len(idPrefix):len(line)-1], time.Now().UnixNano())
			}
		case 'e': // event: <name>
			if bytes.HasPrefix(line, reconnectLine) {
				reconnect = true
				s.dropped.Store(true)
			}
		case 'd': // data: <json>
			if reconnect && bytes.HasPrefix(line, dataPrefix) {
				var rd controlplane.ReconnectData
				if json.Unmarshal(line[len(dataPrefix):], &rd) == nil {
					s.reason = rd.Reason
				}
			}
		case 'r': // retry: <ms>
			if bytes.HasPrefix(line, retryPrefix) {
				ready()
			}
		}
	}
}

var (
	idPrefix      = []byte("id: ")
	dataPrefix    = []byte("data: ")
	retryPrefix   = []byte("retry:")
	reconnectLine = []byte("event: " + controlplane.ReconnectEvent + "\n")
)

// received accounts one event id (sid:seq) read at now (unix ns).
func (f *feedRun) received(s *subscriber, id []byte, now int64) {
	colon := bytes.LastIndexByte(id, ':')
	g, known := -1, false
	if colon > 0 {
		g, known = f.byID[string(id[:colon])] // no allocation: a map lookup by bytes
	}
	seq, ok := parseSeq(id[colon+1:])
	if !known || !ok || seq == 0 || seq > uint64(f.perSess) {
		s.note("unknown event %q", id)
		return
	}
	sid := f.sids[g]
	want := s.next[g]
	if want == 0 {
		want = 1
	}
	switch {
	case seq == want:
	case seq < want:
		s.note("%s: seq %d again (duplicate)", sid[:12], seq)
		return
	default:
		s.note("%s: seq %d after %d (a gap of %d)", sid[:12], seq, want-1, seq-want)
	}
	s.next[g] = seq + 1
	if seq == f.lastSeq[g] {
		s.finals.Add(1)
	}
	if s.readAt != nil {
		s.readAt[(seq-1)*uint64(len(f.sids))+uint64(g)] = now
	}
	s.received.Add(1)
	s.progress.Add(1)
	if at := f.pubAt[g][seq].Load(); !s.slow && at != 0 {
		s.lat = append(s.lat, time.Duration(now-at))
	}
}

// parseSeq parses a decimal seq without allocating.
func parseSeq(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// feedOutcome is what one fan-out measured.
type feedOutcome struct {
	lat summary
	// first and last are, per event, the first and the last subscriber's
	// read of it (spread)
	first, last            summary
	rate                   float64 // events published per second
	deliveries             float64 // deliveries to fast subscribers per second
	fastDropped, slowDropd int
	fastCut, slowCut       int // streams that ended early without a reconnect event
	missed                 int // events missing for fast subscribers not dropped
	disorder               []string
	errs                   []string
	serverDropped          float64
	slowReasons            map[string]int
	// load is the machine's 1-minute load average when the run started
	// (NaN where /proc/loadavg is not there): a figure measured at load 20
	// on 2 cores is the machine's more than the feed's
	load float64
}

// loadAverage is the 1-minute load average, NaN when unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// run serves t on two loopback listeners (the slow subscribers' with a
// small send buffer), connects the subscribers (in a child process, or in
// this one with Options.SubscribersInProcess), publishes, and accounts.
func (f *feedRun) run(ctx context.Context, t feedTarget, p *progress) (feedOutcome, error) {
	out := feedOutcome{load: loadAverage()}
	h := t.handler()
	fastLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return out, err
	}
	slowLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fastLn.Close()
		return out, err
	}
	fastSrv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	slowSrv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go fastSrv.Serve(fastLn)
	go slowSrv.Serve(smallSendBuf{slowLn})
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = fastSrv.Shutdown(sctx)
		_ = slowSrv.Shutdown(sctx)
		fastSrv.Close()
		slowSrv.Close()
	}()

	var set subscriberSet
	if f.o.SubscribersInProcess {
		set = newLocalSubs(f, feedToken, true)
	} else {
		set = newChildSubs(f)
	}
	// runs before the servers' shutdown: the streams end first, and no
	// child process outlives the run on any path
	defer set.close()
	n := f.o.Subscribers + f.o.SlowSubscribers
	if err := set.start(ctx, "http://"+fastLn.Addr().String(), "http://"+slowLn.Addr().String()); err != nil {
		return out, err
	}
	p.printf("%d subscribers live (%d slow, %s); publishing %d events at %.0f/s", n, f.o.SlowSubscribers, set.where(), f.published, f.o.Rate)

	// publish at the target rate, spread over the sessions
	seqs := make([]uint64, len(f.sids))
	interval := time.Duration(float64(time.Second) / f.o.Rate)
	t0 := time.Now()
	for i := range f.published {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return out, ctx.Err()
			}
		}
		g := i % len(f.sids)
		seqs[g]++
		ev := feedEvent(seqs[g], i)
		ev.At = time.Now().UTC()
		var at *atomic.Int64 // the warm-up's events have no latency
		if i >= f.warm {
			at = &f.pubAt[g][seqs[g]]
		}
		if err := t.publish(ctx, f.sids[g], ev, at); err != nil {
			return out, fmt.Errorf("publish: %w", err)
		}
	}
	f.pubSpan = time.Since(t0)

	fastDelivered, err := set.awaitFast(ctx)
	if err != nil {
		return out, err
	}
	deliveredSpan := time.Since(t0)
	p.printf("published in %.1fs; fast subscribers done after %.1fs", f.pubSpan.Seconds(), deliveredSpan.Seconds())
	if err := set.awaitSlow(ctx); err != nil {
		return out, err
	}
	out.serverDropped = t.dropped()
	p.printf("slow subscribers done")
	subs, err := set.finish(ctx)
	if err != nil {
		return out, err
	}
	p.printf("subscribers gone")

	out.rate = rate(f.published, f.pubSpan)
	out.deliveries = rate(int(fastDelivered), deliveredSpan)
	out.slowReasons = map[string]int{}
	var all []time.Duration
	for i, s := range subs {
		if s.err != nil {
			out.errs = append(out.errs, fmt.Sprintf("subscriber %d: %v", i, s.err))
		}
		for _, d := range s.disorder {
			out.disorder = append(out.disorder, fmt.Sprintf("subscriber %d: %s", i, d))
		}
		got := int(s.received.Load())
		cut := !s.dropped.Load() && s.ended.Load() && got < f.published
		if s.slow {
			switch {
			case s.dropped.Load():
				out.slowDropd++
				out.slowReasons[s.reason]++
			case cut:
				out.slowCut++
			}
			continue
		}
		all = append(all, s.lat...)
		switch {
		case s.dropped.Load():
			out.fastDropped++
			continue
		case cut:
			out.fastCut++
			continue
		}
		if got < f.published {
			out.missed += f.published - got
			out.disorder = append(out.disorder, fmt.Sprintf("subscriber %d kept up but received %d of %d events", i, got, f.published))
		}
	}
	out.lat = summarize(all)
	out.first, out.last = f.spread(subs[:f.o.Subscribers])
	return out, nil
}

// spread is, over the events past the warm-up, how long after its publish
// the first and the last of subs read each event: the time to reach the
// first subscriber, and to reach every one (the fan-out's length, which a
// delivery p99 follows).
func (f *feedRun) spread(subs []*subscriber) (first, last summary) {
	var fs, ls []time.Duration
	n := len(f.sids)
	for i := range f.published {
		at := f.pubAt[i%n][i/n+1].Load()
		if at == 0 {
			continue // the warm-up's
		}
		lo, hi := int64(math.MaxInt64), int64(0)
		for _, s := range subs {
			if s.readAt == nil || s.readAt[i] == 0 {
				continue
			}
			lo, hi = min(lo, s.readAt[i]), max(hi, s.readAt[i])
		}
		if hi > 0 {
			fs, ls = append(fs, time.Duration(lo-at)), append(ls, time.Duration(hi-at))
		}
	}
	return summarize(fs), summarize(ls)
}

// settled reports whether every subscriber of subs has received the last
// event of every session, or its stream ended.
func (f *feedRun) settled(subs []*subscriber) bool {
	for _, s := range subs {
		if !s.ended.Load() && s.finals.Load() < f.finals {
			return false
		}
	}
	return true
}

// feedEvent is the i-th event of the feed: none of them is a text delta
// (coalesced) or status-affecting (it would trigger record refreshes).
func feedEvent(seq uint64, i int) messages.PersistedEvent {
	ev := messages.Event{Type: messages.EvThinking, Text: "Planning the next step of the change: read the tests first."}
	switch i % 3 {
	case 1:
		ev = messages.Event{Type: messages.EvToolUse, ToolUseID: fmt.Sprintf("tool-%d", i), ToolName: "Read",
			Input: json.RawMessage(`{"file_path":"pkg/greet/greet.go"}`)}
	case 2:
		ev = messages.Event{Type: messages.EvToolResult, ToolUseID: fmt.Sprintf("tool-%d", i-1), Output: "package greet\n\nfunc Greet() string { return \"hi\" }\n"}
	}
	return messages.PersistedEvent{Seq: seq, Turn: 1, Event: ev}
}

// smallSendBuf gives every accepted connection a small send buffer.
type smallSendBuf struct{ net.Listener }

func (l smallSendBuf) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(slowServerSendBuf)
	}
	return c, err
}

// bridgeTarget is the control plane: the runtime's store, the bridge on
// its event seam and the server's /api/events.
type bridgeTarget struct {
	b      *benchRuntime
	bridge *controlplane.Bridge
	srv    *controlplane.Server
	reg    *prometheus.Registry
	wrap   func(http.Handler) http.Handler
}

func newBridgeTarget(o Options, home string) (*bridgeTarget, error) {
	reg := prometheus.NewRegistry()
	bridge := controlplane.NewBridge(controlplane.BridgeOptions{Metrics: reg, Logger: o.Logger})
	b, err := openRuntime(o, home, transports.NewRegistry(script.New()), nil, actors.WithEventListener(bridge.Listen))
	if err != nil {
		return nil, err
	}
	bridge.Attach(b.rt.Store())
	srv, err := controlplane.NewServer(controlplane.Options{Runtime: b.rt, Bridge: bridge, Metrics: reg, Token: feedToken, Logger: o.Logger})
	if err != nil {
		b.close()
		return nil, err
	}
	return &bridgeTarget{b: b, bridge: bridge, srv: srv, reg: reg, wrap: o.WrapHandler}, nil
}

// createSessions writes the records of the feed's sessions.
func (t *bridgeTarget) createSessions(ctx context.Context, n int) ([]string, error) {
	now := time.Now().UTC()
	sids := make([]string, n)
	for i := range sids {
		rec := messages.SessionRecord{SessionID: messages.NewSessionID(), BackendID: script.ID, Status: messages.StatusRunning,
			CreatedAt: now, UpdatedAt: now, Version: messages.RecordVersion,
			Runs: []messages.Run{{StartedAt: now, OwnerScopeID: controlplane.DefaultScope}}}
		if err := t.b.rt.Store().Create(ctx, rec); err != nil {
			return nil, err
		}
		sids[i] = rec.SessionID
	}
	return sids, nil
}

// publish is a session emitting an event: durable in the store, then on
// the live seam (the bridge's Listen, as the runtime calls it).
func (t *bridgeTarget) publish(ctx context.Context, sid string, ev messages.PersistedEvent, at *atomic.Int64) error {
	if err := t.b.rt.Store().Append(ctx, sid, []messages.PersistedEvent{ev}); err != nil {
		return err
	}
	if at != nil {
		at.Store(time.Now().UnixNano())
	}
	t.bridge.Listen(sid, ev)
	return nil
}

func (t *bridgeTarget) handler() http.Handler {
	if t.wrap != nil {
		return t.wrap(t.srv.Handler())
	}
	return t.srv.Handler()
}

func (t *bridgeTarget) dropped() float64 {
	mfs, err := t.reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "code_session_sse_dropped_total" && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

func (t *bridgeTarget) close(ctx context.Context) error {
	err := t.bridge.Close(ctx)
	return errors.Join(err, t.b.close())
}

// rawTarget is the baseline: a plain net/http SSE fan-out. Each event is
// encoded once and offered to every subscriber's bounded queue without
// waiting; a full queue drops the subscriber; each stream writes and
// flushes its frames.
type rawTarget struct {
	mu      sync.Mutex
	subs    map[chan []byte]struct{}
	drops   int
	queue   int
	closing chan struct{}
}

func newRawTarget() *rawTarget {
	return &rawTarget{subs: map[chan []byte]struct{}{}, queue: controlplane.DefaultQueueSize, closing: make(chan struct{})}
}

func (t *rawTarget) publish(_ context.Context, sid string, ev messages.PersistedEvent, at *atomic.Int64) error {
	if at != nil {
		at.Store(time.Now().UnixNano())
	}
	b, err := json.Marshal(controlplane.EventData{SessionID: sid, PersistedEvent: ev})
	if err != nil {
		return err
	}
	frame := []byte("id: " + controlplane.EventID(sid, ev.Seq) + "\nevent: " + controlplane.TopicEvent + "\ndata: " + string(b) + "\n\n")
	t.mu.Lock()
	defer t.mu.Unlock()
	for ch := range t.subs {
		select {
		case ch <- frame:
		default:
			delete(t.subs, ch)
			close(ch)
			t.drops++
		}
	}
	return nil
}

func (t *rawTarget) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+feedToken {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		ch := make(chan []byte, t.queue)
		t.mu.Lock()
		t.subs[ch] = struct{}{}
		t.mu.Unlock()
		defer func() {
			t.mu.Lock()
			if _, ok := t.subs[ch]; ok {
				delete(t.subs, ch)
				close(ch)
			}
			t.mu.Unlock()
		}()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		if _, err := io.WriteString(w, "retry: 1000\n\n"); err != nil || rc.Flush() != nil {
			return
		}
		for {
			select {
			case frame, ok := <-ch:
				if !ok {
					_, _ = io.WriteString(w, "event: "+controlplane.ReconnectEvent+"\ndata: {\"reason\":\"slow\"}\n\n")
					_ = rc.Flush()
					return
				}
				if _, err := w.Write(frame); err != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
			case <-r.Context().Done():
				return
			case <-t.closing:
				return
			}
		}
	})
}

func (t *rawTarget) dropped() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return float64(t.drops)
}

func (t *rawTarget) close(context.Context) error {
	close(t.closing)
	return nil
}

// newFeedRun lays out o.FeedEvents events over sids.
func newFeedRun(o Options, sids []string) *feedRun {
	per := (o.FeedEvents + len(sids) - 1) / len(sids)
	f := &feedRun{o: o, sids: sids, perSess: per, published: o.FeedEvents, pubAt: make([][]atomic.Int64, len(sids)), lastSeq: make([]uint64, len(sids)),
		warm: feedWarmUp(o), byID: make(map[string]int, len(sids))}
	for i, sid := range sids {
		f.byID[sid] = i
	}
	for i := range f.pubAt {
		f.pubAt[i] = make([]atomic.Int64, per+1)
	}
	for i := range o.FeedEvents {
		f.lastSeq[i%len(sids)]++
	}
	for _, l := range f.lastSeq {
		if l > 0 {
			f.finals++
		}
	}
	return f
}

// feedWarmUp is how many events open a run as its warm-up: one second's
// worth at the target rate, at most a fifth of the run.
func feedWarmUp(o Options) int { return min(int(o.Rate), o.FeedEvents/5) }

// feedPair measures the control plane, then the raw fan-out, with the
// same subscribers and events (o), one after the other.
func feedPair(ctx context.Context, o Options, dir string, p *progress, res *Result) (cp, raw feedOutcome, err error) {
	p.printf("control plane: bridge and server (%d subscribers)", o.Subscribers)
	bt, err := newBridgeTarget(o, filepath.Join(dir, "home"))
	if err != nil {
		return cp, raw, err
	}
	sids, err := bt.createSessions(ctx, feedSessions)
	if err != nil {
		bt.close(ctx)
		return cp, raw, err
	}
	cp, err = newFeedRun(o, sids).run(ctx, bt, p)
	cerr := bt.close(ctx)
	if err != nil {
		return cp, raw, err
	}
	if cerr != nil {
		res.note("closing the control plane: %v", cerr)
	}

	p.printf("raw fan-out baseline (%d subscribers)", o.Subscribers)
	rawSids := make([]string, feedSessions)
	for i := range rawSids {
		rawSids[i] = messages.NewSessionID()
	}
	rt := newRawTarget()
	raw, err = newFeedRun(o, rawSids).run(ctx, rt, p)
	rt.close(ctx)
	return cp, raw, err
}

// curveEvents is how many events each point of the subscriber curve
// publishes: a third of the main run's, at least 300.
func curveEvents(o Options) int { return max(o.FeedEvents/3, 300) }

func runFeed(ctx context.Context, o Options, dir string) (*Result, error) {
	p := newProgress(o, SuiteFeed)
	mode := "in a child process"
	if o.SubscribersInProcess {
		mode = "in the bench's process"
	}
	res := &Result{Suite: SuiteFeed, Params: fmt.Sprintf("%d subscribers keeping up + %d deliberately slow (%s), %d events over %d sessions at a target %.0f events/s, SSE on 127.0.0.1",
		o.Subscribers, o.SlowSubscribers, mode, o.FeedEvents, feedSessions, o.Rate)}
	if len(o.FeedCurve) > 0 {
		res.Params += fmt.Sprintf("; then a curve at %v subscribers (%d events each, none slow)", o.FeedCurve, curveEvents(o))
	}
	cp, raw, err := feedPair(ctx, o, filepath.Join(dir, "main"), p, res)
	if err != nil {
		return nil, err
	}

	res.latencyRows("delivery latency", cp.lat, "raw net/http fan-out", raw.lat)
	res.vs("an event's first read, p50 over events", ms(cp.first.p50), UnitMs, "raw net/http fan-out", ms(raw.first.p50))
	res.vs("an event's last read (all subscribers have it), p50 over events", ms(cp.last.p50), UnitMs, "raw net/http fan-out", ms(raw.last.p50))
	res.vs("an event's last read, p99 over events", ms(cp.last.p99), UnitMs, "raw net/http fan-out", ms(raw.last.p99))
	res.vs("load average (1 min) at the start", cp.load, UnitCount, "raw net/http fan-out", raw.load)
	res.vs("deliveries to subscribers", cp.deliveries, UnitPerSec, "raw net/http fan-out", raw.deliveries)
	res.row("events published (target "+strconv.FormatFloat(o.Rate, 'f', 0, 64)+"/s)", cp.rate, UnitPerSec)
	res.row("events missed by subscribers that kept up", float64(cp.missed), UnitEvents)
	res.vs("fast subscribers dropped (queue full, told to reconnect)", float64(cp.fastDropped), UnitSubs, "raw net/http fan-out", float64(raw.fastDropped))
	res.vs("fast subscribers cut (stream ended early, no reconnect event)", float64(cp.fastCut), UnitSubs, "raw net/http fan-out", float64(raw.fastCut))
	res.vs(fmt.Sprintf("slow subscribers dropped (queue full, told to reconnect; of %d)", o.SlowSubscribers), float64(cp.slowDropd), UnitSubs, "raw net/http fan-out", float64(raw.slowDropd))
	res.vs(fmt.Sprintf("slow subscribers cut by the write deadline (of %d)", o.SlowSubscribers), float64(cp.slowCut), UnitSubs, "raw net/http fan-out", float64(raw.slowCut))
	res.row("slow-subscriber drops counted by the bridge (code_session_sse_dropped_total)", cp.serverDropped, UnitSubs)

	kept := o.Subscribers - cp.fastDropped - cp.fastCut
	var missed failures
	for _, d := range cp.disorder {
		missed.add("%s", d)
	}
	missed.report(res, "subscribers that kept up got every event", fmt.Sprintf("%d of %d subscribers kept up, each received all %d events in order, none twice; the dropped ones received a gapless prefix", kept, o.Subscribers, o.FeedEvents))
	var streamErrs failures
	for _, e := range cp.errs {
		streamErrs.add("%s", e)
	}
	streamErrs.report(res, "streams ended cleanly", "no stream failed with a read error")
	if o.SlowSubscribers > 0 {
		res.note("the slow subscribers stop reading once live and read again only after the publishing is over, through small socket buffers (%d KiB sent, %d KiB received): "+
			"the bridge drops one whose queue (%d events) is full and tells it to reconnect; a stream whose write blocks longer than the server's write timeout (%s) ends first, without that event, "+
			"which is what happens below %.0f events/s", slowServerSendBuf>>10, slowClientRecvBuf>>10, controlplane.DefaultQueueSize, controlplane.DefaultWriteTimeout,
			float64(controlplane.DefaultQueueSize)/controlplane.DefaultWriteTimeout.Seconds())
	}
	where := "in a child process (the same executable re-run; it reports each subscriber's reads back over a pipe when the run ends), so their reads do not queue behind the server's writes in one Go scheduler"
	if o.SubscribersInProcess {
		where = "in this process, beside the server (--subscribers-in-process): their reads queue behind the server's writes in one Go scheduler, which inflates both fan-outs' latency"
	}
	res.note("latency runs from the bridge's Listen (the event already durable: stamped after the store's append) to the subscriber reading its id line, both stamped on the wall clock (unix ns; one machine, one clock); the raw baseline is stamped when handed the event, encodes it once and writes the same frames through plain net/http; "+
		"both are read by the same subscribers (one goroutine each, nothing allocated per event) %s, on the same cores; the first %d events of each run are a warm-up, delivered and checked but left out of the latency; "+
		"an event's first and last read are the first and the last subscriber that kept up reading its id line, so the last read is the fan-out's length, which the delivery p99 follows", where, feedWarmUp(o))
	if cp.fastDropped+cp.fastCut > 0 {
		res.note("%d subscribers meant to keep up fell behind and were dropped or cut: the machine did not serve %d subscribers at this rate (reported, not a failure)", cp.fastDropped+cp.fastCut, o.Subscribers)
	}
	var curveLost failures
	for i, n := range o.FeedCurve {
		oc := o
		oc.Subscribers, oc.SlowSubscribers, oc.FeedEvents = n, 0, curveEvents(o)
		ccp, craw, err := feedPair(ctx, oc, filepath.Join(dir, fmt.Sprintf("curve%d", i)), p, res)
		if err != nil {
			return nil, err
		}
		label := fmt.Sprintf("curve, %d subscribers: ", n)
		res.vs(label+"delivery latency p50", ms(ccp.lat.p50), UnitMs, "raw net/http fan-out", ms(craw.lat.p50))
		res.vs(label+"delivery latency p99", ms(ccp.lat.p99), UnitMs, "raw net/http fan-out", ms(craw.lat.p99))
		res.vs(label+"events lost by subscribers that kept up", float64(ccp.missed), UnitEvents, "raw net/http fan-out", float64(craw.missed))
		res.vs(label+"subscribers dropped or cut", float64(ccp.fastDropped+ccp.fastCut), UnitSubs, "raw net/http fan-out", float64(craw.fastDropped+craw.fastCut))
		res.vs(label+"load average (1 min) at the start", ccp.load, UnitCount, "raw net/http fan-out", craw.load)
		// the control plane's publisher appends each event to the store
		// before the fan-out sees it, the raw one does not: on a loaded
		// machine it publishes slower, and its subscribers have less to do
		res.vs(label+"events published", ccp.rate, UnitPerSec, "raw net/http fan-out", craw.rate)
		for _, d := range ccp.disorder {
			curveLost.add("%d subscribers: %s", n, d)
		}
	}
	if len(o.FeedCurve) > 0 {
		curveLost.report(res, "curve: subscribers that kept up got every event", fmt.Sprintf("at each of %v subscribers, every subscriber not dropped received every event in order, none twice", o.FeedCurve))
	}
	return res, nil
}
