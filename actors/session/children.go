package session

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
)

// Messages between the session and its children.
type (
	// agentEvent is one event of the backend's, as its eventQueue holds it
	agentEvent struct {
		turn int
		ev   messages.Event
	}
	transportCmdFailed struct {
		turn int
		err  error
	}
	baselineReady struct{ turn int }
	diffReady     struct {
		turn int
		diff messages.TurnDiff
	}
	persistReq struct {
		id     uint64 // matches the ack to the request in flight
		create *messages.SessionRecord
		adopt  *messages.SessionRecord // a resumed session's record: replaced, not created
		events []messages.PersistedEvent
		meta   *messages.SessionRecord
	}
	// persistAck: the store holds every event up to upTo (its own LastSeq).
	persistAck struct {
		id         uint64
		upTo       uint64
		createErr  error
		err        error
		metaSent   *messages.SessionRecord
		metaFailed bool
	}
)

// ---- transport host ----

// backendExited is the panic value the host fails with when its backend
// dies: the supervisor then restarts the host, which resumes the backend.
type backendExited struct{ reason string }

func (b backendExited) String() string { return "backend exited: " + b.reason }

type hostOpened struct {
	owner *owned // the instance that opened it: a bounced one is not ours
	sess  transports.Session
	err   error
}

// owned is the backend session one host instance opened, shared with its
// Open goroutine: whatever happens to the hostOpened message (lost to a
// panic, bounced to the next generation), the instance's stop closes what it
// opened, and an Open that finishes after the stop closes it itself.
type owned struct {
	mu     sync.Mutex
	sess   transports.Session
	closed bool
}

// take records s as opened; false when the host has stopped already.
func (o *owned) take(s transports.Session) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.sess = s
	return true
}

// stop marks the host stopped and returns what it opened.
func (o *owned) stop() transports.Session {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	s := o.sess
	o.sess = nil
	return s
}

type hostBackendDied struct{ reason string }

// hostBackendPanicked: a backend call panicked on the host's command chain.
type hostBackendPanicked struct{ reason string }

// StartTimeouter is a transport that says how long its Open may take (its
// own start timeout). The host never gives Open a shorter deadline.
type StartTimeouter interface {
	StartTimeout() time.Duration
}

// openContext is the context of one Open: cancelled when the host stops,
// and past a StartTimeouter's own start timeout (plus a minute's margin).
// Wrappers (transports/contain) are looked through with Unwrap.
func openContext(t transports.Transport) (context.Context, context.CancelFunc) {
	for t != nil {
		if st, ok := t.(StartTimeouter); ok && st.StartTimeout() > 0 {
			return context.WithTimeout(context.Background(), st.StartTimeout()+time.Minute)
		}
		u, ok := t.(interface{ Unwrap() transports.Transport })
		if !ok {
			break
		}
		t = u.Unwrap()
	}
	return context.WithCancel(context.Background())
}

// hostSpec is the session's latest backend spec, an immutable snapshot sent
// by the session actor whenever it changes and to every new host: no
// closure reads the session's state on the host's goroutine.
type hostSpec struct{ spec transports.SessionSpec }

// host drives one backend session for its parent session actor. It opens
// its backend once it has a spec, and queues commands until then.
type host struct {
	transport transports.Transport
	spec      *transports.SessionSpec // nil until the first hostSpec
	parent    *actor.PID
	timeout   time.Duration
	gate      *pressure

	sess       transports.Session
	opening    bool
	cancelOpen context.CancelFunc // ends the Open in flight
	procs      func() *proc.Group // a new process group per Open; nil: none
	last       chan struct{}      // closed when the last command given to the backend is done
	group      *proc.Group        // the current Open's
	queue      []TransportCmd
	owned      *owned // the backend session this instance opened
	log        *slog.Logger
}

func newHost(t transports.Transport, parent *actor.PID, timeout time.Duration, gate *pressure, procs func() *proc.Group, log *slog.Logger) actor.Producer {
	return func() actor.Receiver {
		return &host{transport: t, parent: parent, timeout: timeout, gate: gate, procs: procs, owned: &owned{}, log: log}
	}
}

