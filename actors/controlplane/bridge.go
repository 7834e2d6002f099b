package controlplane

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// Topics of the live feed.
const (
	// TopicEvent carries every live event of a session (text deltas
	// coalesced).
	TopicEvent = "code_session_event"
	// TopicChanged carries a session's record after a status-affecting event.
	TopicChanged = "code_session_changed"
)

// Why a subscription was closed by the bridge.
const (
	dropSlow     = "slow"     // its queue was full: it must reconnect
	dropShutdown = "shutdown" // the daemon is stopping
)

// Bridge defaults.
const (
	DefaultCoalesceWindow  = 250 * time.Millisecond
	DefaultChangedDebounce = 250 * time.Millisecond
	DefaultQueueSize       = 1024
	// changedMaxWait bounds how long a chatty session can postpone its
	// record refresh by re-arming the debounce.
	changedMaxWait = time.Second
	// settleTries bounds how often a record refresh after `released` is
	// retried while the store still shows the session live.
	settleTries = 20
)

// statusAffecting are the event types after which a session's record is
// republished on code_session_changed: they change its status, rounds,
// cost, posture, model or runs.
var statusAffecting = map[messages.EventType]bool{
	messages.EvStarted: true, messages.EvTurnStarted: true, messages.EvTurnEnd: true, messages.EvTurnDiff: true,
	messages.EvEnded: true, messages.EvError: true, messages.EvGuidance: true, messages.EvPosture: true,
	messages.EvReleased: true, messages.EvOrphaned: true, messages.EvAdopted: true,
}

