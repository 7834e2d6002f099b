package session

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/supervise"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
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
	// Event sees every persisted event as it is emitted (the live seam).
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
	// ShutdownTimeout bounds each child's stop and each store call.
	ShutdownTimeout time.Duration
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
}

type (
	childrenStopped struct{}
	persistStopped  struct{}
	lifetimeDue     struct{}
	releaseDeadline struct{}
	// stallCheck fires StallAfter after the last sign of life of a turn.
	stallCheck struct{ gen int }
)

// Actor is the session's thin shell: it translates messages into Core
// inputs and carries out the Core's effects.
type Actor struct {
	o    Options
	core *Core
	sup  *supervise.Supervisor

	created     bool
	releasing   bool
	releasedSeq uint64
	stopWaiters []chan<- Result[messages.StopResult]
	reason      messages.ReleaseReason
	lifetime    *time.Timer
	deadline    *time.Timer
	done        bool
	doneMsg     Done
	// stoppedByCaller: the release was begun by a stop op (its caller is
	// the one answered alreadyStopped=false).
	stoppedByCaller bool
	stopsAnswered   bool
	stall           *time.Timer
	stallGen        int
	pendingReads    map[uint64]chan<- Result[messages.TurnResult]
}

// NewProducer returns the hollywood producer of a session actor.
func NewProducer(o Options) actor.Producer {
	return func() actor.Receiver { return &Actor{o: o} }
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

// Receive is the shell: no blocking work happens here.
func (a *Actor) Receive(c *actor.Context) {
	if a.sup != nil {
		if handled, esc := a.sup.Handle(c, c.Message()); handled {
			if esc != nil {
				a.beginRelease(c, messages.ReleaseFailed, "", "", fmt.Sprintf("child %s failed beyond its restart policy (%s): %s", esc.Child, esc.Reason, esc.Cause), nil)
			}
			return
		}
	}
	now := a.now()
	switch m := c.Message().(type) {
	case actor.Started:
		a.start(c, now)
		return
	case actor.Stopped:
		if a.lifetime != nil {
			a.lifetime.Stop()
		}
		if a.stall != nil {
			a.stall.Stop()
		}
		if a.deadline != nil {
			a.deadline.Stop()
		}
		return
	case OpReadTurn:
		if err := a.core.ReadTurn(m.Token, m.Op.IncludeDiff); err != nil {
			m.Fail(err)
		} else {
			a.pendingReads[m.Token] = m.Reply
		}
	case OpCancelRead:
		cancelled := a.core.CancelRead(m.Token)
		if cancelled {
			delete(a.pendingReads, m.Token)
		}
		m.Reply <- Result[bool]{Val: cancelled}
	case OpAnswer:
		r, err := a.core.Answer(now, m.Op)
		m.Reply <- Result[messages.AnswerResult]{Val: r, Err: err}
	case OpGuide:
		err := a.core.Guide(now, m.Op)
		m.Reply <- Result[messages.OKResult]{Val: messages.OKResult{OK: err == nil}, Err: err}
	case OpSetPosture:
		r, err := a.core.SetPosture(now, m.Op.Posture)
		m.Reply <- Result[messages.SetPostureResult]{Val: r, Err: err}
	case OpInterrupt:
		err := a.core.Interrupt(now)
		m.Reply <- Result[messages.OKResult]{Val: messages.OKResult{OK: err == nil}, Err: err}
	case OpRelease:
		a.beginRelease(c, m.Reason, m.Outcome, m.Note, "", m.Reply)
	case lifetimeDue:
		a.beginRelease(c, messages.ReleaseLifetime, "", "", "the session's lifetime elapsed", nil)
	case agentEvent:
		a.core.AgentEvent(now, m.turn, m.ev)
		a.armStall(c)
	case stallCheck:
		if m.gen == a.stallGen && a.core.Phase() == PhaseRunning {
			a.core.AgentEvent(now, a.core.Turn(), messages.Event{Type: messages.EvWarning,
				Text: fmt.Sprintf("stalled: the backend has produced no output for %s", a.o.StallAfter)})
		}
	case transportCmdFailed:
		if m.turn > 0 {
			a.core.TransportFailed(now, m.turn, m.err.Error())
		} else {
			a.core.AgentEvent(now, a.core.Turn(), messages.Event{Type: messages.EvWarning, Text: m.err.Error()})
		}
	case baselineReady:
		a.core.BaselineReady(now, m.turn)
		a.armStall(c)
	case diffReady:
		d := m.diff
		a.core.DiffReady(now, m.turn, &d)
	case persistAck:
		a.persisted(c, now, m)
	case childrenStopped:
		a.releasedSeq = a.core.FinishRelease(now)
		a.deadline = time.AfterFunc(2*a.o.ShutdownTimeout, func() { c.Engine().Send(c.PID(), releaseDeadline{}) })
	case releaseDeadline:
		a.log().Warn("session: the released event was not acknowledged in time; finishing release", "session", a.o.Spec.SessionID)
		a.finish(c)
	case persistStopped:
		// The registry stops this actor when it hears Done: one poisoner
		// only, since a second pill to a stopping actor is never answered
		// (hollywood waits on it forever). Done goes before the stop
		// replies, so whatever a stop caller does next reaches a registry
		// that already knows the session is released.
		c.Send(a.o.Registry, a.doneMsg)
		a.answerStops()
		return
	}
	a.flush(c)
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
	specFn := func() transports.SessionSpec {
		s := a.o.Spec
		ext := a.core.ExternalID()
		return transports.SessionSpec{SessionID: s.SessionID, Cwd: s.Cwd, Model: a.core.rec.Model, Effort: a.core.rec.Effort,
			Posture: a.core.rec.Posture, AllowedTools: s.AllowedTools, AppendSystemPrompt: s.AppendSystemPrompt,
			ResumeExternalID: ext, Env: a.o.Env, Home: a.o.Home}
	}
	capturer := a.o.Capturer
	if capturer == nil {
		capturer = diffcapture.Noop{}
	}
	specs := []supervise.ChildSpec{
		{Name: ChildPersist, Restart: supervise.Permanent, ShutdownTimeout: timeout,
			Producer: newPersister(a.o.Store, a.o.Spec.SessionID, self, timeout, a.o.Hooks.Append, a.log())},
		{Name: ChildDiff, Restart: supervise.Transient, ShutdownTimeout: timeout,
			Producer: newDiffer(capturer, self, 4*timeout)},
		{Name: ChildTransport, Restart: supervise.Permanent, ShutdownTimeout: timeout,
			Producer: newHost(a.o.Transport, specFn, self, timeout, a.log())},
	}
	a.sup = supervise.New(specs, a.o.Policy)
	a.sup.OnEvent = func(ev supervise.Event) {
		if a.o.Hooks.Supervision != nil {
			a.o.Hooks.Supervision(ev)
		}
		if ev.Kind != supervise.EventFailed || a.releasing {
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
	rec := a.core.Record()
	if a.core.Adopted() {
		out := a.core.Drain() // the adopted event goes with the record
		a.send(c, ChildPersist, persistReq{adopt: &rec, events: out.Events})
		if a.o.Hooks.Event != nil {
			for _, ev := range out.Events { // the live seam sees it too
				a.o.Hooks.Event(a.o.Spec.SessionID, ev)
			}
		}
	} else {
		a.send(c, ChildPersist, persistReq{create: &rec})
	}
	if a.o.Lifetime > 0 {
		engine := c.Engine()
		a.lifetime = time.AfterFunc(a.o.Lifetime, func() { engine.Send(self, lifetimeDue{}) })
	}
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

func (a *Actor) persisted(c *actor.Context, now time.Time, m persistAck) {
	if !a.created {
		if m.createErr != nil {
			a.o.StartReply <- Result[messages.StartResult]{Err: messages.AsError(messages.OpStart, m.createErr)}
			a.doneMsg = Done{SessionID: a.o.Spec.SessionID, Scope: a.o.Spec.OwnerScope, Err: m.createErr}
			a.done = true
			a.sup.StopAll(c, persistStopped{})
			return
		}
		a.created = true
		s := a.o.Spec
		a.o.StartReply <- Result[messages.StartResult]{Val: messages.StartResult{SessionID: s.SessionID, Backend: s.Descriptor.ID,
			Posture: s.Posture, MaxPosture: s.MaxPosture, MaxRounds: s.MaxRounds, Model: s.Model, Effort: s.Effort}}
		c.Send(a.o.Registry, Created{SessionID: s.SessionID})
		a.core.Created(now)
	}
	a.core.Persisted(now, m.upTo, m.err)
	if a.releasedSeq > 0 && m.upTo >= a.releasedSeq && !a.done {
		a.finish(c)
	}
}

// flush carries out the core's accumulated effects.
func (a *Actor) flush(c *actor.Context) {
	if a.core == nil {
		return
	}
	out := a.core.Drain()
	if len(out.Events) > 0 || out.Meta != nil {
		a.send(c, ChildPersist, persistReq{events: out.Events, meta: out.Meta})
		if a.o.Hooks.Event != nil {
			for _, ev := range out.Events {
				a.o.Hooks.Event(a.o.Spec.SessionID, ev)
			}
		}
	}
	for _, cmd := range out.Diff {
		a.send(c, ChildDiff, cmd)
	}
	for _, cmd := range out.Transport {
		a.send(c, ChildTransport, cmd)
	}
	for _, r := range out.Replies {
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

func (a *Actor) beginRelease(c *actor.Context, reason messages.ReleaseReason, outcome messages.Outcome, note, why string, reply chan<- Result[messages.StopResult]) {
	if reply != nil {
		a.stopWaiters = append(a.stopWaiters, reply)
	}
	if a.stopsAnswered {
		a.answerStops() // released already: stop is idempotent
		return
	}
	if a.releasing {
		return
	}
	a.releasing = true
	a.stoppedByCaller = reply != nil
	a.reason = reason
	if a.lifetime != nil {
		a.lifetime.Stop()
	}
	a.core.BeginRelease(a.now(), reason, outcome, note, why)
	a.flush(c)
	a.sup.StopChildren(c, []string{ChildTransport, ChildDiff}, childrenStopped{})
}

// answerStops answers every stop caller: the first alreadyStopped=false
// when a stop began the release.
func (a *Actor) answerStops() {
	outcome := a.core.Outcome()
	for i, w := range a.stopWaiters {
		first := i == 0 && a.stoppedByCaller
		w <- Result[messages.StopResult]{Val: messages.StopResult{OK: true, AlreadyStopped: !first, Outcome: outcome}}
	}
	a.stopWaiters = nil
	a.stopsAnswered = true
}

// finish stops persist; then (persistStopped) the registry is told and the
// stop callers answered, and the registry stops the session actor itself.
func (a *Actor) finish(c *actor.Context) {
	if a.done {
		return
	}
	a.done = true
	if a.deadline != nil {
		a.deadline.Stop()
	}
	outcome := a.core.Outcome()
	if a.o.Hooks.Released != nil {
		a.o.Hooks.Released(a.core.Record(), a.reason)
	}
	a.doneMsg = Done{SessionID: a.o.Spec.SessionID, Scope: a.o.Spec.OwnerScope, Reason: a.reason, Outcome: outcome}
	a.sup.StopChildren(c, []string{ChildPersist}, persistStopped{})
}
