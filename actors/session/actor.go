package session

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/supervise"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
)

// Child names, in start order. Release stops transport and diff capture
// (reverse order), persists `released`, then stops persist.
const (
	ChildPersist   = "persist"
	ChildDiff      = "diffcapture"
	ChildTransport = "transport"
)

// Hooks are the runtime's observers of a session; every field is optional
// and is called on the session's goroutine, so it must not block.
type Hooks struct {
	// Event sees every event once the store has acknowledged it (the live
	// seam: nothing reaches the feed that a crash could take back).
	Event func(sessionID string, ev messages.PersistedEvent)
	// Result sees every read-turn result as it is delivered.
	Result func(r messages.TurnResult)
	// Supervision sees child restarts and escalations.
	Supervision func(ev supervise.Event)
	// Append sees each store append's latency and error.
	Append func(d time.Duration, err error)
	// Released sees the end of the session.
	Released func(rec messages.SessionRecord, reason messages.ReleaseReason)
}

// Options configure one session actor.
type Options struct {
	Spec      Spec
	Transport transports.Transport
	// Env and Home go to the backend (SessionSpec.Env/Home).
	Env  []string
	Home string

	Store    store.Store
	Capturer diffcapture.Capturer
	Policy   supervise.Policy
	// ShutdownTimeout bounds each child's stop, and a shutdown release (after
	// twice this the session is abandoned to the boot sweep, never reported
	// released). Store writes have no deadline.
	ShutdownTimeout time.Duration
	// MaxHeld is how many unacknowledged events the session holds before it
	// stops reading its backend (DefaultMaxHeld when 0).
	MaxHeld int
	// StoreGiveUp is how many failed store writes in a row release the
	// session with reason store (DefaultStoreGiveUp when 0).
	StoreGiveUp int
	// Lifetime releases the session this long after start; 0 disables.
	Lifetime time.Duration
	// StallAfter records a warning when a running turn has produced no
	// output for this long (once per silence); 0 disables.
	StallAfter time.Duration
	// LastSeq continues an adopted record's log; 0 for a new session.
	LastSeq uint64
	// Adopt, when set, is the record a resumed session continues (its id
	// is Spec.SessionID); the record is replaced, not created.
	Adopt *messages.SessionRecord

	// Registry gets Created and Done.
	Registry *actor.PID
	// StartReply gets the start result once the record is durable.
	StartReply chan<- Result[messages.StartResult]

	Now    func() time.Time
	Hooks  Hooks
	Logger *slog.Logger // nil: slog.Default()
	// Procs, when set, makes the process group of each backend Open
	// (SessionSpec.Procs), so that an abandoned backend's processes can be
	// killed.
	Procs func() *proc.Group
	// DiffDeadline bounds each diff-capture stage of a turn (baseline,
	// diff): past it the turn goes on without (a warning and the tool-event
	// fallback diff). 0: DefaultDiffDeadline(ShutdownTimeout).
	DiffDeadline time.Duration
	// Inject, when set, sees every message of the session actor (actor
	// "session") and of its children (actor: the child's name) first, on
	// that actor's goroutine (fault injection in tests: it may panic).
	Inject func(actor string, msg any)
}

type (
	childrenStopped struct{}
	persistStopped  struct{}
	lifetimeDue     struct{}
	releaseDeadline struct{}
	persistRetry    struct{}
	// stallCheck fires StallAfter after the last sign of life of a turn.
	stallCheck struct{ gen int }
	// diffDue fires DiffDeadline after a diff-capture request of turn.
	diffDue struct{ turn, gen int }
)

// DefaultDiffDeadline is the diff-capture deadline per stage for a session
// whose children's shutdown timeout is shutdown: past diff capture's own
// timeout (4*shutdown), with a minute to spare, so it fires only when diff
// capture can no longer answer at all.
func DefaultDiffDeadline(shutdown time.Duration) time.Duration {
	return 4*shutdown + time.Minute
}