// BridgeOptions tune a Bridge; zero values take the defaults.
type BridgeOptions struct {
	// CoalesceWindow is how long text deltas of one session are held
	// (the last one wins) before they are published.
	CoalesceWindow time.Duration
	// ChangedDebounce is how long after a status-affecting event the
	// record is read from the store and published.
	ChangedDebounce time.Duration
	// QueueSize bounds each subscriber's queue; a subscriber whose queue is
	// full is dropped and told to reconnect.
	QueueSize int
	// Metrics receives the bridge's families (SSE subscribers, drops, the
	// frozen code_specialist_* families); nil registers nothing.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// item is one entry of subscribers' queues. The bridge makes one per
// published event or record and sends the same pointer to every matching
// subscriber: the streams only read it. Queues hold pointers, not items,
// so a queue of QueueSize costs 8 bytes a slot (an item by value made each
// subscriber's channel buffer half a megabyte the garbage collector scanned
// on every cycle, whatever it held).
type item struct {
	topic string
	sid   string
	// from is the first seq this item stands for: its own seq, or for
	// coalesced text the seq of the first delta it replaced. Anything
	// between the subscriber's cursor and from is a gap to fill from the
	// store.
	from uint64
	ev   messages.PersistedEvent // TopicEvent
	// frame is ev's SSE frame, shared by every subscriber the item goes
	// to: encoded once, by the first stream that sends it (not here, on
	// the session's goroutine)
	frame eventFrame
	rec   *messages.SessionRecord // TopicChanged
	seq   uint64                  // TopicChanged: the session's last published seq
	// question is a TopicQuestion item's (question.go)
	question *QuestionData
}

type topicSet struct{ event, changed, question bool }

func (t topicSet) has(topic string) bool {
	return (topic == TopicEvent && t.event) || (topic == TopicChanged && t.changed) || (topic == TopicQuestion && t.question)
}

// subscription is one SSE stream's queue. The bridge is its only sender
// and closes ch (after setting reason) when it drops it.
type subscription struct {
	sid    string // "" for every session
	topics topicSet
	ch     chan *item
	reason string
	// snapSeq is the last seq the bridge had seen for sid when the
	// subscription began: events up to it were emitted before the
	// subscription (and were durable when the bridge saw them).
	snapSeq uint64
}

// pendingText is a session's text deltas waiting for the coalescing window:
// the last delta (whose seq is the published event's id) and the text of
// all of them, concatenated, so a subscriber that keeps up sees the whole
// text, not fragments.
type pendingText struct {
	from  uint64
	ev    messages.PersistedEvent
	text  strings.Builder
	timer *time.Timer
}

type pendingChanged struct {
	timer  *time.Timer
	first  time.Time
	gen    uint64
	settle bool // a released event is among those waiting
	tries  int
}

// Bridge maps the runtime's live-event seam (actors.WithEventListener) onto
// the two SSE topics. Listen never blocks: it only takes the bridge's mutex
// and does non-blocking sends into bounded per-subscriber queues.
type Bridge struct {
	o   BridgeOptions
	log *slog.Logger
	m   *bridgeMetrics

	mu      sync.Mutex
	st      store.Store
	closed  bool
	subs    map[*subscription]struct{}
	text    map[string]*pendingText
	changed map[string]*pendingChanged
	seen    map[string]uint64 // last seq emitted per session
	pub     map[string]uint64 // last seq published per session
	fetches sync.WaitGroup
	// streams counts subscriptions whose stream has not finished: Close
	// waits for them, since a stream still drains its queue from the store.
	streams sync.WaitGroup
	// foreign holds the ids of sessions another node of a cluster runs
	// (ListenForeign, cluster.go); foreignRecord looks up their records
	// (SetForeignRecords).
	foreign       sync.Map
	foreignRecord atomic.Pointer[func(sid string) (messages.SessionRecord, bool)]
}

// NewBridge returns a bridge; pass its Listen to actors.WithEventListener,
// then Attach the runtime's store.
func NewBridge(o BridgeOptions) *Bridge {
	if o.CoalesceWindow <= 0 {
		o.CoalesceWindow = DefaultCoalesceWindow
	}
	if o.ChangedDebounce <= 0 {
		o.ChangedDebounce = DefaultChangedDebounce
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Bridge{o: o, log: log, m: newBridgeMetrics(o.Metrics),
		subs: map[*subscription]struct{}{}, text: map[string]*pendingText{},
		changed: map[string]*pendingChanged{}, seen: map[string]uint64{}, pub: map[string]uint64{}}
}

// Attach gives the bridge the store it reads records and replays from.
func (b *Bridge) Attach(st store.Store) {
	b.mu.Lock()
	b.st = st
	b.mu.Unlock()
}

func (b *Bridge) store() store.Store {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st
}

// Listen is the live-event seam: it sees every event of every session once
// it is made durable (the runtime hands events over after the store has them).
func (b *Bridge) Listen(sid string, ev messages.PersistedEvent) { b.listen(sid, ev, false) }

func (b *Bridge) listen(sid string, ev messages.PersistedEvent, foreign bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if ev.Seq > b.seen[sid] {
		b.seen[sid] = ev.Seq
	}
	if ev.Event.Type == messages.EvText && ev.Event.Delta {
		p := b.text[sid]
		if p == nil {
			p = &pendingText{from: ev.Seq}
			p.timer = time.AfterFunc(b.o.CoalesceWindow, func() { b.flushTextTimer(sid, p) })
			b.text[sid] = p
		}
		p.ev = ev // its seq becomes the coalesced event's id
		p.text.WriteString(ev.Event.Text)
		return
	}
	b.flushTextLocked(sid) // pending text goes first: seq order holds
	b.publishLocked(&item{topic: TopicEvent, sid: sid, from: ev.Seq, ev: ev})
	if statusAffecting[ev.Event.Type] {
		b.scheduleChangedLocked(sid, ev.Event.Type == messages.EvReleased)
	}
}

func (b *Bridge) flushTextTimer(sid string, p *pendingText) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.text[sid] == p {
		b.flushTextLocked(sid)
	}
}

func (b *Bridge) flushTextLocked(sid string) {
	p := b.text[sid]
	if p == nil {
		return
	}
	p.timer.Stop()
	delete(b.text, sid)
	ev := p.ev
	ev.Event.Text = p.text.String()
	b.publishLocked(&item{topic: TopicEvent, sid: sid, from: p.from, ev: ev})
}

// publishLocked offers it to every matching subscriber without blocking;
// a subscriber whose queue is full is dropped.
func (b *Bridge) publishLocked(it *item) {
	if it.topic == TopicEvent {
		b.pub[it.sid] = it.ev.Seq
	}
	for sub := range b.subs {
		if (sub.sid != "" && sub.sid != it.sid) || !sub.topics.has(it.topic) {
			continue
		}
		select {
		case sub.ch <- it:
		default:
			b.dropLocked(sub, dropSlow)
		}
	}
}

func (b *Bridge) dropLocked(sub *subscription, reason string) {
	if _, ok := b.subs[sub]; !ok {
		return
	}
	delete(b.subs, sub)
	sub.reason = reason
	close(sub.ch)
	b.m.subscribers.Dec()
	if reason == dropSlow {
		b.m.dropped.Inc()
		b.log.Warn("live feed: dropped a slow subscriber; it is told to reconnect", "session", sub.sid)
	}
}

// scheduleChangedLocked (re)arms the session's record refresh: a trailing
// debounce, bounded by changedMaxWait.
func (b *Bridge) scheduleChangedLocked(sid string, released bool) {
	pc := b.changed[sid]
	if pc == nil {
		pc = &pendingChanged{first: time.Now()}
		b.changed[sid] = pc
	}
	pc.settle = pc.settle || released
	if pc.timer != nil && time.Since(pc.first) >= changedMaxWait {
		return // the armed refresh fires soon and covers this event too
	}
	if pc.timer != nil {
		pc.timer.Stop()
	}
	pc.gen++
	gen := pc.gen
	pc.timer = time.AfterFunc(b.o.ChangedDebounce, func() { b.fireChanged(sid, pc, gen) })
}

func (b *Bridge) fireChanged(sid string, pc *pendingChanged, gen uint64) {
	b.mu.Lock()
	if b.closed || b.changed[sid] != pc || pc.gen != gen {
		b.mu.Unlock()
		return
	}
	delete(b.changed, sid)
	st := b.st
	b.fetches.Add(1)
	b.mu.Unlock()
	defer b.fetches.Done()
	b.refresh(st, sid, pc)
}

// refresh reads sid's record and publishes it on code_session_changed. A
// refresh owed to a released event waits (retrying) until the store shows
// the session settled, so subscribers and the settle metrics see the final
// record.
func (b *Bridge) refresh(st store.Store, sid string, pc *pendingChanged) {
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, err := st.GetMeta(ctx, sid)
	if err != nil {
		b.log.Debug("live feed: cannot read a record", "session", sid, "err", err)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if pc.settle && rec.Status.Live() && pc.tries < settleTries {
		// the final record has not landed yet: try again shortly
		if cur := b.changed[sid]; cur != nil {
			cur.settle = true
			return
		}
		pc.tries++
		pc.gen++
		gen := pc.gen
		b.changed[sid] = pc
		pc.timer = time.AfterFunc(b.o.ChangedDebounce, func() { b.fireChanged(sid, pc, gen) })
		return
	}
	r := rec
	b.publishLocked(&item{topic: TopicChanged, sid: sid, rec: &r, seq: b.pub[sid]})
	if pc.settle && !rec.Status.Live() && b.changed[sid] == nil && b.text[sid] == nil {
		// settled and durable: a later subscriber finds it all in the store
		delete(b.seen, sid)
		delete(b.pub, sid)
	}
}

// subscribe registers a subscriber. Live events published from now on go
// to its queue; snapSeq tells it where the events it may have missed end.
func (b *Bridge) subscribe(sid string, topics topicSet) (*subscription, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, &messages.Error{Code: messages.CodeInternal, Op: "events", Retryable: true, Message: "the daemon is shutting down"}
	}
	sub := &subscription{sid: sid, topics: topics, ch: make(chan *item, b.o.QueueSize)}
	if sid != "" {
		sub.snapSeq = b.seen[sid]
	}
	b.subs[sub] = struct{}{}
	b.m.subscribers.Inc()
	b.streams.Add(1)
	return sub, nil
}

// unsubscribe removes a subscriber; its stream calls it once, when it ends.
func (b *Bridge) unsubscribe(sub *subscription) {
	b.mu.Lock()
	b.dropLocked(sub, "")
	b.mu.Unlock()
	b.streams.Done()
}

// Close flushes pending text, publishes every pending record refresh (the
// store must still be open), then closes every subscription with a final
// event telling it to reconnect and waits (bounded by ctx) for the streams
// to finish, so the store may be closed after it. Listen does nothing
// afterwards.
func (b *Bridge) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	for sid := range b.text {
		b.flushTextLocked(sid)
	}
	pending := b.changed
	b.changed = map[string]*pendingChanged{}
	for _, pc := range pending {
		pc.timer.Stop()
	}
	st := b.st
	b.mu.Unlock()
	for sid, pc := range pending {
		if ctx.Err() != nil {
			break
		}
		pc.settle = false // the runtime is closed: what the store holds is final
		b.refresh(st, sid, pc)
	}
	b.mu.Lock()
	b.closed = true
	for sub := range b.subs {
		b.dropLocked(sub, dropShutdown)
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.fetches.Wait(); b.streams.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