func (h *host) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case hostSpec:
		first := h.spec == nil
		h.spec = &m.spec
		if first && h.sess == nil && !h.opening {
			h.open(c)
		}
	case hostOpened:
		if m.owner != h.owned {
			return // an earlier instance's, bounced here: that instance's stop closed it
		}
		h.opening = false
		if m.err != nil {
			h.failQueued(c, m.err)
			return
		}
		h.sess = m.sess
		q := h.queue
		h.queue = nil
		for _, cmd := range q {
			h.do(c, cmd)
		}
	case hostBackendPanicked:
		panic(backendPanic(m.reason)) // supervision restarts the host
	case hostBackendDied:
		// Let supervision restart us: the restarted host reopens the
		// backend, resuming its session where the backend can.
		panic(backendExited{reason: m.reason})
	case actor.Stopped:
		if h.cancelOpen != nil {
			h.cancelOpen() // an Open still running is abandoned: it closes what it opened
		}
		if s := h.owned.stop(); s != nil {
			h.close(c, s)
		}
		h.sess = nil
	case TransportCmd:
		if h.sess == nil {
			h.queue = append(h.queue, m)
			if !h.opening && h.spec != nil {
				h.open(c)
			}
			return
		}
		h.do(c, m)
	}
}

func (h *host) open(c *actor.Context) {
	h.opening = true
	engine, self, parent, own, gate := c.Engine(), c.PID(), h.parent, h.owned, h.gate
	spec := *h.spec
	if h.procs != nil {
		// the host keeps the group: it kills it if the backend will not close
		h.group = h.procs()
		spec.Procs = h.group
	}
	queue := &eventQueue{spares: sharedBatches}
	sink := func(turn int, ev messages.Event) {
		if gate != nil {
			gate.wait() // backpressure: the store is behind
		}
		if queue.push(agentEvent{turn: turn, ev: ev}) {
			engine.Send(parent, agentEvents{q: queue})
		}
		if ev.Type == messages.EvError && ev.Fatal {
			engine.Send(self, hostBackendDied{reason: ev.Text})
		}
	}
	t, timeout := h.transport, h.timeout
	// Open is bounded by the backend's own start timeout (each backend
	// bounds its handshake; one that says how long, through StartTimeouter,
	// gets that plus a margin as a deadline too), never by a shorter wall
	// clock of ours; and it ends when the host stops.
	ctx, cancel := openContext(t)
	h.cancelOpen = cancel
	go func() {
		defer cancel()
		s, err := t.Open(ctx, spec, sink)
		if err == nil && !own.take(s) {
			// the host stopped while we were opening: nobody will close it
			cctx, ccancel := context.WithTimeout(context.Background(), timeout)
			_ = s.Close(cctx)
			ccancel()
			return
		}
		engine.Send(self, hostOpened{owner: own, sess: s, err: err})
	}()
}

// eventQueue carries a backend's events to its session in batches: the
// sink appends each event, and only the one that finds the queue empty
// sends a message (agentEvents); the session takes everything queued by
// the time it handles that message. A burst of output (a model streaming,
// a tool's result) then costs the session one message, one wake-up and
// one flush instead of one per event. Order is kept: one queue per Open,
// appended by the backend's reader in emission order and taken whole.
// An event is handled no later than as its own message would have been
// (the message that takes it was sent no later than it would have been),
// possibly earlier: never before anything it was caused by, since what
// the session does reaches the backend only after the session did it.
type eventQueue struct {
	mu  sync.Mutex
	evs []agentEvent
	// spares is where handled batches go (recycle) and where a push that
	// finds the queue empty takes its array; nil: always a new one
	spares chan []agentEvent
}

// sharedBatches is the spares of every session's queue. Spares of its
// own kept each session's last batch for its next burst: an event is 400
// bytes, so 6-13 KiB held by every session, idle or not (137 MiB of the
// live heap at 10,000 sessions). Shared, the arrays are held by the
// bursts in flight, and only sharedBatchesMax of them between bursts.
var sharedBatches = make(chan []agentEvent, sharedBatchesMax)