// Actor is the session's thin shell: it translates messages into Core
// inputs and carries out the Core's effects.
type Actor struct {
	o    Options
	core *Core
	sup  *supervise.Supervisor

	created     bool
	stopWaiters []chan<- Result[messages.StopResult]
	reason      messages.ReleaseReason
	lifetime    *time.Timer
	deadline    *time.Timer
	doneMsg     Done
	// stoppedByCaller: the release was begun by a stop op (its caller is
	// the one answered alreadyStopped=false).
	stoppedByCaller bool
	stall           *time.Timer
	stallGen        int
	diffTimer       *time.Timer
	diffGen         int
	// quick answers diff-capture stages at once when it can (nil: the
	// capturer cannot); quickBase is the baseline it took for quickTurn
	quick        diffcapture.Quick
	quickTurn    int
	quickBase    diffcapture.Baseline
	pendingReads map[uint64]chan<- Result[messages.TurnResult]

	// persistence: up to persistDepth requests in flight (one where the
	// store cannot overlap a session's appends); what accumulates
	// meanwhile goes in the next one. Acks come back in request order;
	// ids below liveFrom belong to a persist child that died. sentUpTo is
	// the last seq sent; after a failure it falls back to the durable seq.
	// failedThrough is the last id sent when a failure was counted: the
	// failures of requests already in flight then are the same failure.
	gate          *pressure
	inflight      int
	reqID         uint64
	liveFrom      uint64
	sentUpTo      uint64
	failedThrough uint64
	lastMetaSent  *messages.SessionRecord // the newest record sent, in request metaSentID
	metaSentID    uint64
	metaAckedID   uint64 // the newest request whose record the store took
	pendingMeta   *messages.SessionRecord
	retryIn       time.Duration
	retry         *time.Timer
	retryArmed    bool
	fallback      *persistWriter // used when the persist child is gone for good
	// path is the writer the session shares with its persist child: the
	// session starts its pipelined appends on it itself (startDirect),
	// the child takes the rest. viaChild is the last request id sent to
	// the child, ackedID the last one whose ack was taken: the session
	// starts none itself while a request of the child's is unanswered.
	path     atomic.Pointer[persistPath]
	viaChild uint64
	ackedID  uint64
	// holding: streamed output is held back for the rest of its turn
	// (coalesce.go) until holdTimer fires; holdGen tells its stale fires
	// apart, holdDue says the wait is over.
	holdTimer *time.Timer
	holdGen   int
	holding   bool
	holdDue   bool
	// parked are op answers waiting for the events their op emitted to be
	// durable: an op's ok is an acknowledgement too.
	parked []parkedReply
	// crashAnswered: a panic was recovered and every held caller answered
	crashAnswered bool
	// current is the message being handled: if it panics, crashed answers it
	current any
	// sentSpec is the last backend spec sent to the host
	sentSpec *transports.SessionSpec
	initReq  persistReq // the create or adopt request, sent again if persist dies with it
}

type parkedReply struct {
	seq  uint64
	send func(error)
}

// persistDepth is how many persist requests a session may keep in flight
// on a store that overlaps a session's appends (store.Pipeliner): each
// then joins the WAL's next group commit instead of waiting for the
// previous one's ack. It is two, the second only for a batch someone
// waits on (overtakes): a turn's last batch (turn_end, which read-turn
// waits for) starts while the batch before it is still being synced,
// instead of queueing behind its ack. At 10,000 sessions that took
// read-turn p50 from 0.4-0.5 s to a few ms, and durable events/s did not
// fall; four in flight, every batch alike (measured at load 17-24), split
// the same events into 1.8x the appends without raising events/s
// (bench/README.md). depth_test.go fails two in flight every way a store
// fails.
const persistDepth = 2

// Persist retry backoff after a failed write.
const (
	persistRetryMin = 50 * time.Millisecond
	persistRetryMax = 5 * time.Second
)

// NewProducer returns the hollywood producer of a session actor.
func NewProducer(o Options) actor.Producer {
	return func() actor.Receiver { return &Actor{o: o} }
}

// Spawn starts a session actor as a child of the actor running c (the
// registry), hardened like every actor (supervise.SpawnChild) under the id
// o.Spec.SessionID. A panic in the session answers every caller it holds
// (see crashed) before the registry hears of it as supervise.ChildFailed
// named after the session id; later messages reach the registry as
// supervise.Undelivered with the same name.
func Spawn(c *actor.Context, o Options) *actor.PID {
	a := &Actor{o: o}
	return supervise.SpawnChild(c, func() actor.Receiver { return a }, "session",
		supervise.RecoverOptions{Name: o.Spec.SessionID, OnFailure: a.crashed}, actor.WithID(o.Spec.SessionID))
}

// FailedError is the answer of every op a crashed session held or is sent:
// typed failed, naming the cause.
func FailedError(op, cause string) error {
	return messages.Errorf(messages.CodeFailed, op, "the session failed: %s", cause)
}

// crashed runs on the session's goroutine right after a panic was recovered:
// the actor's state can no longer be trusted, so it serves nothing more, but
// every caller it holds gets exactly one answer now (the registry, which
// stops the actor and marks its record failed, cannot reach them).
func (a *Actor) crashed(f supervise.ChildFailed) {
	if a.crashAnswered {
		return
	}
	a.crashAnswered = true
	cause := f.Reason
	defer func() {
		if op, ok := a.current.(Op); ok {
			// last, the op the session panicked on: answered already when
			// it was held above (or before the panic), so never block
			failNoWait(op, FailedError("session", cause))
		}
	}()
	if !a.created && (a.core == nil || a.core.Life() == LifeRunning) && a.o.StartReply != nil {
		a.o.StartReply <- Result[messages.StartResult]{Err: FailedError(messages.OpStart, cause)}
	}
	for tok, ch := range a.pendingReads {
		ch <- Result[messages.TurnResult]{Err: FailedError(messages.OpReadTurn, cause)}
		delete(a.pendingReads, tok)
	}
	for _, w := range a.stopWaiters {
		w <- Result[messages.StopResult]{Err: FailedError(messages.OpStop, cause)}
	}
	a.stopWaiters = nil
	for _, p := range a.parked {
		p.send(FailedError("session", cause))
	}
	a.parked = nil
}

