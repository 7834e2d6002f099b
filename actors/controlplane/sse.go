package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
)

// replayPage is how many stored events a replay or gap fill reads at once.
const replayPage = 256

// liveBatch bounds how many queued items a stream writes before it
// flushes: a stream that fell behind catches up with one write per batch,
// not one per event.
const liveBatch = 64

// ReconnectEvent is the SSE event name of a stream's last event when the
// server ends it (a slow subscriber, or the daemon shutting down): the
// client should reconnect with Last-Event-ID.
const ReconnectEvent = "reconnect"

// EventData is the data of a code_session_event.
type EventData struct {
	SessionID string `json:"sessionId"`
	messages.PersistedEvent
}

// ChangedData is the data of a code_session_changed.
type ChangedData struct {
	SessionID string                 `json:"sessionId"`
	Record    messages.SessionRecord `json:"record"`
}

// ReconnectData is the data of a reconnect event.
type ReconnectData struct {
	Reason      string `json:"reason"`
	LastEventID string `json:"lastEventId,omitempty"`
}

// EventID is the SSE id of a session's event: "<sessionId>:<seq>".
func EventID(sid string, seq uint64) string { return sid + ":" + strconv.FormatUint(seq, 10) }

// ParseEventID splits an SSE id made by EventID.
func ParseEventID(id string) (sid string, seq uint64, err error) {
	sid, s, ok := strings.Cut(id, ":")
	if !ok || !messages.ValidSessionID(sid) {
		return "", 0, messages.FieldError("events", "Last-Event-ID", "want <sessionId>:<seq>")
	}
	seq, perr := strconv.ParseUint(s, 10, 64)
	if perr != nil {
		return "", 0, messages.FieldError("events", "Last-Event-ID", "want <sessionId>:<seq>")
	}
	return sid, seq, nil
}

func parseTopics(v string) (topicSet, error) {
	if v == "" {
		return topicSet{event: true, changed: true, question: true}, nil
	}
	var t topicSet
	for _, name := range strings.Split(v, ",") {
		switch strings.TrimSpace(name) {
		case TopicEvent:
			t.event = true
		case TopicChanged:
			t.changed = true
		case TopicQuestion:
			t.question = true
		default:
			return t, messages.FieldError("events", "topics", "unknown topic %q (want %s, %s, %s)", name, TopicEvent, TopicChanged, TopicQuestion)
		}
	}
	return t, nil
}