// firstBatch is the room a new array has (a turn's burst is about this
// many events); maxSpare bounds the arrays kept for reuse: a long burst's
// array goes; sharedBatchesMax bounds how many are kept (about 3 MiB of
// firstBatch's arrays, 13 MiB at most).
const (
	firstBatch       = 16
	maxSpare         = 64
	sharedBatchesMax = 512
)

// push appends e and reports whether the queue was empty: the caller
// then owes the session the agentEvents message that will take it.
func (q *eventQueue) push(e agentEvent) (first bool) {
	q.mu.Lock()
	first = len(q.evs) == 0
	if q.evs == nil {
		select {
		case q.evs = <-q.spares:
		default:
			q.evs = make([]agentEvent, 0, firstBatch) // not grown from one
		}
	}
	q.evs = append(q.evs, e)
	q.mu.Unlock()
	return first
}

// take empties the queue and returns what it held, oldest first.
func (q *eventQueue) take() []agentEvent {
	q.mu.Lock()
	evs := q.evs
	q.evs = nil
	q.mu.Unlock()
	return evs
}

// recycle gives back a batch take returned, once its events are handled
// (the core keeps copies, never the batch).
func (q *eventQueue) recycle(evs []agentEvent) {
	if cap(evs) == 0 || cap(evs) > maxSpare {
		return
	}
	clear(evs) // keeps no event's text alive
	select {
	case q.spares <- evs[:0]:
	default:
	}
}

// agentEvents tells the session that q holds events: it takes them all.
type agentEvents struct{ q *eventQueue }

// hostAbandoned tells the session that its backend session did not close
// in time and was abandoned, its process groups killed.
type hostAbandoned struct {
	wait   time.Duration
	killed int
}

// closeGrace is how long past the backend's own close deadline the host
// waits before it abandons the close.
const closeGrace = time.Second

// close closes the backend session on a goroutine of its own, waiting a
// bounded time: a backend that ignores its context cannot hold the host's
// stop (nor, through hollywood's unbounded child stop, the session's and the
// registry's). One that has not closed by then is abandoned: its process
// groups are killed and the session is told (an event and a metric).
func (h *host) close(c *actor.Context, sess transports.Session) {
	timeout, log := h.timeout, h.log
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		done <- sess.Close(ctx)
	}()
	wait := timeout + closeGrace
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Warn("closing backend session", "err", err)
		}
	case <-t.C:
		killed := h.group.Kill()
		log.Warn("the backend session did not close in time: abandoned, its process groups killed", "wait", wait, "killed", killed)
		c.Send(h.parent, hostAbandoned{wait: wait, killed: killed})
	}
}

func (h *host) failQueued(c *actor.Context, err error) {
	// the cause (a missing binary, a refused flag) is what the driver needs
	for _, cmd := range h.queue {
		if st, ok := cmd.(TStartTurn); ok {
			c.Send(h.parent, transportCmdFailed{turn: st.Turn, err: fmt.Errorf("the backend could not start: %w", err)})
		}
	}
	h.queue = nil
}

// do runs a backend command off the host's Receive, after the commands
// before it (one chain per host, so their order holds): a backend call that
// ignores its context can delay the commands after it, never the host's
// stop. A panic in the backend fails the host, as it would in Receive. A
// session whose commands return at once (transports.Prompt) has them run
// in Receive instead (doHere): it promised they cannot hold the stop.
func (h *host) do(c *actor.Context, cmd TransportCmd) {
	if p, ok := h.sess.(transports.Prompt); ok && h.last == nil && p.Prompt() {
		h.doHere(c, cmd)
		return
	}
	prev, done := h.last, make(chan struct{})
	h.last = done
	sess, timeout, engine, self, parent := h.sess, h.timeout, c.Engine(), c.PID(), h.parent
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		defer func() {
			if p := recover(); p != nil {
				engine.Send(self, hostBackendPanicked{reason: fmt.Sprint(p)})
			}
		}()
		turn, err := runCommand(sess, timeout, cmd)
		if err != nil {
			engine.Send(parent, transportCmdFailed{turn: turn, err: fmt.Errorf("%T: %w", cmd, err)})
		}
	}()
}

