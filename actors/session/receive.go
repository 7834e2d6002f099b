package session

import (
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/messages"
)

// The session's messages by family. Each family is a sealed interface (an
// unexported marker method) with one handler, a type switch over it; the
// ops are the family Op. effects_test.go checks that every handler covers
// its whole family, so a message added to a family cannot fall through.
type (
	// transportNote: what the transport host, and the silence of its
	// backend, tell the session.
	transportNote interface{ transportNote() }
	// diffNote: diff capture's answers, and its deadline.
	diffNote interface{ diffNote() }
	// persistNote: the persist child's acks and the persistence timers.
	persistNote interface{ persistNote() }
	// releaseNote: the steps of the session's end (Lifecycle) and the
	// lifetime that begins one.
	releaseNote interface{ releaseNote() }
)

func (agentEvents) transportNote()        {}
func (hostAbandoned) transportNote()      {}
func (transportCmdFailed) transportNote() {}
func (stallCheck) transportNote()         {}

func (baselineReady) diffNote() {}
func (diffReady) diffNote()     {}
func (diffDue) diffNote()       {}

func (persistAck) persistNote()      {}
func (persistRetry) persistNote()    {}
func (persistFlushDue) persistNote() {}

func (lifetimeDue) releaseNote()     {}
func (childrenStopped) releaseNote() {}
func (releaseDeadline) releaseNote() {}
func (persistStopped) releaseNote()  {}

// Receive is the shell: no blocking work happens here. It hands each
// message to its family's handler, which feeds the core; flush then carries
// out what the core asked for.
func (a *Actor) Receive(c *actor.Context) {
	msg := c.Message()
	a.current = msg
	if a.o.Inject != nil {
		a.o.Inject("session", msg)
	}
	if a.supervision(c, msg) {
		return
	}
	now := a.now()
	switch m := msg.(type) {
	case actor.Started:
		a.start(c, now)
		return
	case actor.Stopped:
		a.stopTimers()
		if p := a.path.Load(); p != nil {
			// as a stopped persist child does: the appends the session
			// started itself are answered before it is gone, so a record
			// in flight lands before whoever stopped it writes the next
			p.acks.wait()
		}
		return
	case Op:
		a.receiveOp(c, now, m)
	case transportNote:
		a.receiveTransport(c, now, m)
	case diffNote:
		a.receiveDiff(c, now, m)
	case persistNote:
		a.receivePersist(c, now, m)
	case releaseNote:
		a.receiveRelease(c, now, m)
	}
	a.flush(c)
}

// supervision lets the supervisor take its own messages (a child failed,
// stopped, a restart is due); a child that failed beyond its restart policy
// fails the session. It reports whether msg was the supervisor's.
func (a *Actor) supervision(c *actor.Context, msg any) bool {
	if a.sup == nil {
		return false
	}
	handled, esc := a.sup.Handle(c, msg)
	if handled && esc != nil {
		a.beginRelease(c, messages.ReleaseFailed, "", "", fmt.Sprintf("child %s failed beyond its restart policy (%s): %s", esc.Child, esc.Reason, esc.Cause), nil)
	}
	return handled
}

// stopTimers stops every timer of the actor (hollywood stops it, at its
// release or after a crash).
func (a *Actor) stopTimers() {
	for _, t := range []*time.Timer{a.lifetime, a.stall, a.diffTimer, a.deadline, a.retry, a.holdTimer} {
		if t != nil {
			t.Stop()
		}
	}
	if a.gate != nil {
		a.gate.close()
	}
}

// receiveOp serves an op from the registry: an op that emits events is
// answered once they are durable (answer). Each op is served by a method
// of its own, never inlined: a frame is sized for every case's locals at
// once, and each wake-up starts on a small stack (see Core.emit).
func (a *Actor) receiveOp(c *actor.Context, now time.Time, op Op) {
	switch m := op.(type) {
	case OpReadTurn:
		a.opReadTurn(m)
	case OpCancelRead:
		a.opCancelRead(m)
	case OpUnread:
		a.core.Unread(m.Token)
	case OpAnswer:
		a.opAnswer(now, m)
	case OpGuide:
		a.opGuide(now, m)
	case OpSetPosture:
		a.opSetPosture(now, m)
	case OpInterrupt:
		a.opInterrupt(now, m)
	case OpRelease:
		a.opRelease(c, m)
	}
}

//go:noinline
func (a *Actor) opReadTurn(m OpReadTurn) {
	if err := a.core.ReadTurn(m.Token, m.Op.IncludeDiff); err != nil {
		m.Fail(err)
	} else {
		a.pendingReads[m.Token] = m.Reply
	}
}

//go:noinline
func (a *Actor) opCancelRead(m OpCancelRead) {
	cancelled := a.core.CancelRead(m.Token)
	if cancelled {
		delete(a.pendingReads, m.Token)
	}
	m.Reply <- Result[bool]{Val: cancelled}
}

