package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/anthdm/hollywood/actor"
)

// DefaultInboxSize is the initial inbox capacity of every actor spawned here.
// Hollywood's inbox grows without bound anyway; a small initial ring keeps an
// idle actor at about 1.5 KB instead of 28 KB. Never 0: hollywood's
// WithInboxSize(0) makes every send panic.
const DefaultInboxSize = 64

// ChildFailed is sent by the Recover middleware of a child to its parent when
// it recovers a panic: in Receive, in Initialized or Started, or in Stopped.
// From then on the instance is failed (see Recover).
type ChildFailed struct {
	PID  *actor.PID
	Name string
	Gen  int
	// Reason is the panic value, formatted with fmt.Sprint.
	Reason string
	// Stack is the panicking goroutine's stack.
	Stack string
	// MsgType is the type of the message whose handling panicked, such as
	// "actor.Started" or "*session.Turn".
	MsgType string
}

// Undelivered is a user message that reached a failed (or exited) instance.
// The instance did not process it; its Recover middleware bounced it to the
// parent, whose Supervisor delivers it to the next generation before anything
// sent while the child was down.
type Undelivered struct {
	Name    string
	Gen     int
	Message any
	// Sender is the original sender, kept on redelivery.
	Sender *actor.PID
}

// ChildExited tells the parent that a child ended without panicking. A child
// sends it with Exit; the Recover middleware sends it (Normal: true) when the
// child is stopped by anyone other than its Supervisor, for example when it
// poisons itself. Transient and Temporary children that exit normally are not
// restarted.
type ChildExited struct {
	PID    *actor.PID
	Name   string
	Gen    int
	Normal bool

	gone bool // sent from Stopped: the instance is already out of the registry
}

// RecoverOptions configures Recover for an actor that a Supervisor did not
// spawn (typically a top-level actor).
type RecoverOptions struct {
	// Name and Gen label reports; Name defaults to the PID's ID.
	Name string
	Gen  int
	// OnFailure is called, on the actor's goroutine, with every recovered
	// panic. When the actor has a parent, the parent also gets ChildFailed.
	// Without either, the panic is logged with slog.Error.
	OnFailure func(ChildFailed)
	// OnUndelivered receives the messages a failed top-level actor did not
	// process. Without it (and without a parent) they are broadcast as
	// actor.DeadLetterEvent.
	OnUndelivered func(Undelivered)
}

// instance is the supervision state of one incarnation of one actor. It is
// touched only by the goroutine running that actor (its spawner for
// Initialized and Started, then its inbox), so it needs no lock.
type instance struct {
	name          string
	gen           int
	failed        bool // a panic was recovered: user messages are bounced
	exited        bool // Exit was called: user messages are bounced
	onFailure     func(ChildFailed)
	onUndelivered func(Undelivered)
}

type instanceKey struct{}

// Recover returns the middleware that keeps panics away from hollywood's
// restart path (in hollywood v1.0.5, exceeding MaxRestarts crashes the
// process). Install one per spawn, outermost; Spawn and Supervisor do that for
// you and also set actor.WithMaxRestarts(-1) as a backstop.
//
// Behaviour:
//   - A panic anywhere in Receive, including Initialized, Started and Stopped,
//     is recovered and reported: ChildFailed to the parent if there is one,
//     OnFailure if set, slog.Error if neither.
//   - After a panic the instance is failed. Every later user message is not
//     processed but bounced: to the parent as Undelivered (so the Supervisor
//     redelivers it to the next generation), or to OnUndelivered, or as a
//     dead letter. Only the message that panicked is lost.
//   - Initialized and Started are swallowed by a failed instance: running
//     Started on a receiver whose Initialized panicked is not safe.
//   - Stopped is always passed through, failed or not, so cleanup code
//     (killing a process group, closing files, Unsubscribe) still runs; the
//     choice is deliberate, since leaking an OS process is worse than
//     running cleanup on inconsistent state, and a panic in it is recovered
//     and reported like any other. Handlers must therefore be idempotent and
//     nil-safe, which hollywood already demands (Stopped arrives on every
//     crash without this middleware).
//   - When a healthy child is stopped by anyone but its Supervisor, the
//     middleware tells the parent with ChildExited{Normal: true}.
func Recover(o RecoverOptions) actor.MiddlewareFunc {
	in := &instance{name: o.Name, gen: o.Gen, onFailure: o.OnFailure, onUndelivered: o.OnUndelivered}
	return in.middleware
}

// Spawn spawns a top-level actor the way every codesession actor must be
// spawned: Recover outermost (with o), actor.WithMaxRestarts(-1) whatever
// opts say, and an inbox of DefaultInboxSize unless opts set a positive one.
// Identity works in the spawned actor; Exit does not (it has no parent).
func Spawn(e *actor.Engine, p actor.Producer, kind string, o RecoverOptions, opts ...actor.OptFunc) *actor.PID {
	return e.Spawn(p, kind, hardened(o, opts)...)
}

// hardened returns opts between the default inbox and harden's backstops.
func hardened(o RecoverOptions, opts []actor.OptFunc) []actor.OptFunc {
	in := &instance{name: o.Name, gen: o.Gen, onFailure: o.OnFailure, onUndelivered: o.OnUndelivered}
	all := make([]actor.OptFunc, 0, len(opts)+2)
	all = append(all, actor.WithInboxSize(DefaultInboxSize))
	all = append(all, opts...)
	return append(all, harden(in))
}