// doHere carries out a command of a session whose commands return at once
// (transports.Prompt) on the host's own goroutine: no goroutine per
// command, so the turn's start costs one hand-off less (the host's
// message to the agent loop, not the host's to a command goroutine and
// that one's to the loop). A panic is the backend's, as on the chain.
func (h *host) doHere(c *actor.Context, cmd TransportCmd) {
	var turn int
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				panic(backendPanic(fmt.Sprint(p))) // supervision restarts the host, as on the chain
			}
		}()
		turn, err = runCommand(h.sess, h.timeout, cmd)
	}()
	if err != nil {
		c.Send(h.parent, transportCmdFailed{turn: turn, err: fmt.Errorf("%T: %w", cmd, err)})
	}
}

// backendPanic is what the host panics with when a backend call panicked
// with reason, on the host's goroutine or a command's.
func backendPanic(reason string) string { return "backend panicked: " + reason }

// runCommand carries out one command on the backend session.
func runCommand(sess transports.Session, timeout time.Duration, cmd TransportCmd) (turn int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	switch m := cmd.(type) {
	case TStartTurn:
		turn = m.Turn
		err = sess.StartTurn(ctx, m.Turn, m.Input)
	case TAnswer:
		err = sess.Answer(ctx, m.ClarificationID, m.Decision, m.Reason)
	case TInterrupt:
		if i, ok := sess.(transports.Interrupter); ok {
			err = i.Interrupt(ctx)
		} else {
			err = messages.Errorf(messages.CodeUnsupported, messages.OpInterrupt, "backend cannot interrupt")
		}
	case TSteer:
		if s, ok := sess.(transports.Steerer); ok {
			err = s.Steer(ctx, m.Text)
		} else {
			err = messages.Errorf(messages.CodeUnsupported, messages.OpGuide, "backend cannot steer")
		}
	case TSetModel:
		if s, ok := sess.(transports.ModelSetter); ok {
			err = s.SetModel(ctx, m.Model, m.Effort)
		} else {
			err = messages.Errorf(messages.CodeUnsupported, messages.OpGuide, "backend cannot switch model")
		}
	case TSetPosture:
		if s, ok := sess.(transports.PostureSetter); ok {
			err = s.SetPosture(ctx, m.Posture)
		} else {
			err = messages.Errorf(messages.CodeUnsupported, messages.OpSetPosture, "backend cannot change posture live")
		}
	default: // a kind added without its case here (effects_test.go catches it)
		err = messages.Errorf(messages.CodeInternal, "transport", "the host cannot carry out %T", cmd)
	}
	return turn, err
}

// ---- diff capture ----

// What the session asks of its differ: the core's DiffCmds (DBaseline as it
// is), with what only the shell has, a baseline it took itself
// (diffcapture.Quick; nil: the differ's own).
type (
	// diffPrepare is DPrepare, a hint to diff ahead.
	diffPrepare struct {
		DPrepare
		base diffcapture.Baseline
	}
	// diffFinish is DFinish.
	diffFinish struct {
		DFinish
		base diffcapture.Baseline
	}
	// diffSettle asks the differ to settle what an answer taken at once
	// left (diffcapture.Settler).
	diffSettle struct{}
)

type captureBegun struct {
	turn int
	base diffcapture.Baseline
	err  error
}

type captureDone struct {
	turn int
	diff messages.TurnDiff
}