//go:noinline
func (a *Actor) opAnswer(now time.Time, m OpAnswer) {
	r, err := a.core.Answer(now, m.Op)
	a.answer(err, func(err error) {
		if err != nil {
			r = messages.AnswerResult{}
		}
		m.Reply <- Result[messages.AnswerResult]{Val: r, Err: err}
	})
}

//go:noinline
func (a *Actor) opGuide(now time.Time, m OpGuide) {
	err := a.core.Guide(now, m.Op)
	a.answer(err, func(err error) {
		m.Reply <- Result[messages.OKResult]{Val: messages.OKResult{OK: err == nil}, Err: err}
	})
}

//go:noinline
func (a *Actor) opSetPosture(now time.Time, m OpSetPosture) {
	r, err := a.core.SetPosture(now, m.Op.Posture)
	a.answer(err, func(err error) {
		if err != nil {
			r = messages.SetPostureResult{}
		}
		m.Reply <- Result[messages.SetPostureResult]{Val: r, Err: err}
	})
}

//go:noinline
func (a *Actor) opInterrupt(now time.Time, m OpInterrupt) {
	err := a.core.Interrupt(now)
	a.answer(err, func(err error) {
		m.Reply <- Result[messages.OKResult]{Val: messages.OKResult{OK: err == nil}, Err: err}
	})
}

//go:noinline
func (a *Actor) opRelease(c *actor.Context, m OpRelease) {
	a.beginRelease(c, m.Reason, m.Outcome, m.Note, "", m.Reply)
}

// receiveTransport takes what the backend said or could not do (the rare
// cases in methods of their own: see receiveOp).
func (a *Actor) receiveTransport(c *actor.Context, now time.Time, n transportNote) {
	switch m := n.(type) {
	case agentEvents:
		evs := m.q.take()
		for i := range evs {
			a.core.agentEvent(now, evs[i].turn, &evs[i].ev)
		}
		if len(evs) > 0 {
			a.armStall(c)
		}
		m.q.recycle(evs)
	case hostAbandoned:
		a.hostAbandoned(now, m)
	case transportCmdFailed:
		a.transportCmdFailed(now, m)
	case stallCheck:
		a.stallCheck(now, m)
	}
}

//go:noinline
func (a *Actor) hostAbandoned(now time.Time, m hostAbandoned) {
	a.abandonedChild(now, ChildTransport, fmt.Sprintf("the backend session did not close within %s: abandoned, %d process groups killed", m.wait, m.killed))
}

//go:noinline
func (a *Actor) transportCmdFailed(now time.Time, m transportCmdFailed) {
	if m.turn > 0 {
		a.core.TransportFailed(now, m.turn, m.err.Error())
	} else {
		a.core.AgentEvent(now, a.core.Turn(), messages.Event{Type: messages.EvWarning, Text: m.err.Error()})
	}
}

//go:noinline
func (a *Actor) stallCheck(now time.Time, m stallCheck) {
	if m.gen == a.stallGen && a.core.Phase() == PhaseRunning {
		a.core.AgentEvent(now, a.core.Turn(), messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("stalled: the backend has produced no output for %s", a.o.StallAfter)})
	}
}

// receiveDiff takes diff capture's answers, or its silence past the
// deadline. A baseline starts the turn, so it arms the stall timer.
func (a *Actor) receiveDiff(c *actor.Context, now time.Time, n diffNote) {
	switch m := n.(type) {
	case baselineReady:
		a.core.BaselineReady(now, m.turn)
		a.armStall(c)
	case diffReady:
		d := m.diff
		a.core.DiffReady(now, m.turn, &d)
	case diffDue:
		if m.gen == a.diffGen {
			a.diffLost(now, m.turn, fmt.Sprintf("diff capture did not answer within %s", a.diffDeadline()))
		}
	}
}

// diffLost tells the core a diff-capture stage of turn will not be
// answered, with the fallback diff of the turn's edit-tool events.
func (a *Actor) diffLost(now time.Time, turn int, why string) {
	fallback := diffcapture.ToolEventDiff(a.o.Spec.Cwd, a.core.EditPaths(), diffcapture.DefaultMaxFiles, why)
	a.core.DiffLost(now, turn, why, fallback)
}

// receivePersist takes the persist child's acks and the persistence timers.
func (a *Actor) receivePersist(c *actor.Context, now time.Time, n persistNote) {
	switch m := n.(type) {
	case persistAck:
		a.persisted(c, now, m)
	case persistRetry:
		a.retryArmed = false
	case persistFlushDue:
		a.holdDue = a.holdDue || (a.holding && m.gen == a.holdGen)
	}
}

// receiveRelease moves the session's end along (lifecycle.go).
func (a *Actor) receiveRelease(c *actor.Context, now time.Time, n releaseNote) {
	switch n.(type) {
	case lifetimeDue:
		a.beginRelease(c, messages.ReleaseLifetime, "", "", "the session's lifetime elapsed", nil)
	case childrenStopped:
		a.core.ChildrenStopped(now)
		a.closeCapturer()
	case releaseDeadline:
		a.core.ReleaseDeadline()
	case persistStopped:
		a.core.PersistStopped()
	}
}