// events serves the live feed. For one session (sessionId) with a cursor
// (Last-Event-ID, else afterSeq) it replays the store after the cursor,
// then goes live with no gap and no duplicate:
//
//  1. the subscription is registered first, so every event published from
//     then on is queued;
//  2. the store is replayed after the cursor;
//  3. each queued event goes through LiveStep: one at or below the
//     stream's cursor is dropped (replayed already); one whose first seq
//     is past cursor+1 means events never reached this stream (published
//     before it subscribed, or never published live): they are read from
//     the store first.
//
// The feed is woken by the runtime, never by polling: the bridge is the
// runtime's event listener, which is handed each event once it is durable,
// in seq order per session (actors.WithEventListener), and a session's log
// is gapless; so when event n reaches a stream, every event of its session
// up to n is on disk and readable, and the stream sends it at once.
//
// Without sessionId the feed covers every session, live only (there is no
// single cursor to replay from); gaps within a session are filled the same
// way once the stream has seen one of its events.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	const op = "events"
	if s.bridge == nil {
		return &messages.Error{Code: messages.CodeInternal, Op: op, Retryable: true, Message: "the live feed is not configured"}
	}
	q := r.URL.Query()
	sid := q.Get("sessionId")
	if sid != "" {
		var err error
		if sid, err = s.resolveSessionID(r.Context(), sid, op); err != nil {
			return err
		}
	}
	topics, err := parseTopics(q.Get("topics"))
	if err != nil {
		return err
	}
	var cursor uint64
	hasCursor := false
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		csid, seq, err := ParseEventID(id)
		if err != nil {
			return err
		}
		if sid != "" && csid != sid {
			return messages.FieldError(op, "Last-Event-ID", "names another session than sessionId")
		}
		cursor, hasCursor = seq, true // without sessionId prime only says it is ignored
	} else if v := q.Get("afterSeq"); v != "" {
		if sid == "" {
			return messages.FieldError(op, "afterSeq", "needs sessionId")
		}
		if cursor, err = uintParam(r, "afterSeq"); err != nil {
			return err
		}
		hasCursor = true
	}
	ctx := r.Context()
	var durable uint64 // read before subscribing: the live-only cursor
	if sid != "" {
		if _, err := s.store().GetMeta(ctx, sid); err != nil {
			return err
		}
		if durable, err = s.store().LastSeq(ctx, sid); err != nil {
			return err
		}
	}
	sub, err := s.bridge.subscribe(sid, topics)
	if err != nil {
		return err
	}
	defer s.bridge.unsubscribe(sub)
	if s.afterSubscribe != nil {
		s.afterSubscribe()
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	// On HTTP/1.1 the body is delimited by the connection's close, not
	// chunked (net/http's setup for SSE, from the SSE recommendation): a
	// stream is the connection's last response anyway (a client reconnects
	// on a new one), and each flush is then the frames alone, without a
	// chunk header for the server to format and every client to parse.
	// HTTP/2 drops the header and frames the stream itself.
	h.Set("Transfer-Encoding", "identity")
	w.WriteHeader(http.StatusOK)
	st := &stream{s: s, w: w, rc: http.NewResponseController(w), topics: topics, cur: map[string]*sessCursor{}}
	if err := st.raw("retry: 1000\n\n"); err != nil {
		return nil
	}
	if err := st.prime(ctx, sid, sub, cursor, hasCursor, durable); err != nil {
		st.abandon(ctx, err)
		return nil
	}
	if err := st.flush(); err != nil {
		return nil
	}
	if s.stallLive != nil {
		s.stallLive()
	}
	if c, cctx, ok := st.takeOver(w, r); ok {
		defer c.Close()
		ctx = cctx
	}
	scope, seen := s.scopeOf(r), map[string]bool{}
	// one channel wakes the stream for its heartbeat and for its end: a
	// select blocks on every channel it names (locks each, queues on
	// each), once per event for a stream that keeps up
	wake, hb := heartbeat(s.o.Heartbeat)
	defer hb.Stop()
	stop := context.AfterFunc(ctx, func() { hb.ring() })
	defer stop()
	for {
		select {
		case it, ok := <-sub.ch:
			// write what is queued (a bounded batch), then flush once
			for n := 0; ; n++ {
				if !ok {
					_ = st.reconnect(sub.reason)
					return nil
				}
				c := st.cursor(it.sid)
				// the all-sessions feed skips another scope's sessions
				if sid != "" || st.visible(ctx, c, scope, seen, it.sid) {
					if err := st.live(ctx, it, c); err != nil {
						st.abandon(ctx, err)
						return nil
					}
				}
				if n+1 >= liveBatch || len(sub.ch) == 0 {
					break
				}
				it, ok = <-sub.ch
			}
			if err := st.flush(); err != nil {
				return nil
			}
		case <-wake:
			if ctx.Err() != nil {
				return nil // the client went away, or the server is closing
			}
			if err := st.raw(": heartbeat\n\n"); err != nil {
				return nil
			}
			hb.Reset(s.o.Heartbeat)
		}
	}
}

// heartbeat returns a channel that receives d after it is made, and again
// d after each Reset of the timer, or at once on ring. It is a plain
// channel fed by a func timer, not a Ticker's channel: since Go 1.23 a
// select that blocks on a timer channel locks its timer and puts it back
// in the timer heap if it left it, and each wake-up marks it for removal
// again (runtime blockTimerChan, unblockTimerChan), for a stream that
// wakes once per event; a func timer just stays in the heap while the
// stream sends.
func heartbeat(d time.Duration) (<-chan struct{}, *beatTimer) {
	bt := &beatTimer{c: make(chan struct{}, 1)}
	bt.Timer = time.AfterFunc(d, bt.ring)
	return bt.c, bt
}

// beatTimer is a heartbeat's timer and channel.
type beatTimer struct {
	*time.Timer
	c chan struct{}
}

// ring wakes the channel's reader; a wake-up already waiting covers it
// (the reader checks why it woke).
func (b *beatTimer) ring() {
	select {
	case b.c <- struct{}{}:
	default:
	}
}

// stream is one SSE response and its cursors.
type stream struct {
	s      *Server
	w      io.Writer
	rc     *http.ResponseController
	topics topicSet
	cur    map[string]*sessCursor // per session
	// lastSid and lastSeq are the id of the last event sent (lastSid ""
	// before one): the reconnect event's lastEventId, built only then, not
	// once per event sent
	lastSid string
	lastSeq uint64
	// pending counts writes since the last flush; deadline is the write
	// deadline set last
	pending  int
	deadline time.Time
	// conn is the HTTP/1.1 connection once the stream took it over
	// (takeOver); then write appends to buf and flush writes buf to conn
	conn net.Conn
	buf  []byte
}