type differ struct {
	capturer diffcapture.Capturer
	parent   *actor.PID
	timeout  time.Duration
	bases    map[int]diffcapture.Baseline
	warn     map[int]string

	// one Prepare at a time; a tool result meanwhile asks for one more
	preparing bool
	// the Prepare asked for meanwhile (turn 0: none). With a baseline the
	// session took itself (diffPrepare.base) the differ cannot tell that the
	// session had the turn's diff at once meanwhile; such a late Prepare
	// finds the diff prepared already, or diffs for nothing, never for a
	// later turn (Git keys what it prepared by the baseline)
	again diffPrepare
}

// prepareDone says a Prepare returned.
type prepareDone struct{}

func newDiffer(cap diffcapture.Capturer, parent *actor.PID, timeout time.Duration) actor.Producer {
	return func() actor.Receiver {
		return &differ{capturer: cap, parent: parent, timeout: timeout, bases: map[int]diffcapture.Baseline{}, warn: map[int]string{}}
	}
}

func (d *differ) Receive(c *actor.Context) {
	engine, self := c.Engine(), c.PID()
	switch m := c.Message().(type) {
	case DBaseline:
		cp, timeout := d.capturer, d.timeout
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			var b diffcapture.Baseline
			err := safely(func() (err error) { b, err = cp.Begin(ctx); return err })
			engine.Send(self, captureBegun{turn: m.Turn, base: b, err: err})
			settle(cp, timeout)
		}()
	case captureBegun:
		if m.err != nil {
			d.warn[m.turn] = "baseline failed: " + m.err.Error()
		} else {
			d.bases[m.turn] = m.base
		}
		c.Send(d.parent, baselineReady{turn: m.turn})
	case diffFinish:
		base, had := d.bases[m.Turn]
		if m.base != nil {
			base, had = m.base, true
		}
		delete(d.bases, m.Turn)
		warn := d.warn[m.Turn]
		delete(d.warn, m.Turn)
		cp, timeout := d.capturer, d.timeout
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			var diff messages.TurnDiff
			if err := safely(func() error { diff = cp.Finish(ctx, base, m.EditPaths); return nil }); err != nil {
				diff = diffcapture.ToolEventDiff("", m.EditPaths, diffcapture.DefaultMaxFiles, err.Error())
				diff.Warning = err.Error()
			}
			if !had && warn == "" {
				warn = "no baseline for this turn (diff capture restarted)"
			}
			if warn != "" && diff.Warning == "" {
				diff.Warning = warn
			}
			engine.Send(self, captureDone{turn: m.Turn, diff: diff})
			settle(cp, timeout)
		}()
	case captureDone:
		c.Send(d.parent, diffReady{turn: m.turn, diff: m.diff})
	case diffPrepare:
		p, ok := d.capturer.(diffcapture.Preparer)
		base, had := d.bases[m.Turn]
		if m.base != nil {
			base, had = m.base, true
		}
		if !ok || !had {
			return // no Preparer, or the turn is finishing already
		}
		if d.preparing {
			d.again = m
			return
		}
		d.preparing = true
		timeout := d.timeout
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_ = safely(func() error { p.Prepare(ctx, base); return nil })
			engine.Send(self, prepareDone{})
		}()
	case prepareDone:
		d.preparing = false
		if t := d.again; t.Turn != 0 {
			d.again = diffPrepare{}
			c.Send(self, t)
		}
	case diffSettle:
		cp, timeout := d.capturer, d.timeout
		go settle(cp, timeout)
	}
}

// settle runs, after an answer was sent, the work a Capturer left for
// then (diffcapture.Settler): off the turn's path, while the session
// starts the turn or the driver reads the result. The Capturer serializes
// it with the next Begin and Finish itself.
func settle(cp diffcapture.Capturer, timeout time.Duration) {
	s, ok := cp.(diffcapture.Settler)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = safely(func() error { s.Settle(ctx); return nil })
}

// safely runs f, a capturer call on a goroutine of its own (no actor's
// recover covers it), turning a panic into an error.
func safely(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("diff capture panicked: %v", p)
		}
	}()
	return f()
}

// ---- persist ----

// persistChunk bounds one write: a long backlog (a store outage) goes out
// in pieces, so no single Append grows without bound.
const persistChunk = 4096

