package session

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// Messages between the session and its children.
type (
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
		create *messages.SessionRecord
		adopt  *messages.SessionRecord // a resumed session's record: replaced, not created
		events []messages.PersistedEvent
		meta   *messages.SessionRecord
	}
	persistAck struct {
		upTo      uint64
		createErr error
		err       error
	}
)

// ---- transport host ----

// backendExited is the panic value the host fails with when its backend
// dies: the supervisor then restarts the host, which resumes the backend.
type backendExited struct{ reason string }

func (b backendExited) String() string { return "backend exited: " + b.reason }

type hostOpened struct {
	sess transports.Session
	err  error
}

type hostBackendDied struct{ reason string }

// host drives one backend session for its parent session actor.
type host struct {
	transport transports.Transport
	spec      func() transports.SessionSpec
	parent    *actor.PID
	timeout   time.Duration

	sess    transports.Session
	opening bool
	queue   []any
	closed  *atomic.Bool
	log     *slog.Logger
}

func newHost(t transports.Transport, spec func() transports.SessionSpec, parent *actor.PID, timeout time.Duration, log *slog.Logger) actor.Producer {
	return func() actor.Receiver {
		return &host{transport: t, spec: spec, parent: parent, timeout: timeout, closed: new(atomic.Bool), log: log}
	}
}

func (h *host) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		h.open(c)
	case hostOpened:
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
	case hostBackendDied:
		// Let supervision restart us: the restarted host reopens the
		// backend, resuming its session where the backend can.
		panic(backendExited{reason: m.reason})
	case actor.Stopped:
		h.closed.Store(true)
		if h.sess != nil {
			ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
			if err := h.sess.Close(ctx); err != nil {
				h.log.Warn("closing backend session", "err", err)
			}
			cancel()
			h.sess = nil
		}
	case TStartTurn, TAnswer, TInterrupt, TSteer, TSetModel, TSetPosture:
		if h.sess == nil {
			h.queue = append(h.queue, m)
			if !h.opening {
				h.open(c)
			}
			return
		}
		h.do(c, m)
	}
}

func (h *host) open(c *actor.Context) {
	h.opening = true
	engine, self, parent, closed := c.Engine(), c.PID(), h.parent, h.closed
	spec := h.spec()
	sink := func(turn int, ev messages.Event) {
		engine.Send(parent, agentEvent{turn: turn, ev: ev})
		if ev.Type == messages.EvError && ev.Fatal {
			engine.Send(self, hostBackendDied{reason: ev.Text})
		}
	}
	t, timeout := h.transport, h.timeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*timeout+time.Minute)
		defer cancel()
		s, err := t.Open(ctx, spec, sink)
		if err == nil && closed.Load() {
			// the host stopped while we were opening: nobody will close it
			cctx, ccancel := context.WithTimeout(context.Background(), timeout)
			_ = s.Close(cctx)
			ccancel()
			return
		}
		engine.Send(self, hostOpened{sess: s, err: err})
	}()
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

func (h *host) do(c *actor.Context, cmd any) {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	var err error
	turn := 0
	switch m := cmd.(type) {
	case TStartTurn:
		turn = m.Turn
		err = h.sess.StartTurn(ctx, m.Turn, m.Input)
	case TAnswer:
		err = h.sess.Answer(ctx, m.ClarificationID, m.Decision, m.Reason)
	case TInterrupt:
		if i, ok := h.sess.(transports.Interrupter); ok {
			err = i.Interrupt(ctx)
		} else {
			err = messages.Errorf(messages.CodeUnsupported, messages.OpInterrupt, "backend cannot interrupt")
		}
	case TSteer:
		if s, ok := h.sess.(transports.Steerer); ok {
			err = s.Steer(ctx, m.Text)
		} else {
			err = messages.Errorf(messages.CodeUnsupported, messages.OpGuide, "backend cannot steer")
		}
	case TSetModel:
		if s, ok := h.sess.(transports.ModelSetter); ok {
			err = s.SetModel(ctx, m.Model, m.Effort)
		} else {
			err = messages.Errorf(messages.CodeUnsupported, messages.OpGuide, "backend cannot switch model")
		}
	case TSetPosture:
		if s, ok := h.sess.(transports.PostureSetter); ok {
			err = s.SetPosture(ctx, m.Posture)
		} else {
			err = messages.Errorf(messages.CodeUnsupported, messages.OpSetPosture, "backend cannot change posture live")
		}
	}
	if err != nil {
		c.Send(h.parent, transportCmdFailed{turn: turn, err: fmt.Errorf("%T: %w", cmd, err)})
	}
}

