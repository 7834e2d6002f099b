package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/messages"
)

// Remote session feeds: GET /api/events?sessionId=<a session another node
// holds> is served here, with the local feed's cursor rules. Feed messages
// cross the wire at most once, so the stream never trusts them to be
// complete: it replays from the owner after the client's cursor
// (Last-Event-ID or afterSeq), drops live events at or below its cursor,
// and fills any gap (a live event past cursor+1, or an owner whose last seq
// is past the cursor at a heartbeat) by reading the missing range from the
// owner before going on.

// feedSubQueue bounds a remote stream's queue of live events; an overflow
// loses events only until the next gap fill.
const feedSubQueue = 256

// remoteFeedCheck is how often a quiet remote stream asks the owner for
// its last seq, so a lost last message is filled without a next one.
const remoteFeedCheck = 2 * time.Second

type feedSub struct {
	sid string
	ch  chan messages.PersistedEvent
	// liveAfter is the owner's last seq when the stream began, set once the
	// owner answered (live false before): feed messages at or below it were
	// in flight before the follow, however late they arrive (under n.mu).
	liveAfter uint64
	live      bool
}

// subscribeFeed follows sid's live events from its node; cancel ends it.
func (n *Node) subscribeFeed(sid string) (*feedSub, func()) {
	s := &feedSub{sid: sid, ch: make(chan messages.PersistedEvent, feedSubQueue)}
	n.mu.Lock()
	if n.subs == nil {
		n.subs = map[*feedSub]bool{}
	}
	n.subs[s] = true
	n.mu.Unlock()
	return s, func() {
		n.mu.Lock()
		delete(n.subs, s)
		n.mu.Unlock()
	}
}

// deliverFeed hands a live event to the remote streams of its session
// (never blocking: a full queue drops it, and the stream fills the gap).
func (n *Node) deliverFeedLocked(sid string, ev messages.PersistedEvent) {
	for s := range n.subs {
		if s.sid == sid {
			select {
			case s.ch <- ev:
			default:
			}
		}
	}
}

// remoteStream is one SSE response for a session on another node.
type remoteStream struct {
	g    *Gateway
	w    io.Writer
	rc   *http.ResponseController
	sid  string
	last uint64 // the last seq sent
}

// serveRemoteEvents streams sid's events from node to w, from cursor.
func (g *Gateway) serveRemoteEvents(w http.ResponseWriter, r *http.Request, sid string, cursor uint64, hasCursor bool) error {
	ctx := r.Context()
	sub, cancel := g.n.subscribeFeed(sid)
	defer cancel()
	// where to start: after the cursor, or after what the owner has now
	v, _, err := g.n.Get(ctx, sid, 0, 1)
	if err != nil {
		return err
	}
	g.n.mu.Lock()
	sub.liveAfter, sub.live = v.LastSeq, true
	g.n.mu.Unlock()
	st := &remoteStream{g: g, w: w, rc: http.NewResponseController(w), sid: sid, last: v.LastSeq}
	if hasCursor {
		st.last = cursor
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := st.raw("retry: 1000\n\n"); err != nil {
		return nil
	}
	if err := st.fill(ctx, 0); err != nil { // the replay: everything after the cursor
		st.abandon(ctx, err)
		return nil
	}
	check := time.NewTicker(remoteFeedCheck)
	defer check.Stop()
	for {
		select {
		case ev := <-sub.ch:
			switch controlplane.LiveStep(st.last, true, ev.Seq, ev.Seq) {
			case controlplane.LiveDrop:
				continue // replayed or filled already
			case controlplane.LiveFill:
				if err := st.fill(ctx, ev.Seq-1); err != nil { // a lost or dropped feed message
					st.abandon(ctx, err)
					return nil
				}
				if ev.Seq <= st.last {
					continue
				}
			}
			if err := st.event(ev); err != nil {
				return nil
			}
		case <-check.C:
			// a quiet stream: the owner may have events whose feed message
			// was lost with nothing after it
			if err := st.fill(ctx, 0); err != nil {
				st.abandon(ctx, err)
				return nil
			}
			if err := st.raw(": heartbeat\n\n"); err != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// fill sends the owner's events after the cursor, up to upTo (0: all).
func (st *remoteStream) fill(ctx context.Context, upTo uint64) error {
	for {
		v, _, err := st.g.n.Get(ctx, st.sid, st.last, 500)
		if err != nil {
			return err
		}
		for _, ev := range v.Events {
			if upTo > 0 && ev.Seq > upTo {
				return nil
			}
			if ev.Seq <= st.last {
				continue
			}
			if err := st.event(ev); err != nil {
				return err
			}
		}
		if len(v.Events) == 0 || st.last >= v.LastSeq || (upTo > 0 && st.last >= upTo) {
			return nil
		}
	}
}

func (st *remoteStream) event(ev messages.PersistedEvent) error {
	b, err := json.Marshal(controlplane.EventData{SessionID: st.sid, PersistedEvent: ev})
	if err != nil {
		return err
	}
	if err := st.raw(fmt.Sprintf("id: %s\nevent: %s\ndata: %s\n\n", controlplane.EventID(st.sid, ev.Seq), controlplane.TopicEvent, b)); err != nil {
		return err
	}
	st.last = ev.Seq
	return nil
}

// abandon tells the client to reconnect (from its last id) after an error
// reading the owner.
func (st *remoteStream) abandon(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	st.g.n.log.Warn("cluster: remote feed failed", "session", st.sid, "err", err)
	b, _ := json.Marshal(controlplane.ReconnectData{Reason: "error", LastEventID: controlplane.EventID(st.sid, st.last)})
	_ = st.raw(fmt.Sprintf("event: %s\ndata: %s\n\n", controlplane.ReconnectEvent, b))
}

func (st *remoteStream) raw(s string) error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(st.w, s); err != nil {
		return err
	}
	return st.rc.Flush()
}

// events serves GET /api/events: a feed of one session another node holds
// is served here (topic code_session_event); every other feed is the
// daemon's.
func (g *Gateway) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	id := q.Get("sessionId")
	topics := q.Get("topics")
	if id == "" || (topics != "" && topics != controlplane.TopicEvent) {
		g.inner.ServeHTTP(w, r)
		return nil
	}
	sid, _, local, err := g.ownerOfID(r, id, "events")
	if err != nil || local {
		g.inner.ServeHTTP(w, r) // the daemon's feed, and its errors
		return nil
	}
	var cursor uint64
	hasCursor := false
	if le := r.Header.Get("Last-Event-ID"); le != "" {
		csid, seq, err := controlplane.ParseEventID(le)
		if err != nil {
			return err
		}
		if csid != sid {
			return messages.FieldError("events", "Last-Event-ID", "names another session than sessionId")
		}
		cursor, hasCursor = seq, true
	} else if v := q.Get("afterSeq"); v != "" {
		if cursor, err = strconv.ParseUint(v, 10, 64); err != nil {
			return messages.FieldError("events", "afterSeq", "want a non-negative integer")
		}
		hasCursor = true
	}
	return g.serveRemoteEvents(w, r, sid, cursor, hasCursor)
}