// persistWriter writes a session's held events and record. It keeps no
// events of its own (the core holds them until acknowledged), only what it
// learnt from the store: after a restart or a failed write, whose outcome is
// unknown (it may have landed), it re-reads LastSeq before writing again,
// so a retry never conflicts with a write that did land.
type persistWriter struct {
	store     store.Store
	sessionID string
	onAppend  func(time.Duration, error)

	// mu guards synced and last against the store's goroutine, which
	// reports pipelined appends (finish); write runs only when none is left
	mu     sync.Mutex
	synced bool   // last is the store's LastSeq (plus the batches started since)
	last   uint64 // the store's last seq, when synced, or the last one started
}

// start begins a pipelined append of req on a store that can overlap a
// session's appends: it returns at once, and the store hands the outcome
// to done (StartAppendThen), which finish turns into the ack. ok is false
// when req must go through write instead: a create or adoption, a writer
// that must re-read LastSeq, nothing new to append, a batch that does not
// follow the last one started, or a store that panicked (done may then
// still be called, or not: its outcome is not reported).
func (w *persistWriter) start(pl store.Pipeliner, req persistReq, done func(error)) (pending pendingAppend, ok bool) {
	w.mu.Lock()
	if req.create != nil || req.adopt != nil || !w.synced {
		w.mu.Unlock()
		return pendingAppend{}, false
	}
	evs := req.events
	for len(evs) > 0 && evs[0].Seq <= w.last {
		evs = evs[1:]
	}
	if len(evs) == 0 || evs[0].Seq != w.last+1 {
		w.mu.Unlock()
		return pendingAppend{}, false
	}
	pending = pendingAppend{meta: req.meta, end: evs[len(evs)-1].Seq, began: time.Now()}
	w.last = pending.end
	// not held across the store: done may run before StartAppendThen
	// returns, or on the store's goroutine meanwhile, and finish takes mu
	w.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			w.mu.Lock()
			w.synced = false
			w.mu.Unlock()
			pending, ok = pendingAppend{}, false // write re-reads LastSeq and tries again
		}
	}()
	pl.StartAppendThen(context.Background(), w.sessionID, evs, req.meta, done)
	return pending, true
}

// pendingAppend is a pipelined append started and not yet reported.
type pendingAppend struct {
	meta  *messages.SessionRecord
	end   uint64
	began time.Time
}

// finish reports a pipelined append whose outcome is err, as write does.
func (w *persistWriter) finish(p pendingAppend, err error) (ack persistAck) {
	ack.metaSent = p.meta
	ack.metaFailed = p.meta != nil
	if w.onAppend != nil {
		w.onAppend(time.Since(p.began), err)
	}
	if err != nil {
		w.mu.Lock()
		w.synced = false
		w.mu.Unlock()
		ack.err = err
		return ack
	}
	ack.upTo, ack.metaFailed = p.end, false
	return ack
}