// ---- diff capture ----

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
}

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
			b, err := cp.Begin(ctx)
			engine.Send(self, captureBegun{turn: m.Turn, base: b, err: err})
		}()
	case captureBegun:
		if m.err != nil {
			d.warn[m.turn] = "baseline failed: " + m.err.Error()
		} else {
			d.bases[m.turn] = m.base
		}
		c.Send(d.parent, baselineReady{turn: m.turn})
	case DFinish:
		base, had := d.bases[m.Turn]
		delete(d.bases, m.Turn)
		warn := d.warn[m.Turn]
		delete(d.warn, m.Turn)
		cp, timeout := d.capturer, d.timeout
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			diff := cp.Finish(ctx, base, m.EditPaths)
			if !had && warn == "" {
				warn = "no baseline for this turn (diff capture restarted)"
			}
			if warn != "" && diff.Warning == "" {
				diff.Warning = warn
			}
			engine.Send(self, captureDone{turn: m.Turn, diff: diff})
		}()
	case captureDone:
		c.Send(d.parent, diffReady{turn: m.turn, diff: m.diff})
	}
}

// ---- persist ----

type persistFlush struct{}

// persister is the write-through mirror: it batches everything that arrives
// while it is busy into one store call (group commit) and acknowledges the
// highest seq written.
type persister struct {
	store     store.Store
	sessionID string
	parent    *actor.PID
	timeout   time.Duration

	create    *messages.SessionRecord
	adopt     *messages.SessionRecord
	events    []messages.PersistedEvent
	meta      *messages.SessionRecord
	scheduled bool
	onAppend  func(time.Duration, error)
	log       *slog.Logger
	// retryIn is the delay before retrying a failed write; 0 when healthy.
	retryIn time.Duration
}

// Retry bounds for failed writes: the events are kept (in seq order, so
// the log stays gapless) and written again, with backoff, until the store
// takes them or the cap is hit.
const (
	persistRetryMin = 50 * time.Millisecond
	persistRetryMax = 5 * time.Second
	persistMaxHeld  = 1 << 16
)

func newPersister(s store.Store, sid string, parent *actor.PID, timeout time.Duration, onAppend func(time.Duration, error), log *slog.Logger) actor.Producer {
	return func() actor.Receiver {
		return &persister{store: s, sessionID: sid, parent: parent, timeout: timeout, onAppend: onAppend, log: log}
	}
}

func (p *persister) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case persistReq:
		if m.create != nil {
			p.create = m.create
		}
		if m.adopt != nil {
			p.adopt = m.adopt
		}
		p.events = append(p.events, m.events...)
		if m.meta != nil {
			p.meta = m.meta
		}
		if !p.scheduled {
			p.scheduled = true
			c.Send(c.PID(), persistFlush{})
		}
	case persistFlush:
		p.scheduled = false
		p.flush(c)
	}
}

func (p *persister) scheduleRetry(c *actor.Context) {
	if p.retryIn == 0 {
		p.retryIn = persistRetryMin
	} else if p.retryIn *= 2; p.retryIn > persistRetryMax {
		p.retryIn = persistRetryMax
	}
	if p.scheduled {
		return
	}
	p.scheduled = true
	engine, self := c.Engine(), c.PID()
	time.AfterFunc(p.retryIn, func() { engine.Send(self, persistFlush{}) })
}

func (p *persister) flush(c *actor.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	var ack persistAck
	if p.adopt != nil {
		// the adopted event must land before the record says running
		if err := p.store.Append(ctx, p.sessionID, p.events); err != nil {
			ack.createErr = err
		} else if err := p.store.PutMeta(ctx, *p.adopt); err != nil {
			ack.createErr = err
		} else if n := len(p.events); n > 0 {
			ack.upTo = p.events[n-1].Seq
		}
		p.adopt, p.events = nil, nil
		if ack.createErr != nil {
			p.meta = nil
		}
		c.Send(p.parent, ack)
		return
	}
	if p.create != nil {
		ack.createErr = p.store.Create(ctx, *p.create)
		p.create = nil
		if ack.createErr != nil {
			p.events, p.meta = nil, nil
			c.Send(p.parent, ack)
			return
		}
	}
	if n := len(p.events); n > 0 {
		start := time.Now()
		ack.err = p.store.Append(ctx, p.sessionID, p.events)
		if p.onAppend != nil {
			p.onAppend(time.Since(start), ack.err)
		}
		ack.upTo = p.events[n-1].Seq
		if ack.err == nil {
			p.events = nil
		} else if n > persistMaxHeld {
			// the store has been refusing for long: give up on the oldest
			// rather than hold memory without bound (the log will show the
			// gap; the error events say why)
			p.log.Error("persist: dropping events the store keeps refusing", "session", p.sessionID, "dropped", n-persistMaxHeld)
			p.events = append([]messages.PersistedEvent(nil), p.events[n-persistMaxHeld:]...)
		}
	}
	if p.meta != nil {
		err := p.store.PutMeta(ctx, *p.meta)
		if err == nil {
			p.meta = nil
		} else if ack.err == nil {
			ack.err = err
		}
	}
	if ack.err != nil {
		p.scheduleRetry(c)
	} else {
		p.retryIn = 0
	}
	c.Send(p.parent, ack)
}