func (a *Actor) log() *slog.Logger {
	if a.o.Logger != nil {
		return a.o.Logger
	}
	return slog.Default()
}

func (a *Actor) now() time.Time {
	if a.o.Now != nil {
		return a.o.Now()
	}
	return time.Now()
}

// answer sends an op's answer, or parks it until the events the op emitted
// are durable.
func (a *Actor) answer(err error, send func(error)) {
	if err == nil && a.core.LastSeq() > a.core.DurableSeq() {
		a.parked = append(a.parked, parkedReply{seq: a.core.LastSeq(), send: send})
		return
	}
	send(err)
}

func (a *Actor) releaseParked() {
	d := a.core.DurableSeq()
	kept := a.parked[:0]
	for _, p := range a.parked {
		if p.seq <= d {
			p.send(nil)
		} else {
			kept = append(kept, p)
		}
	}
	a.parked = kept
}

// closeCapturer lets a capturer that keeps per-session state on disk (git's
// scratch snapshot) remove it once the diff child has stopped for good: the
// differ cannot, since hollywood stops it on every crash too. Off Receive:
// Close waits for a capture still running on the stopped differ's
// goroutine, which may take until the capture's own deadline.
func (a *Actor) closeCapturer() {
	if cl, ok := a.o.Capturer.(io.Closer); ok {
		go func() { _ = cl.Close() }()
	}
}

// lifeEffects carries out the core's steps of the session's end.
func (a *Actor) lifeEffects(c *actor.Context, effs []LifeEffect) {
	for _, e := range effs {
		switch e {
		case StopWorkers:
			a.sup.StopChildren(c, []string{ChildTransport, ChildDiff}, childrenStopped{})
		case StopPersist:
			if a.deadline != nil {
				a.deadline.Stop()
			}
			if a.core.ReleaseAbandoned() {
				a.abandonParked()
				a.doneMsg = Done{SessionID: a.o.Spec.SessionID, Scope: a.o.Spec.OwnerScope, Reason: a.reason, Outcome: a.core.Outcome(), Abandoned: true}
			} else {
				if a.o.Hooks.Released != nil {
					a.o.Hooks.Released(a.core.Record(), a.reason)
				}
				a.doneMsg = Done{SessionID: a.o.Spec.SessionID, Scope: a.o.Spec.OwnerScope, Reason: a.reason, Outcome: a.core.Outcome()}
			}
			a.sup.StopChildren(c, []string{ChildPersist}, persistStopped{})
		case StopEverything:
			a.sup.StopAll(c, persistStopped{})
		case ReportDone:
			// The registry stops this actor when it hears Done: one poisoner
			// only, since a second pill to a stopping actor is never answered
			// (hollywood waits on it forever). Done goes before the stop
			// replies, so whatever a stop caller does next reaches a registry
			// that already knows the session is released.
			c.Send(a.o.Registry, a.doneMsg)
			a.answerStops()
		}
	}
}

// abandonParked answers the ops parked on events that will never be
// durable: a shutdown release was abandoned, the record is left live on disk
// for the boot sweep (orphaned), and nobody is told it was released.
func (a *Actor) abandonParked() {
	a.log().Warn("session: the store did not take the released event before the shutdown deadline; the record is left for the boot sweep",
		"session", a.o.Spec.SessionID, "held", a.core.Held())
	err := messages.Errorf(messages.CodeUnavailable, messages.OpStop,
		"the runtime shut down before the session's release was durable; its record will be marked orphaned")
	for _, p := range a.parked {
		p.send(err)
	}
	a.parked = nil
}