// sessCursor is a stream's state for one session: one map lookup per queued
// item finds all of it (the cursor's read and its move, and the
// all-sessions feed's visibility, were three).
type sessCursor struct {
	last  uint64 // the last event seq sent, when known
	known bool
	// vis is whether the all-sessions feed shows the session: 0 not
	// known yet, 1 shown, -1 not
	vis int8
}

// cursor returns sid's cursor, made unknown on first use.
func (st *stream) cursor(sid string) *sessCursor {
	c := st.cur[sid]
	if c == nil {
		c = &sessCursor{}
		st.cur[sid] = c
	}
	return c
}

// setLast moves sid's cursor to seq.
func (st *stream) setLast(sid string, seq uint64) {
	c := st.cursor(sid)
	c.last, c.known = seq, true
}

// visible is feedVisible, its answer kept in c once the server has one
// (seen keeps it too, and an answer it does not keep is asked again).
func (st *stream) visible(ctx context.Context, c *sessCursor, scope string, seen map[string]bool, sid string) bool {
	if c.vis != 0 {
		return c.vis > 0
	}
	v := st.s.feedVisible(ctx, scope, seen, sid)
	if _, kept := seen[sid]; kept {
		c.vis = -1
		if v {
			c.vis = 1
		}
	}
	return v
}

// maxKeptBuf is the largest write buffer a taken-over stream keeps
// between flushes: a burst's bigger one is left to the collector, not
// held by each of a thousand idle streams.
const maxKeptBuf = 32 << 10

// takeOver hijacks an HTTP/1.1 stream's connection once its headers and
// replay are flushed, so that each batch of live frames is one write of
// the stream's own buffer to the socket. Through net/http each frame went
// through the response's and the connection's buffers (two copies and a
// dozen calls, a mutex among them) and each flush through three layers to
// reach the same write: about a sixth of the handler's CPU outside the
// write syscall itself, paid once per subscriber per event. The body was
// close-delimited already (events sets Transfer-Encoding: identity), so
// the bytes on the wire are the same.
//
// It does nothing (ok false) on HTTP/2, or when a wrapper between the
// server and this handler does not itself offer Hijack: such a wrapper
// wants to see the writes. A taken-over connection is no longer watched by
// net/http, so a goroutine reads it to learn when the client goes away and
// cancels the returned context; the caller closes the connection.
func (st *stream) takeOver(w http.ResponseWriter, r *http.Request) (net.Conn, context.Context, bool) {
	if r.ProtoMajor != 1 {
		return nil, nil, false
	}
	if rec, ok := w.(*statusRecorder); ok {
		w = rec.ResponseWriter
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, false
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		// a client sends nothing after its request: whatever it sends is
		// dropped, and the read's end (EOF, a reset, or the stream closing
		// the connection) is the client gone
		defer cancel()
		if n := brw.Reader.Buffered(); n > 0 {
			_, _ = brw.Reader.Discard(n)
		}
		var b [512]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				return
			}
		}
	}()
	// Hijack cleared the connection's deadlines: the next write sets one
	st.conn, st.deadline, st.rc = c, time.Time{}, nil
	return c, ctx, true
}

func (st *stream) setWriteDeadline(t time.Time) {
	if st.conn != nil {
		_ = st.conn.SetWriteDeadline(t)
		return
	}
	_ = st.rc.SetWriteDeadline(t)
}

// prime replays before the stream goes live. durable is the session's
// last durable seq read before the subscription began: with no cursor the
// stream starts after max(durable, snapSeq), i.e. after every event
// emitted before it subscribed.
func (st *stream) prime(ctx context.Context, sid string, sub *subscription, cursor uint64, hasCursor bool, durable uint64) error {
	if sid == "" {
		if hasCursor {
			return st.raw(": replay needs sessionId: following live events only\n\n")
		}
		return nil
	}
	if st.topics.event && hasCursor {
		st.setLast(sid, cursor)
		// every event the bridge had seen (up to snapSeq) was durable when
		// it saw it: the replay reads them all
		if err := st.replay(ctx, sid, 0); err != nil {
			return err
		}
		if last := st.cursor(sid).last; sub.snapSeq > last && !st.s.bridge.isForeign(sid) {
			st.s.log.Warn("live feed: the store does not hold events the runtime handed over as durable; the stream skips them",
				"session", sid, "from", last+1, "to", sub.snapSeq)
		}
	} else {
		st.setLast(sid, max(sub.snapSeq, durable))
	}
	if st.topics.changed {
		rec, err := st.s.store().GetMeta(ctx, sid)
		if err != nil {
			return err
		}
		return st.changed(sid, rec, 0)
	}
	return nil
}