// write carries out one request and reports the store's durable seq. It
// never uses a timer: a slow disk delays the answer, never decides it. A
// panic inside the store is an error like any other.
func (w *persistWriter) write(req persistReq) (ack persistAck) {
	ack.metaSent = req.meta
	ack.metaFailed = req.meta != nil // until PutMeta took it
	defer func() {
		if p := recover(); p != nil {
			w.synced = false
			err := messages.Errorf(messages.CodeInternal, store.OpAppend, "the store panicked: %v", p)
			if req.create != nil || req.adopt != nil {
				ack.createErr = err
			} else {
				ack.err = err
			}
		}
	}()
	ctx := context.Background()
	if req.create != nil {
		if ack.createErr = w.store.Create(ctx, *req.create); ack.createErr != nil {
			return ack
		}
		w.synced, w.last = true, 0
	}
	if !w.synced {
		last, err := w.store.LastSeq(ctx, w.sessionID)
		if err != nil {
			ack.err = err
			if req.adopt != nil {
				ack.createErr = err
			}
			return ack
		}
		w.synced, w.last = true, last
	}
	ack.upTo = w.last
	evs := req.events
	for len(evs) > 0 && evs[0].Seq <= w.last {
		evs = evs[1:] // landed already (a write that failed after all)
	}
	if len(evs) > 0 {
		if evs[0].Seq != w.last+1 {
			ack.err = messages.Errorf(messages.CodeInternal, store.OpAppend,
				"session %s: the store's log ends at seq %d but the next held event is seq %d", w.sessionID, w.last, evs[0].Seq)
			w.synced = false
			return ack
		}
		// the latest record rides with the events (one durable write
		// where the store can) unless it is an adoption's, which must
		// land after them
		withMeta := req.meta != nil && req.adopt == nil
		start := time.Now()
		var err error
		if withMeta {
			err = w.store.AppendRecord(ctx, w.sessionID, evs, *req.meta)
		} else {
			err = w.store.Append(ctx, w.sessionID, evs)
		}
		if w.onAppend != nil {
			w.onAppend(time.Since(start), err)
		}
		if err != nil {
			w.synced = false
			ack.err = err
			if req.adopt != nil {
				ack.createErr = err
			}
			return ack
		}
		w.last = evs[len(evs)-1].Seq
		ack.upTo = w.last
		if withMeta {
			ack.metaFailed = false
			return ack
		}
	}
	if req.adopt != nil {
		// the adopted event landed before the record says running
		ack.createErr = w.store.PutMeta(ctx, *req.adopt)
		return ack
	}
	if req.meta != nil {
		if err := w.store.PutMeta(ctx, *req.meta); err != nil {
			ack.err = err
		} else {
			ack.metaFailed = false
		}
	}
	return ack
}

// persister is the persist child. On a store.Pipeliner it starts each
// request's append at once (StartAppendThen) and returns: the store
// reports each append from its own goroutine, where the ack is sent, so
// several of a session's requests are in flight (up to the session's
// persistDepth), each joins the WAL's next group commit, and no goroutine
// waits for any of them. Acks go back in request order (acks). Otherwise,
// and for creates, adoptions and re-syncs, it runs one request at a time,
// after every pipelined one has been answered.
type persister struct {
	w      *persistWriter
	parent *actor.PID
	acks   *ackQueue
}

func newPersister(s store.Store, sid string, parent *actor.PID, onAppend func(time.Duration, error)) actor.Producer {
	return func() actor.Receiver {
		p := newPersistPath(s, sid, parent, onAppend)
		return &persister{w: p.w, parent: parent, acks: p.acks}
	}
}

// persistPath is a writer and the queue of its pipelined acks, shared by
// the session, which starts its appends on it itself (the fast path: no
// hop through the persist child), and its persist child, which takes what
// the fast path cannot (creates, adoptions, re-syncs after a failure, a
// store that panicked). The two never start a request at once: the session
// takes the fast path only while no request of its child's is unanswered,
// and the child waits for every pipelined ack before it writes, so acks go
// back in request order. A persist child that fails takes its path with
// it: the session makes a new one (a fresh writer re-reads LastSeq) for
// the restarted child and itself.
type persistPath struct {
	w    *persistWriter
	acks *ackQueue
}

func newPersistPath(s store.Store, sid string, parent *actor.PID, onAppend func(time.Duration, error)) *persistPath {
	w := &persistWriter{store: s, sessionID: sid, onAppend: onAppend}
	return &persistPath{w: w, acks: &ackQueue{w: w, parent: parent}}
}

// newPathPersister is the persist child of a session on the path the
// session shares with it, the current one at each (re)start.
func newPathPersister(cur func() *persistPath) actor.Producer {
	return func() actor.Receiver {
		p := cur()
		return &persister{w: p.w, parent: p.acks.parent, acks: p.acks}
	}
}