func (a *Actor) start(c *actor.Context, now time.Time) {
	a.pendingReads = map[uint64]chan<- Result[messages.TurnResult]{}
	if a.o.Adopt != nil {
		a.core = Adopt(a.o.Spec, *a.o.Adopt, now, a.o.LastSeq)
	} else {
		a.core = New(a.o.Spec, now, a.o.LastSeq)
	}
	self := c.PID()
	timeout := a.o.ShutdownTimeout
	capturer := a.o.Capturer
	if capturer == nil {
		capturer = diffcapture.Noop{}
	}
	off, captureOff := capturer.(diffcapture.Noop)
	if captureOff {
		a.core.CaptureOff(off.Finish(context.Background(), nil, nil))
	}
	a.quick, _ = capturer.(diffcapture.Quick)
	a.core.SetStoreGiveUp(a.o.StoreGiveUp)
	a.gate = newPressure(a.o.MaxHeld)
	a.path.Store(newPersistPath(a.o.Store, a.o.Spec.SessionID, self, a.o.Hooks.Append))
	specs := []supervise.ChildSpec{
		{Name: ChildPersist, Restart: supervise.Permanent, ShutdownTimeout: timeout,
			Producer: newPathPersister(a.path.Load)},
	}
	if !captureOff {
		// with capture off the core decides each turn's diff itself and
		// never sends the differ anything: no child idles for it
		specs = append(specs, supervise.ChildSpec{Name: ChildDiff, Restart: supervise.Transient, ShutdownTimeout: timeout,
			Producer: newDiffer(capturer, self, 4*timeout)})
	}
	specs = append(specs, supervise.ChildSpec{Name: ChildTransport, Restart: supervise.Permanent, ShutdownTimeout: 2*timeout + closeGrace,
		Producer: newHost(a.o.Transport, self, timeout, a.gate, a.o.Procs, a.log())})
	if inj := a.o.Inject; inj != nil {
		for i := range specs {
			specs[i].Producer = injecting(specs[i].Name, specs[i].Producer, inj)
		}
	}
	a.sup = supervise.New(specs, a.o.Policy)
	a.sup.OnEvent = func(ev supervise.Event) {
		if a.o.Hooks.Supervision != nil {
			a.o.Hooks.Supervision(ev)
		}
		if ev.Child == ChildPersist && (ev.Kind == supervise.EventFailed || ev.Kind == supervise.EventEscalated) {
			// the failed child's writer may have been mid-write: the
			// restarted child and the session's own appends go on a
			// fresh one, which re-reads LastSeq first (the old path's
			// late acks are ignored by their ids)
			a.path.Store(newPersistPath(a.o.Store, a.o.Spec.SessionID, self, a.o.Hooks.Append))
		}
		if ev.Child == ChildPersist && (ev.Kind == supervise.EventFailed || ev.Kind == supervise.EventEscalated) && !a.created && a.inflight > 0 {
			a.reqID++ // the create (or adopt) request died with the child: again
			a.initReq.id = a.reqID
			a.sendPersist(c, a.initReq)
		}
		if ev.Child == ChildPersist && (ev.Kind == supervise.EventFailed || ev.Kind == supervise.EventEscalated) && a.created {
			// the requests in flight died with it: send them again (the new
			// writer re-reads LastSeq first); late acks of the old ones are
			// ignored by their ids
			a.inflight = 0
			a.liveFrom = a.reqID + 1
			a.sentUpTo = a.core.DurableSeq()
			if a.pendingMeta == nil && a.metaSentID > a.metaAckedID {
				// the newest record sent may have died with them too
				a.pendingMeta = a.lastMetaSent
			}
			a.pump(c)
		}
		if ev.Child == ChildDiff && diffLostBy(ev) && !a.core.Life().Releasing() {
			// whatever diff capture was working on died with it (a late
			// answer of the old instance goes to a PID nobody reads)
			a.diffLost(a.now(), a.core.Turn(), fmt.Sprintf("diff capture %s (%s)", ev.Kind, firstNonEmpty(ev.Cause, ev.Reason)))
			a.flush(c)
		}
		if ev.Kind == supervise.EventAbandoned {
			a.core.ChildAbandoned(a.now(), ev.Child, fmt.Sprintf("%s did not stop within its shutdown timeout: abandoned", ev.Child))
			a.flush(c)
		}
		if ev.Child == ChildTransport && ev.Kind == supervise.EventRestarted {
			// the new host gets the spec before the commands held for it
			a.sendHostSpec(c, true)
		}
		if ev.Kind != supervise.EventFailed || a.core.Life().Releasing() {
			return
		}
		t := a.now()
		why := firstNonEmpty(ev.Cause, ev.Reason)
		a.core.Supervised(t, ev.Child, fmt.Sprintf("%s failed (%s); restarting after %s", ev.Child, why, ev.Delay))
		if ev.Child == ChildTransport {
			a.core.TransportFailed(t, 0, "the transport failed and is being restarted: "+why)
		}
		a.flush(c)
	}
	if err := a.sup.StartAll(c); err != nil {
		panic(err) // a programming error in the child specs
	}
	a.sendHostSpec(c, true)
	rec := a.core.Record()
	a.reqID++
	a.inflight = 1
	if a.core.Adopted() {
		a.core.Drain() // the adopted event goes with the record (it stays held until acknowledged)
		a.initReq = persistReq{id: a.reqID, adopt: &rec, events: a.core.Unpersisted(0)}
	} else {
		a.initReq = persistReq{id: a.reqID, create: &rec}
	}
	a.sendPersist(c, a.initReq)
	if a.o.Lifetime > 0 {
		engine := c.Engine()
		a.lifetime = time.AfterFunc(a.o.Lifetime, func() { engine.Send(self, lifetimeDue{}) })
	}
}

// injecting wraps a child's producer so that inject sees its messages first.
func injecting(name string, p actor.Producer, inject func(string, any)) actor.Producer {
	return func() actor.Receiver {
		r := p()
		return injected{Receiver: r, name: name, inject: inject}
	}
}

type injected struct {
	actor.Receiver
	name   string
	inject func(string, any)
}

func (i injected) Receive(c *actor.Context) {
	i.inject(i.name, c.Message())
	i.Receiver.Receive(c)
}