// replay sends sid's stored events after its cursor (up to upTo when not 0).
func (st *stream) replay(ctx context.Context, sid string, upTo uint64) error {
	for {
		evs, err := st.s.store().ReadEvents(ctx, sid, st.cursor(sid).last, replayPage)
		if messages.IsCode(err, messages.CodeNotFound) {
			return nil // not created yet: nothing durable to send
		}
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if upTo > 0 && ev.Seq > upTo {
				return nil
			}
			if err := st.event(sid, &ev); err != nil {
				return err
			}
		}
		if len(evs) < replayPage {
			return nil
		}
	}
}

// fill sends sid's events after its cursor up to upTo from the store. It
// never waits: it runs when an event past upTo reached the stream, and the
// runtime hands an event over only once it and every event before it are
// durable.
func (st *stream) fill(ctx context.Context, sid string, upTo uint64) error {
	if st.s.bridge.isForeign(sid) {
		return nil // another node's session: this store has none of it
	}
	if err := st.replay(ctx, sid, upTo); err != nil {
		return err
	}
	if last := st.cursor(sid).last; last < upTo {
		st.s.log.Warn("live feed: the store does not hold events before one the runtime handed over as durable; the stream skips them",
			"session", sid, "from", last+1, "to", upTo)
	}
	return nil
}

// LiveAction is what a stream does with a queued event.
type LiveAction uint8

const (
	liveInvalid LiveAction = iota
	// LiveSend: the event comes next after the stream's cursor.
	LiveSend
	// LiveDrop: the event is at or below the stream's cursor: the stream
	// sent it already (replayed, or filled from the store).
	LiveDrop
	// LiveFill: events between the cursor and the item's first seq never
	// reached the stream: read them from the store, then send the event.
	LiveFill
)

func (a LiveAction) String() string {
	switch a {
	case LiveSend:
		return "send"
	case LiveDrop:
		return "drop"
	case LiveFill:
		return "fill"
	}
	return "invalid"
}

// LiveStep decides what a stream (this package's, and the cluster's feed of
// another node's session) does with a queued event item standing
// for seqs from..seq (from < seq for coalesced text: the first delta it
// replaced), given the stream's cursor for the session (last, when known:
// the all-sessions feed starts a session's cursor at its first event).
func LiveStep(last uint64, known bool, from, seq uint64) LiveAction {
	switch {
	case !known:
		return LiveSend
	case seq <= last:
		return LiveDrop
	case from > last+1:
		return LiveFill
	default:
		return LiveSend
	}
}

// live sends one queued item (c is its session's cursor), dropping what
// was already sent and filling what was missed.
func (st *stream) live(ctx context.Context, it *item, c *sessCursor) error {
	switch it.topic {
	case TopicEvent:
		switch LiveStep(c.last, c.known, it.from, it.ev.Seq) {
		case LiveDrop:
			return nil
		case LiveFill:
			if err := st.fill(ctx, it.sid, it.from-1); err != nil {
				return err
			}
		}
		if err := st.send(it.sid, &it.ev, &it.frame); err != nil {
			return err
		}
		c.last, c.known = it.ev.Seq, true
		st.lastSid, st.lastSeq = it.sid, it.ev.Seq
		return nil
	case TopicChanged:
		return st.changed(it.sid, *it.rec, it.seq)
	case TopicQuestion:
		return st.question(*it.question)
	}
	return nil
}

// eventFrame is a live event's SSE frame, encoded once for every stream
// that sends it (by the first that does).
type eventFrame struct {
	once sync.Once
	b    []byte
	err  error
}

func (f *eventFrame) get(sid string, ev *messages.PersistedEvent) ([]byte, error) {
	f.once.Do(func() { f.b, f.err = encodeEvent(sid, *ev) })
	return f.b, f.err
}