// startPipelined starts req's append on a Pipeliner at once, the ack to
// come from the store's report (see persister.Receive). It reports false,
// having started nothing, when req must go through write.
func (p *persistPath) startPipelined(pl store.Pipeliner, engine *actor.Engine, req persistReq) bool {
	a := p.acks.add(engine, req.id)
	if pending, ok := p.w.start(pl, req, func(err error) { p.acks.complete(a, err) }); ok {
		p.acks.started(a, pending)
		return true
	}
	p.acks.drop(a)
	return false
}

func (p *persister) Receive(c *actor.Context) {
	if _, ok := c.Message().(actor.Stopped); ok {
		// a stopped persister answers for its pipelined appends first: a
		// record write still in flight must land before whoever stopped the
		// session writes the record after it (Close orphaning the sessions
		// of a failed registry), never after it
		p.acks.wait()
		return
	}
	m, ok := c.Message().(persistReq)
	if !ok {
		return
	}
	if pl, ok := p.w.store.(store.Pipeliner); ok {
		path := persistPath{w: p.w, acks: p.acks}
		if path.startPipelined(pl, c.Engine(), m) {
			return
		}
	}
	p.acks.wait() // write needs every pipelined append answered
	ack := p.w.write(m)
	ack.id = m.id
	c.Send(p.parent, ack)
}

// ackQueue sends the acks of a persister's pipelined appends to the
// session in request order, from whichever goroutine completes the one at
// its head: the store's, which reports each append (complete), or the
// persister's, when the store answered before StartAppendThen returned
// (started). An ack is sent once its append is both started and reported.
type ackQueue struct {
	w      *persistWriter
	parent *actor.PID

	mu     sync.Mutex
	engine *actor.Engine
	q      []*inflightAppend // in request order; acks not yet sent
	idle   chan struct{}     // closed when q empties, for wait
}

// inflightAppend is one pipelined request whose ack is not yet sent.
type inflightAppend struct {
	id      uint64
	pending pendingAppend
	started bool // StartAppendThen returned: pending is set
	done    bool // the store reported err
	err     error
	dropped bool // not started after all (write takes the request): no ack
}

// add queues the request id, before its append starts (the store may
// report it at once).
func (q *ackQueue) add(engine *actor.Engine, id uint64) *inflightAppend {
	a := &inflightAppend{id: id}
	q.mu.Lock()
	q.engine = engine
	q.q = append(q.q, a)
	q.mu.Unlock()
	return a
}

// started says a's append is under way with pending's details.
func (q *ackQueue) started(a *inflightAppend, pending pendingAppend) {
	q.mu.Lock()
	a.pending, a.started = pending, true
	q.flushLocked()
	q.mu.Unlock()
}

// complete is the store's report of a's append.
func (q *ackQueue) complete(a *inflightAppend, err error) {
	q.mu.Lock()
	a.done, a.err = true, err
	q.flushLocked()
	q.mu.Unlock()
}

// drop takes back a request whose append did not start.
func (q *ackQueue) drop(a *inflightAppend) {
	q.mu.Lock()
	a.dropped = true
	q.flushLocked()
	q.mu.Unlock()
}

// flushLocked sends the acks at the head of the queue that are ready, in
// order (q.mu held: two goroutines never interleave their sends).
func (q *ackQueue) flushLocked() {
	n := 0
	for _, a := range q.q {
		if !a.dropped {
			if !a.started || !a.done {
				break
			}
			ack := q.w.finish(a.pending, a.err)
			ack.id = a.id
			q.engine.Send(q.parent, ack)
		}
		n++
	}
	if n == 0 {
		return
	}
	rest := copy(q.q, q.q[n:]) // the array is kept for the next requests
	clear(q.q[rest:])
	q.q = q.q[:rest]
	if rest == 0 {
		if q.idle != nil {
			close(q.idle)
			q.idle = nil
		}
	}
}

// wait returns once every pipelined request's ack is sent.
func (q *ackQueue) wait() {
	q.mu.Lock()
	if len(q.q) == 0 {
		q.mu.Unlock()
		return
	}
	if q.idle == nil {
		q.idle = make(chan struct{})
	}
	idle := q.idle
	q.mu.Unlock()
	<-idle
}