// hostSpec is the backend spec as of now, built on the session's goroutine:
// an immutable value (its slices are copies) that the host may keep.
func (a *Actor) hostSpec() transports.SessionSpec {
	s, rec := a.o.Spec, &a.core.rec // read here, on the session's goroutine
	return transports.SessionSpec{SessionID: s.SessionID, Cwd: s.Cwd, Model: rec.Model, Effort: rec.Effort,
		Posture: rec.Posture, AllowedTools: slices.Clone(s.AllowedTools), AppendSystemPrompt: s.AppendSystemPrompt,
		ResumeExternalID: a.core.ExternalID(), Env: slices.Clone(a.o.Env), Home: a.o.Home,
		Provision: s.Provision, Network: s.Network}.WithProvision()
}

// sendHostSpec sends the host the current spec when it changed since the
// last one sent (always, when force: a new host has none).
func (a *Actor) sendHostSpec(c *actor.Context, force bool) {
	if a.sup == nil || a.core.Life().Releasing() {
		return
	}
	// compared before the spec is built: flush runs once per message, and
	// building one clones the tools and the environment
	rec := &a.core.rec
	if last := a.sentSpec; !force && last != nil && last.Model == rec.Model && last.Effort == rec.Effort &&
		last.Posture == rec.Posture && last.ResumeExternalID == a.core.ExternalID() {
		return
	}
	a.sendNewHostSpec(c)
}

// sendNewHostSpec builds and sends the spec (a call of its own: flush
// checks for a change on every message, and a spec is some 300 bytes of
// frame; see Core.emit).
//
//go:noinline
func (a *Actor) sendNewHostSpec(c *actor.Context) {
	spec := a.hostSpec()
	a.sentSpec = &spec
	a.send(c, ChildTransport, hostSpec{spec: spec})
}

// diffLostBy says whether ev took diff capture's work in flight with it: a
// failure, an escalation, an abandoned instance, dropped requests, or a
// restart because an earlier sibling (persist) restarted (rest-for-one).
func diffLostBy(ev supervise.Event) bool {
	switch ev.Kind {
	case supervise.EventFailed, supervise.EventEscalated, supervise.EventAbandoned, supervise.EventDropped:
		return true
	case supervise.EventRestarted:
		return ev.Reason == supervise.ReasonSiblingRestart
	}
	return false
}

// abandonedChild reports a child that did not stop in time: an event in the
// session's log (while it is still being written) and the supervision hook,
// which the runtime counts.
func (a *Actor) abandonedChild(now time.Time, child, text string) {
	a.core.ChildAbandoned(now, child, text)
	if a.o.Hooks.Supervision != nil {
		a.o.Hooks.Supervision(supervise.Event{Kind: supervise.EventAbandoned, Child: child, Reason: text})
	}
}

func (a *Actor) diffDeadline() time.Duration {
	if a.o.DiffDeadline > 0 {
		return a.o.DiffDeadline
	}
	return DefaultDiffDeadline(a.o.ShutdownTimeout)
}

// armDiff starts the deadline of the diff-capture request just sent; a newer
// request makes an older deadline moot.
func (a *Actor) armDiff(c *actor.Context, turn int) {
	a.diffGen++
	if a.diffTimer != nil {
		a.diffTimer.Stop()
	}
	engine, self, gen := c.Engine(), c.PID(), a.diffGen
	a.diffTimer = time.AfterFunc(a.diffDeadline(), func() { engine.Send(self, diffDue{turn: turn, gen: gen}) })
}

// armStall restarts the stall timer: status comes from protocol events plus
// this timer, never from scraping a screen.
func (a *Actor) armStall(c *actor.Context) {
	if a.o.StallAfter <= 0 {
		return
	}
	a.stallGen++
	if a.stall != nil {
		a.stall.Stop()
	}
	engine, self, gen := c.Engine(), c.PID(), a.stallGen
	a.stall = time.AfterFunc(a.o.StallAfter, func() { engine.Send(self, stallCheck{gen: gen}) })
}

func (a *Actor) send(c *actor.Context, child string, msg any) {
	if err := a.sup.Send(c, child, msg); err != nil {
		a.log().Error("session: cannot reach child", "session", a.o.Spec.SessionID, "child", child, "err", err)
	}
}

// pump sends persist requests while fewer than the depth are in flight:
// the held events not yet sent (up to a chunk each) and the latest record.
func (a *Actor) pump(c *actor.Context) {
	for a.inflight < a.persistDepth() && !a.retryArmed && a.created && a.core.Life() < LifeStoppingPersist {
		evs := a.core.Unsent(a.sentUpTo, persistChunk)
		if len(evs) == 0 && (a.pendingMeta == nil || a.inflight > 0) {
			return // a record alone waits for the batches in flight
		}
		if a.inflight > 0 && !overtakes(evs, a.oldestParkedUnsent()) {
			return // only what someone waits on takes a second slot
		}
		if a.hold(c, evs) {
			return // streamed output waits for the rest of its turn
		}
		a.reqID++
		a.inflight++
		req := persistReq{id: a.reqID, events: evs, meta: a.pendingMeta}
		if len(evs) > 0 {
			a.sentUpTo = evs[len(evs)-1].Seq
			a.core.Sent(a.sentUpTo)
		}
		if a.pendingMeta != nil {
			a.lastMetaSent, a.metaSentID = a.pendingMeta, a.reqID
		}
		a.pendingMeta = nil
		a.sendPersist(c, req)
	}
}