func encodeEvent(sid string, ev messages.PersistedEvent) ([]byte, error) {
	data, err := json.Marshal(EventData{SessionID: sid, PersistedEvent: ev})
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(data)+len(sid)+64)
	b = append(b, "id: "...)
	b = append(b, EventID(sid, ev.Seq)...)
	b = append(b, "\nevent: "+TopicEvent+"\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	return appendWaiting(b, sid, ev), nil
}

// event writes one event and moves the stream's cursors past it; the
// batch's flush sends it.
func (st *stream) event(sid string, ev *messages.PersistedEvent) error {
	if err := st.send(sid, ev, nil); err != nil {
		return err
	}
	st.setLast(sid, ev.Seq)
	st.lastSid, st.lastSeq = sid, ev.Seq
	return nil
}

// send writes one event's frame (its shared one when f is not nil).
func (st *stream) send(sid string, ev *messages.PersistedEvent, f *eventFrame) error {
	var b []byte
	var err error
	if f != nil {
		b, err = f.get(sid, ev)
	} else {
		b, err = encodeEvent(sid, *ev)
	}
	if err != nil {
		return err
	}
	return st.write(b)
}

// changed sends a record. Its id carries the stream's cursor for the
// session, so reconnecting from it neither repeats nor skips an event.
func (st *stream) changed(sid string, rec messages.SessionRecord, seq uint64) error {
	b, err := json.Marshal(ChangedData{SessionID: sid, Record: rec})
	if err != nil {
		return err
	}
	c := st.cursor(sid)
	cur := c.last
	if !st.topics.event || !c.known {
		cur = max(cur, seq)
	}
	id := EventID(sid, cur)
	if err := st.raw(fmt.Sprintf("id: %s\nevent: %s\ndata: %s\n\n", id, TopicChanged, b)); err != nil {
		return err
	}
	if !st.topics.event {
		c.last, c.known = cur, true
	}
	st.lastSid, st.lastSeq = sid, cur
	return nil
}

// reconnect is a stream's last event when the server ends it.
func (st *stream) reconnect(reason string) error {
	if reason == "" {
		return nil
	}
	rd := ReconnectData{Reason: reason}
	if st.lastSid != "" {
		rd.LastEventID = EventID(st.lastSid, st.lastSeq)
	}
	b, _ := json.Marshal(rd)
	return st.raw(fmt.Sprintf("event: %s\ndata: %s\n\n", ReconnectEvent, b))
}

// abandon ends a stream after a store error: the client is told to
// reconnect (when it can still be told).
func (st *stream) abandon(ctx context.Context, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return // the client went away
	}
	st.s.log.Warn("live feed: stream failed", "err", err)
	_ = st.reconnect("error")
}

// write writes b within the write timeout; every liveBatch writes it
// flushes, else flush sends them. The deadline is moved only when less
// than three quarters of the timeout is left (a write gets at least that
// long): moving it costs a timer update, per event on a quiet feed.
func (st *stream) write(b []byte) error {
	if st.pending == 0 {
		if now := time.Now(); st.deadline.Sub(now) < st.s.o.WriteTimeout*3/4 {
			st.deadline = now.Add(st.s.o.WriteTimeout)
			st.setWriteDeadline(st.deadline)
		}
	}
	st.pending++
	if st.conn != nil {
		st.buf = append(st.buf, b...)
	} else if _, err := st.w.Write(b); err != nil {
		return st.cut(err)
	}
	if st.pending >= liveBatch {
		return st.flush()
	}
	return nil
}

// flush sends what was written since the last flush.
func (st *stream) flush() error {
	if st.pending == 0 {
		return nil
	}
	st.pending = 0
	if st.conn == nil {
		return st.cut(st.rc.Flush())
	}
	_, err := st.conn.Write(st.buf)
	if cap(st.buf) > maxKeptBuf {
		st.buf = nil
	} else {
		st.buf = st.buf[:0]
	}
	return st.cut(err)
}

// raw writes s and flushes.
func (st *stream) raw(s string) error {
	if err := st.write([]byte(s)); err != nil {
		return err
	}
	return st.flush()
}

// cut passes err on, counting a subscriber the write deadline cut.
func (st *stream) cut(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// a subscriber that stopped reading before its queue filled: it is
		// cut here, too stuck to be told; count it with the other drops
		st.s.bridge.m.dropped.Inc()
		st.s.log.Warn("live feed: cut a subscriber that stopped reading", "timeout", st.s.o.WriteTimeout)
	}
	return err
}
