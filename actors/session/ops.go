package session

import (
	"github.com/codesession/codesession/messages"
)

// Result carries one op's answer back to the caller's channel. Every op
// message has a buffered (capacity 1) reply channel and is answered exactly
// once, so a reply never blocks an actor.
type Result[T any] struct {
	Val T
	Err error
}

// Op is a message the registry routes to a session.
type Op interface {
	// Fail answers the op with an error (the registry uses it when the
	// session cannot be reached).
	Fail(err error)
}

type reply[T any] chan<- Result[T]

// ok and fail are never inlined: a Result of a turn is some 260 bytes,
// built in the caller's frame when inlined (see Core.emit).
//
//go:noinline
func (r reply[T]) ok(v T) { r <- Result[T]{Val: v} }

//go:noinline
func (r reply[T]) fail(err error) { r <- Result[T]{Err: err} }

// Ops from the registry to a session.
type (
	OpReadTurn struct {
		Token uint64
		Op    messages.ReadTurn
		Reply chan<- Result[messages.TurnResult]
	}
	// OpCancelRead withdraws reader Token; Reply gets false when the reader
	// was already answered.
	OpCancelRead struct {
		Token uint64
		Reply chan<- Result[bool]
	}
	// OpUnread gives back the result delivered to reader Token, whose caller
	// was gone when it arrived: it goes back to the head of the queue.
	OpUnread struct{ Token uint64 }
	OpAnswer struct {
		Op    messages.Answer
		Reply chan<- Result[messages.AnswerResult]
	}
	OpGuide struct {
		Op    messages.Guide
		Reply chan<- Result[messages.OKResult]
	}
	OpSetPosture struct {
		Op    messages.SetPosture
		Reply chan<- Result[messages.SetPostureResult]
	}
	OpInterrupt struct {
		Reply chan<- Result[messages.OKResult]
	}
	// OpRelease ends the session: explicit (stop), sweep, lifetime, failed
	// or shutdown. Reply may be nil.
	OpRelease struct {
		Reason  messages.ReleaseReason
		Outcome messages.Outcome
		Note    string
		Reply   chan<- Result[messages.StopResult]
	}
)

func (o OpReadTurn) Fail(err error)   { reply[messages.TurnResult](o.Reply).fail(err) }
func (o OpCancelRead) Fail(err error) { reply[bool](o.Reply).fail(err) }
func (o OpUnread) Fail(error)         {}
func (o OpAnswer) Fail(err error)     { reply[messages.AnswerResult](o.Reply).fail(err) }
func (o OpGuide) Fail(err error)      { reply[messages.OKResult](o.Reply).fail(err) }
func (o OpSetPosture) Fail(err error) { reply[messages.SetPostureResult](o.Reply).fail(err) }
func (o OpInterrupt) Fail(err error)  { reply[messages.OKResult](o.Reply).fail(err) }
func (o OpRelease) Fail(err error) {
	if o.Reply != nil {
		reply[messages.StopResult](o.Reply).fail(err)
	}
}

// Notifications from a session to the registry.
type (
	// Created: the record is durable; the session is live.
	Created struct{ SessionID string }
	// Done: the session was released (or never got going); its children
	// are stopped and the registry stops the session actor.
	Done struct {
		SessionID string
		Scope     string
		Reason    messages.ReleaseReason
		Outcome   messages.Outcome
		Err       error // set when the session could not be created
		// Abandoned: a shutdown deadline passed before `released` was
		// durable; the record is left for the boot sweep (orphaned).
		Abandoned bool
	}
)

// failNoWait answers op with err unless it holds an answer already (every
// reply channel has room for exactly one): for an op whose handling was cut
// short by a panic, answered or not.
func failNoWait(op Op, err error) {
	switch o := op.(type) {
	case OpReadTurn:
		trySend(o.Reply, Result[messages.TurnResult]{Err: err})
	case OpCancelRead:
		trySend(o.Reply, Result[bool]{Err: err})
	case OpAnswer:
		trySend(o.Reply, Result[messages.AnswerResult]{Err: err})
	case OpGuide:
		trySend(o.Reply, Result[messages.OKResult]{Err: err})
	case OpSetPosture:
		trySend(o.Reply, Result[messages.SetPostureResult]{Err: err})
	case OpInterrupt:
		trySend(o.Reply, Result[messages.OKResult]{Err: err})
	case OpRelease:
		if o.Reply != nil {
			trySend(o.Reply, Result[messages.StopResult]{Err: err})
		}
	}
}

func trySend[T any](ch chan<- Result[T], r Result[T]) {
	select {
	case ch <- r:
	default:
	}
}