// hold holds a batch of streamed output back (mayHold) for up to
// persistCoalesce, arming the timer that ends the wait; once anything is
// sent, the next wait starts afresh.
func (a *Actor) hold(c *actor.Context, evs []messages.PersistedEvent) bool {
	if !a.holdDue && mayHold(evs, a.pendingMeta != nil, a.oldestParkedUnsent(), a.core.Life() == LifeRunning) {
		if !a.holding {
			a.holding = true
			a.holdGen++
			gen, engine, self := a.holdGen, c.Engine(), c.PID()
			a.holdTimer = time.AfterFunc(persistCoalesce, func() { engine.Send(self, persistFlushDue{gen: gen}) })
		}
		return true
	}
	if a.holding {
		a.holdTimer.Stop()
	}
	a.holding, a.holdDue = false, false
	return false
}

// oldestParkedUnsent is the lowest seq a parked op answer waits for that
// no batch sent carries yet (0: none). An answer waiting on a seq already
// sent is released by that batch's ack, and a later batch does nothing
// for it: counting it let a native turn's streamed output start beside
// the guidance batch in flight (the guide op's answer parked on its seq)
// as a group commit of its own that nobody waits on, and kept it from
// being held for the turn's end (2.2-2.75 commits per turn at c=1 where
// 2 are needed). After a failed write sentUpTo falls back to the durable
// seq, and the seqs sent again count again.
func (a *Actor) oldestParkedUnsent() uint64 {
	oldest := uint64(0)
	for _, p := range a.parked {
		if p.seq > a.sentUpTo && (oldest == 0 || p.seq < oldest) {
			oldest = p.seq
		}
	}
	return oldest
}

// persistDepth is how many requests may be in flight: persistDepth on a
// store that overlaps a session's appends through its persist child, else
// one.
func (a *Actor) persistDepth() int {
	if _, ok := a.o.Store.(store.Pipeliner); ok && a.fallback == nil {
		return persistDepth
	}
	return 1
}

// startDirect starts req's append itself, on the path it shares with its
// persist child, when the store pipelines appends and nothing the child
// was sent is unanswered: the store reports it on its own goroutine,
// where the ack is sent (ackQueue), so the request costs no hop through
// the child. It reports false when req must go to the child (a create or
// adoption, a writer that must re-read LastSeq, a store that panicked).
func (a *Actor) startDirect(c *actor.Context, req persistReq) bool {
	pl, ok := a.o.Store.(store.Pipeliner)
	if !ok || a.fallback != nil || (a.viaChild > a.ackedID && a.viaChild >= a.liveFrom) {
		return false
	}
	return a.path.Load().startPipelined(pl, c.Engine(), req)
}

// sendPersist hands a request to the persist child, or, when that child is
// gone for good (escalated), to a writer goroutine of the session's own, so
// that release can still make `released` durable.
func (a *Actor) sendPersist(c *actor.Context, req persistReq) {
	if st := a.sup.State(ChildPersist); st != supervise.StateEscalated && st != supervise.StateDown {
		if a.startDirect(c, req) {
			return
		}
		if err := a.sup.Send(c, ChildPersist, req); err == nil {
			a.viaChild = req.id
			return
		}
	}
	if a.fallback == nil {
		a.fallback = &persistWriter{store: a.o.Store, sessionID: a.o.Spec.SessionID, onAppend: a.o.Hooks.Append}
	}
	w, engine, self := a.fallback, c.Engine(), c.PID()
	go func() {
		ack := w.write(req)
		ack.id = req.id
		engine.Send(self, ack)
	}()
}

func (a *Actor) persisted(c *actor.Context, now time.Time, m persistAck) {
	if m.id < a.liveFrom || m.id > a.reqID || a.inflight == 0 {
		return // the ack of a request given up on (its child restarted)
	}
	a.inflight--
	a.ackedID = m.id
	if !a.created && !a.createdBy(c, now, &m) {
		return
	}
	if m.err != nil && m.id <= a.failedThrough {
		// sent before the failure already counted, and failed with it
		// (the store fails every later batch of a failed one)
		return
	}
	a.core.Persisted(now, m.upTo, m.err)
	if m.metaSent != nil && !m.metaFailed {
		a.metaAckedID = max(a.metaAckedID, m.id)
	}
	if a.pendingMeta == nil {
		switch {
		case m.err != nil && a.metaSentID > a.metaAckedID:
			// the newest record sent failed with this request or will
			// with a later one (the store fails every later batch)
			a.pendingMeta = a.lastMetaSent
		case m.metaFailed:
			a.pendingMeta = m.metaSent
		}
	}
	if m.err != nil {
		a.writeFailed(c, m.err)
	} else {
		a.retryIn = 0
	}
}