// SpawnChild spawns a child of the actor running c with the same hardening as
// Spawn, for a child that no Supervisor manages (the registry's sessions: the
// registry decides what a crash means). Its panics reach the parent as
// ChildFailed and o.OnFailure, its later messages the parent as Undelivered.
func SpawnChild(c *actor.Context, p actor.Producer, kind string, o RecoverOptions, opts ...actor.OptFunc) *actor.PID {
	return c.SpawnChild(p, kind, hardened(o, opts)...)
}

// harden is applied last to the options of every actor spawned here.
func harden(in *instance) actor.OptFunc {
	return func(o *actor.Opts) {
		o.MaxRestarts = -1
		if o.InboxSize <= 0 {
			o.InboxSize = DefaultInboxSize
		}
		o.Middleware = append([]actor.MiddlewareFunc{in.middleware}, o.Middleware...)
		ctx := o.Context
		if ctx == nil {
			ctx = context.Background()
		}
		o.Context = context.WithValue(ctx, instanceKey{}, in)
	}
}

// Identity returns the supervised name and generation of the actor running c,
// if it was spawned by a Supervisor or Spawn.
func Identity(c *actor.Context) (name string, gen int, ok bool) {
	in := instanceOf(c)
	if in == nil {
		return "", 0, false
	}
	return in.name, in.gen, true
}

// ErrNotSupervised is returned by Exit in an actor that has no Supervisor.
var ErrNotSupervised = errors.New("supervise: actor is not a supervised child")

// Exit ends the calling child: call it from the child's own Receive. It tells
// the parent's Supervisor with ChildExited; from then on the instance bounces
// user messages like a failed one, and the Supervisor stops it and restarts
// it or not according to its RestartType (normal exits of Transient and
// Temporary children are final).
func Exit(c *actor.Context, normal bool) error {
	in := instanceOf(c)
	if in == nil || c.Parent() == nil {
		return ErrNotSupervised
	}
	if in.exited || in.failed {
		return nil
	}
	in.exited = true
	c.Send(c.Parent(), ChildExited{PID: c.PID(), Name: in.name, Gen: in.gen, Normal: normal})
	return nil
}

func instanceOf(c *actor.Context) *instance {
	if c == nil || c.Context() == nil {
		return nil
	}
	in, _ := c.Context().Value(instanceKey{}).(*instance)
	return in
}

func (in *instance) middleware(next actor.ReceiveFunc) actor.ReceiveFunc {
	return func(c *actor.Context) {
		switch c.Message().(type) {
		case actor.Initialized, actor.Started:
			if in.failed {
				return
			}
		case actor.Stopped:
			in.invoke(c, next)
			if !in.failed && !in.exited && c.Parent() != nil {
				in.exited = true
				c.Send(c.Parent(), ChildExited{PID: c.PID(), Name: in.label(c), Gen: in.gen, Normal: true, gone: true})
			}
			return
		default:
			if in.failed || in.exited {
				in.bounce(c)
				return
			}
		}
		in.invoke(c, next)
	}
}

func (in *instance) invoke(c *actor.Context, next actor.ReceiveFunc) {
	defer func() {
		if v := recover(); v != nil {
			in.fail(c, v, debug.Stack())
		}
	}()
	next(c)
}

func (in *instance) label(c *actor.Context) string {
	if in.name != "" {
		return in.name
	}
	return c.PID().GetID()
}

func (in *instance) fail(c *actor.Context, v any, stack []byte) {
	in.failed = true
	f := ChildFailed{
		PID:     c.PID(),
		Name:    in.label(c),
		Gen:     in.gen,
		Reason:  fmt.Sprint(v),
		Stack:   string(stack),
		MsgType: fmt.Sprintf("%T", c.Message()),
	}
	parent := c.Parent()
	if parent != nil {
		c.Send(parent, f)
	}
	if in.onFailure != nil {
		safeCall("OnFailure", c, func() { in.onFailure(f) })
	} else if parent == nil {
		slog.Error("supervise: actor panicked", "pid", f.PID.GetID(), "msg", f.MsgType, "panic", f.Reason, "stack", f.Stack)
	}
}

func (in *instance) bounce(c *actor.Context) {
	u := Undelivered{Name: in.label(c), Gen: in.gen, Message: c.Message(), Sender: c.Sender()}
	switch {
	case c.Parent() != nil:
		c.Send(c.Parent(), u)
	case in.onUndelivered != nil:
		safeCall("OnUndelivered", c, func() { in.onUndelivered(u) })
	default:
		c.Engine().BroadcastEvent(actor.DeadLetterEvent{Target: c.PID(), Message: u.Message, Sender: u.Sender})
	}
}

// safeCall runs a user callback on the actor's goroutine outside Recover's
// own recover, so a panic in it must not escape to hollywood either.
func safeCall(what string, c *actor.Context, fn func()) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("supervise: callback panicked", "callback", what, "pid", c.PID().GetID(), "panic", fmt.Sprint(v))
		}
	}()
	fn()
}
