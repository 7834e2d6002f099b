package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
)

// Replay and gap filling.
const (
	replayPage = 256
	// durableWait bounds how long a stream waits for events it has seen go
	// by (the listener fires before they are durable) to reach the store.
	durableWait = 3 * time.Second
)

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
		return topicSet{event: true, changed: true}, nil
	}
	var t topicSet
	for _, name := range strings.Split(v, ",") {
		switch strings.TrimSpace(name) {
		case TopicEvent:
			t.event = true
		case TopicChanged:
			t.changed = true
		default:
			return t, messages.FieldError("events", "topics", "unknown topic %q (want %s, %s)", name, TopicEvent, TopicChanged)
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
//  3. events the bridge had seen before subscribing (snapSeq) but that were
//     not yet durable are read once they are;
//  4. live events at or below the stream's cursor are dropped (already
//     sent); one whose first seq is past cursor+1 means events were missed
//     (never published live, or emitted before the subscription): they are
//     read from the store, waiting for them to be durable, before it.
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

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	st := &stream{s: s, w: w, rc: http.NewResponseController(w), topics: topics,
		last: map[string]uint64{}, durable: map[string]uint64{}}
	if err := st.raw("retry: 1000\n\n"); err != nil {
		return nil
	}
	if err := st.prime(ctx, sid, sub, cursor, hasCursor, durable); err != nil {
		st.abandon(ctx, err)
		return nil
	}
	if s.stallLive != nil {
		s.stallLive()
	}
	scope, seen := s.scopeOf(r), map[string]bool{}
	hb := time.NewTicker(s.o.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case it, ok := <-sub.ch:
			if !ok {
				_ = st.reconnect(sub.reason)
				return nil
			}
			if sid == "" && !s.feedVisible(ctx, scope, seen, it.sid) {
				continue // another scope's session
			}
			if err := st.live(ctx, it); err != nil {
				st.abandon(ctx, err)
				return nil
			}
		case <-hb.C:
			if err := st.raw(": heartbeat\n\n"); err != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// stream is one SSE response and its cursors.
type stream struct {
	s       *Server
	w       io.Writer
	rc      *http.ResponseController
	topics  topicSet
	last    map[string]uint64 // per session: the last event seq sent
	durable map[string]uint64 // per session: the last seq known durable
	lastID  string
}

// prime replays and fills before the stream goes live. durable is the
// session's last durable seq read before the subscription began: with no
// cursor the stream starts after max(durable, snapSeq), i.e. after every
// event emitted before it subscribed.
func (st *stream) prime(ctx context.Context, sid string, sub *subscription, cursor uint64, hasCursor bool, durable uint64) error {
	if sid == "" {
		if hasCursor {
			return st.raw(": replay needs sessionId: following live events only\n\n")
		}
		return nil
	}
	if st.topics.event && hasCursor {
		st.last[sid] = cursor
		if err := st.replay(ctx, sid, 0); err != nil {
			return err
		}
		if sub.snapSeq > st.last[sid] {
			if err := st.fill(ctx, sid, sub.snapSeq); err != nil {
				return err
			}
		}
	} else {
		st.last[sid] = max(sub.snapSeq, durable)
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
		evs, err := st.s.store().ReadEvents(ctx, sid, st.last[sid], replayPage)
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
			if err := st.event(sid, ev); err != nil {
				return err
			}
		}
		if len(evs) < replayPage {
			return nil
		}
	}
}

// fill sends sid's events after its cursor up to upTo from the store,
// waiting (bounded) for them to become durable: the listener fires before
// the store has them.
func (st *stream) fill(ctx context.Context, sid string, upTo uint64) error {
	if st.s.bridge.isForeign(sid) {
		return nil // another node's session: this store has none of it
	}
	deadline := time.Now().Add(durableWait)
	for {
		last, err := st.lastSeq(ctx, sid)
		if err != nil {
			return err
		}
		if last >= upTo || time.Now().After(deadline) {
			if last < upTo {
				st.s.log.Warn("live feed: events did not become durable in time; the stream skips them", "session", sid,
					"from", st.last[sid]+1, "to", upTo, "durable", last)
			}
			return st.replay(ctx, sid, upTo)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// awaitDurable holds a live event until the store has it (bounded by
// durableWait). The runtime hands events over once durable, so this is a
// guard, not the durability point: an event sent before it is durable could
// vanish in a crash, its seq then reused by the next process (the orphan
// sweep's event) and a reconnecting client would skip that one. Reading
// LastSeq is cheap (stores cache it).
func (st *stream) awaitDurable(ctx context.Context, sid string, seq uint64) error {
	if st.durable[sid] >= seq || st.s.bridge.isForeign(sid) {
		return nil // a foreign session's events are durable on their node
	}
	deadline := time.Now().Add(durableWait)
	pause := time.Millisecond
	for {
		last, err := st.lastSeq(ctx, sid)
		if err != nil {
			return err
		}
		st.durable[sid] = last
		if last >= seq {
			return nil
		}
		if time.Now().After(deadline) {
			st.s.log.Warn("live feed: sending an event the store has not made durable in time", "session", sid, "seq", seq, "durable", last)
			return nil
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// lastSeq is the session's last durable seq; a session whose record is
// not written yet (its first events race its creation) has none.
func (st *stream) lastSeq(ctx context.Context, sid string) (uint64, error) {
	last, err := st.s.store().LastSeq(ctx, sid)
	if messages.IsCode(err, messages.CodeNotFound) {
		return 0, nil
	}
	return last, err
}

// live sends one queued item, dropping what was already sent and filling
// what was missed.
func (st *stream) live(ctx context.Context, it item) error {
	switch it.topic {
	case TopicEvent:
		last, known := st.last[it.sid]
		if known && it.ev.Seq <= last {
			return nil // replayed already
		}
		if known && it.from > last+1 {
			if err := st.fill(ctx, it.sid, it.from-1); err != nil {
				return err
			}
			if it.ev.Seq <= st.last[it.sid] {
				return nil
			}
		}
		if err := st.awaitDurable(ctx, it.sid, it.ev.Seq); err != nil {
			return err
		}
		return st.event(it.sid, it.ev)
	case TopicChanged:
		return st.changed(it.sid, *it.rec, it.seq)
	}
	return nil
}

func (st *stream) event(sid string, ev messages.PersistedEvent) error {
	b, err := json.Marshal(EventData{SessionID: sid, PersistedEvent: ev})
	if err != nil {
		return err
	}
	id := EventID(sid, ev.Seq)
	if err := st.raw(fmt.Sprintf("id: %s\nevent: %s\ndata: %s\n\n", id, TopicEvent, b)); err != nil {
		return err
	}
	st.last[sid], st.lastID = ev.Seq, id
	return nil
}

// changed sends a record. Its id carries the stream's cursor for the
// session, so reconnecting from it neither repeats nor skips an event.
func (st *stream) changed(sid string, rec messages.SessionRecord, seq uint64) error {
	b, err := json.Marshal(ChangedData{SessionID: sid, Record: rec})
	if err != nil {
		return err
	}
	cur, known := st.last[sid]
	if !st.topics.event || !known {
		cur = max(cur, seq)
	}
	id := EventID(sid, cur)
	if err := st.raw(fmt.Sprintf("id: %s\nevent: %s\ndata: %s\n\n", id, TopicChanged, b)); err != nil {
		return err
	}
	if !st.topics.event {
		st.last[sid] = cur
	}
	st.lastID = id
	return nil
}

// reconnect is a stream's last event when the server ends it.
func (st *stream) reconnect(reason string) error {
	if reason == "" {
		return nil
	}
	b, _ := json.Marshal(ReconnectData{Reason: reason, LastEventID: st.lastID})
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

// raw writes and flushes within the write timeout.
func (st *stream) raw(s string) error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.o.WriteTimeout))
	_, err := io.WriteString(st.w, s)
	if err == nil {
		err = st.rc.Flush()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// a subscriber that stopped reading before its queue filled: it is
		// cut here, too stuck to be told; count it with the other drops
		st.s.bridge.m.dropped.Inc()
		st.s.log.Warn("live feed: cut a subscriber that stopped reading", "timeout", st.s.o.WriteTimeout)
	}
	return err
}