// createdBy takes the ack of the record's creation (or adoption): the
// start is answered, and the first turn begins. It reports false when the
// creation failed. A method of its own: see Core.emit.
//
//go:noinline
func (a *Actor) createdBy(c *actor.Context, now time.Time, m *persistAck) bool {
	if m.createErr != nil {
		a.o.StartReply <- Result[messages.StartResult]{Err: messages.AsError(messages.OpStart, m.createErr)}
		a.doneMsg = Done{SessionID: a.o.Spec.SessionID, Scope: a.o.Spec.OwnerScope, Err: m.createErr}
		a.core.CreateFailed()
		return false
	}
	a.created = true
	s := &a.o.Spec
	a.o.StartReply <- Result[messages.StartResult]{Val: messages.StartResult{SessionID: s.SessionID, Backend: s.Descriptor.ID,
		Posture: s.Posture, MaxPosture: s.MaxPosture, MaxRounds: s.MaxRounds, MaxCostUSD: s.MaxCostUSD, Model: s.Model, Effort: s.Effort}}
	c.Send(a.o.Registry, Created{SessionID: s.SessionID})
	a.core.Created(now)
	return true
}

// writeFailed arms the retry of a failed write, and gives the session up
// when the store kept failing.
//
//go:noinline
func (a *Actor) writeFailed(c *actor.Context, err error) {
	a.failedThrough = a.reqID
	a.sentUpTo = a.core.DurableSeq() // what is held goes again
	a.retryIn = min(max(2*a.retryIn, persistRetryMin), persistRetryMax)
	a.retryArmed = true
	engine, self := c.Engine(), c.PID()
	a.retry = time.AfterFunc(a.retryIn, func() { engine.Send(self, persistRetry{}) })
	a.log().Warn("session: a store write failed; the events stay held and are written again",
		"session", a.o.Spec.SessionID, "retryIn", a.retryIn, "err", err)
	if a.core.StoreGaveUp() && !a.core.Life().Releasing() {
		a.beginRelease(c, messages.ReleaseStore, "", "", "the store kept failing: "+messages.AsError("persist", err).Message, nil)
	}
}

// flush carries out the core's accumulated effects.
func (a *Actor) flush(c *actor.Context) {
	if a.core == nil {
		return
	}
	out := a.core.Drain()
	if len(out.Diff) > 0 {
		a.flushDiff(c, &out)
	}
	if out.Meta != nil {
		a.pendingMeta = out.Meta
	}
	// the feed sees the events that became durable before a reader gets
	// the result they end in: a live listener (run's streamed text, an SSE
	// subscriber) has a turn's text before its result (an observer that
	// panics crashes the session, which answers every caller it holds)
	if a.o.Hooks.Event != nil && len(out.Durable) > 0 {
		a.feed(out.Durable)
	}
	if len(out.Replies) > 0 {
		a.reply(out.Replies)
	}
	if len(a.parked) > 0 {
		a.releaseParked()
	}
	a.pump(c)
	// the backend's commands go after the batch is started: both are
	// hand-offs to other goroutines, and Go's scheduler runs the one
	// readied last next on this CPU, so the turn goes ahead while the
	// other CPU (or the next slot) takes the WAL's write and sync, and
	// that commit gathers more sessions' appends. The other way round
	// the turn waited behind the commit (TestTurnStartsAfterItsBatchIsQueued;
	// bench native c=64 2.2-2.4x -> 1.9-2.0x a bare client, WAL commits
	// per turn 2.2 -> 0.8)
	a.sendHostSpec(c, false)
	for _, cmd := range out.Transport {
		a.send(c, ChildTransport, cmd)
	}
	a.gate.set(a.core.Held())
	if len(out.Life) > 0 {
		a.lifeEffects(c, out.Life)
	}
}

// flushDiff carries out out's diff-capture commands: a stage answered at
// once fed the core, and what that made (the turn's start, its result)
// goes out in this same flush, its events in the same store write. The
// steps of flush that not every message takes are methods of their own,
// never inlined (see Core.emit).
//
//go:noinline
func (a *Actor) flushDiff(c *actor.Context, out *Output) {
	for cmds := out.Diff; len(cmds) > 0 && a.sendDiff(c, cmds); {
		more := a.core.Drain()
		cmds = more.Diff
		out.merge(more)
	}
}

// feed hands the events that became durable to the Event hook.
//
//go:noinline
func (a *Actor) feed(durable []messages.PersistedEvent) {
	for i := range durable {
		a.o.Hooks.Event(a.o.Spec.SessionID, durable[i])
	}
}

// reply answers the readers the core has results for.
//
//go:noinline
func (a *Actor) reply(replies []Reply) {
	for i := range replies {
		r := &replies[i]
		ch, ok := a.pendingReads[r.Token]
		if !ok {
			continue
		}
		delete(a.pendingReads, r.Token)
		if r.Err == nil && a.o.Hooks.Result != nil {
			a.o.Hooks.Result(r.Result)
		}
		ch <- Result[messages.TurnResult]{Val: r.Result, Err: r.Err}
	}
}

// sendDiff hands diff-capture commands to the differ, or answers a stage
// at once when the capturer can (diffcapture.Quick: a few stat calls, no
// git, no wait), which spares the turn the hand-offs to the differ's
// goroutine and back. It says whether it fed the core an answer.
func (a *Actor) sendDiff(c *actor.Context, cmds []DiffCmd) (fed bool) {
	for _, cmd := range cmds {
		switch m := cmd.(type) {
		case DBaseline:
			if a.beginNow(c, m.Turn) {
				fed = true
				continue
			}
			a.send(c, ChildDiff, m)
			a.armDiff(c, m.Turn)
		case DPrepare:
			// a hint: a diff child restarting or gone misses it, and
			// the turn's Finish does the work
			_ = a.sup.Send(c, ChildDiff, diffPrepare{DPrepare: m, base: a.quickBaseOf(m.Turn)})
		case DFinish:
			req := diffFinish{DFinish: m}
			if base := a.quickBaseOf(m.Turn); base != nil {
				a.quickTurn, a.quickBase = 0, nil
				if a.finishNow(c, m.Turn, base, m.EditPaths) {
					fed = true
					continue
				}
				req.base = base
			}
			a.send(c, ChildDiff, req)
			a.armDiff(c, m.Turn)
		default: // a kind added without its case here (effects_test.go catches it)
			a.log().Error("session: a diff-capture command the shell cannot carry out", "session", a.o.Spec.SessionID, "cmd", fmt.Sprintf("%T", cmd))
		}
	}
	return fed
}

// beginNow takes turn's baseline at once when the capturer can; the turn
// then starts in this flush.
func (a *Actor) beginNow(c *actor.Context, turn int) bool {
	if a.quick == nil {
		return false
	}
	var base diffcapture.Baseline
	var settle, ok bool
	if safely(func() error { base, settle, ok = a.quick.BeginNow(); return nil }) != nil || !ok || base == nil {
		return false // (a nil baseline could not be told from none)
	}
	a.quickTurn, a.quickBase = turn, base
	a.settleLater(c, settle)
	a.core.BaselineReady(a.now(), turn)
	a.armStall(c)
	return true
}

// finishNow diffs turn at once against base, the baseline beginNow took,
// when the capturer can.
func (a *Actor) finishNow(c *actor.Context, turn int, base diffcapture.Baseline, editPaths []string) bool {
	var d messages.TurnDiff
	var settle, ok bool
	if safely(func() error { d, settle, ok = a.quick.FinishNow(base, editPaths); return nil }) != nil || !ok {
		return false
	}
	a.settleLater(c, settle)
	a.core.DiffReady(a.now(), turn, &d)
	return true
}

// settleLater has the differ settle what an answer taken at once left,
// off the turn's path (a hint: a differ restarting misses it, and the
// next Begin or Finish does what is left itself).
func (a *Actor) settleLater(c *actor.Context, owed bool) {
	if owed {
		_ = a.sup.Send(c, ChildDiff, diffSettle{})
	}
}

// quickBaseOf is the baseline beginNow took for turn, or nil.
func (a *Actor) quickBaseOf(turn int) diffcapture.Baseline {
	if a.quickTurn == turn {
		return a.quickBase
	}
	return nil
}

func (a *Actor) beginRelease(c *actor.Context, reason messages.ReleaseReason, outcome messages.Outcome, note, why string, reply chan<- Result[messages.StopResult]) {
	if reply != nil {
		a.stopWaiters = append(a.stopWaiters, reply)
	}
	if a.core.Life() == LifeDone {
		a.answerStops() // released already: stop is idempotent
		return
	}
	if reason == messages.ReleaseShutdown && a.deadline == nil && a.core.Life() < LifeStoppingPersist {
		// only a shutdown may abandon a release, and then never call it released
		engine, self := c.Engine(), c.PID()
		a.deadline = time.AfterFunc(2*a.o.ShutdownTimeout, func() { engine.Send(self, releaseDeadline{}) })
	}
	if a.core.Life().Releasing() {
		return
	}
	a.gate.close()
	a.stoppedByCaller = reply != nil
	a.reason = reason
	if a.lifetime != nil {
		a.lifetime.Stop()
	}
	a.core.BeginRelease(a.now(), reason, outcome, note, why)
	a.flush(c) // StopWorkers
}

// answerStops answers every stop caller: the first alreadyStopped=false
// when a stop began the release.
func (a *Actor) answerStops() {
	outcome := a.core.Outcome()
	for i, w := range a.stopWaiters {
		if a.core.ReleaseAbandoned() {
			w <- Result[messages.StopResult]{Err: messages.Errorf(messages.CodeUnavailable, messages.OpStop,
				"the runtime shut down before the session's release was durable; its record will be marked orphaned")}
			continue
		}
		first := i == 0 && a.stoppedByCaller
		w <- Result[messages.StopResult]{Val: messages.StopResult{OK: true, AlreadyStopped: !first, Outcome: outcome}}
	}
	a.stopWaiters = nil
}
