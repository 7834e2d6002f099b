package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/anthdm/hollywood/actor"
)

const (
	// DefaultShutdownTimeout bounds the stop of a child whose ChildSpec
	// leaves ShutdownTimeout at 0.
	DefaultShutdownTimeout = 5 * time.Second
	// DefaultMaxBuffered is the default of Supervisor.MaxBuffered.
	DefaultMaxBuffered = 4096
)

// Errors returned by Send and StartAll, wrapped with the child's name.
var (
	ErrUnknownChild   = errors.New("supervise: unknown child")
	ErrNotStarted     = errors.New("supervise: children not started")
	ErrAlreadyStarted = errors.New("supervise: children already started")
	ErrChildDown      = errors.New("supervise: child is down and will not be restarted")
	ErrBufferFull     = errors.New("supervise: restart buffer full")
)

// ChildSpec declares one child of a Supervisor.
type ChildSpec struct {
	// Name is unique within the Supervisor and contains no '/'. The child's
	// PID ID is "<parent ID>/<Name>/<generation>".
	Name     string
	Restart  RestartType
	Producer actor.Producer
	// InboxSize is the initial inbox capacity; 0 means DefaultInboxSize.
	InboxSize int
	// ShutdownTimeout bounds how long a stop of this child is waited for
	// before the instance is abandoned; 0 means DefaultShutdownTimeout,
	// negative means wait forever.
	ShutdownTimeout time.Duration
}

// Validate reports every problem of the spec at once.
func (cs ChildSpec) Validate() error {
	var errs []error
	if cs.Name == "" {
		errs = append(errs, errors.New("name is empty"))
	}
	if strings.Contains(cs.Name, "/") {
		errs = append(errs, fmt.Errorf("name %q contains '/'", cs.Name))
	}
	if !cs.Restart.Valid() {
		errs = append(errs, fmt.Errorf("restart type %v is not permanent, transient or temporary", cs.Restart))
	}
	if cs.Producer == nil {
		errs = append(errs, errors.New("producer is nil"))
	}
	if cs.InboxSize < 0 {
		errs = append(errs, fmt.Errorf("inbox size %d is negative", cs.InboxSize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("supervise: invalid child spec %q: %w", cs.Name, err)
	}
	return nil
}

func (cs ChildSpec) inboxSize() int {
	if cs.InboxSize > 0 {
		return cs.InboxSize
	}
	return DefaultInboxSize
}

func (cs ChildSpec) shutdownTimeout() time.Duration {
	if cs.ShutdownTimeout == 0 {
		return DefaultShutdownTimeout
	}
	return cs.ShutdownTimeout
}

// ChildState is where one child is in its lifecycle (see the diagram in the
// package doc). The zero value is invalid.
type ChildState int

const (
	// StateNotStarted: StartAll has not run.
	StateNotStarted ChildState = iota + 1
	// StateUp: an instance runs; Send delivers to it.
	StateUp
	// StateStopping: the instance failed (or, under RestForOne, an earlier
	// sibling did) and is being stopped before a restart.
	StateStopping
	// StateBackoff: the old instance is gone; the restart waits for the
	// backoff delay or, under RestForOne, for an earlier sibling.
	StateBackoff
	// StateShutdown: being stopped on purpose (StopChildren); final.
	StateShutdown
	// StateDown: not running and not to be restarted (stopped, a normal
	// exit of a Transient or Temporary child).
	StateDown
	// StateEscalated: failed beyond the policy (or a Temporary child
	// failed); not restarted, reported as an Escalation.
	StateEscalated
)

func (s ChildState) String() string {
	switch s {
	case StateNotStarted:
		return "not-started"
	case StateUp:
		return "up"
	case StateStopping:
		return "stopping"
	case StateBackoff:
		return "backoff"
	case StateShutdown:
		return "shutdown"
	case StateDown:
		return "down"
	case StateEscalated:
		return "escalated"
	}
	return fmt.Sprintf("ChildState(%d)", int(s))
}

// Escalation is returned by Handle when a child failed and will not be
// restarted. The parent acts on it, typically by StopAll and then reporting
// its own failure upward. The Supervisor keeps supervising the other children
// until told otherwise.
type Escalation struct {
	Child string
	Gen   int
	// Reason is ReasonIntensityExceeded or ReasonTemporary.
	Reason string
	// Cause is the last failure: the panic value, or the exit.
	Cause string
	Stack string
}

func (e *Escalation) Error() string {
	return fmt.Sprintf("supervise: child %s.%d escalated (%s): %s", e.Child, e.Gen, e.Reason, e.Cause)
}

// EventKind classifies an Event. The zero value is invalid.
type EventKind int

const (
	// EventFailed: a child failed (panic or abnormal exit); Delay is the
	// backoff chosen, Reason is ReasonWithinPolicy, or ReasonStopping for
	// a failure of an instance that was already on its way out.
	EventFailed EventKind = iota + 1
	// EventRestarted: a new generation was spawned; Delay is the backoff it
	// waited, Reason ReasonWithinPolicy, ReasonAbnormalExit or
	// ReasonSiblingRestart.
	EventRestarted
	// EventEscalated: see Escalation.
	EventEscalated
	// EventExited: a child ended for good without failing (normal exit,
	// Temporary exit, or stopped on purpose: Reason "stopped").
	EventExited
	// EventAbandoned: an instance did not stop within its ShutdownTimeout;
	// its goroutine may still be blocked somewhere.
	EventAbandoned
	// EventDropped: Count messages for the child were dropped (Reason
	// ReasonChildDown or ReasonBufferFull).
	EventDropped
)

func (k EventKind) String() string {
	switch k {
	case EventFailed:
		return "failed"
	case EventRestarted:
		return "restarted"
	case EventEscalated:
		return "escalated"
	case EventExited:
		return "exited"
	case EventAbandoned:
		return "abandoned"
	case EventDropped:
		return "dropped"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is what Supervisor.OnEvent observes.
type Event struct {
	Kind   EventKind
	Child  string
	Gen    int
	Reason string
	Cause  string
	Stack  string
	Delay  time.Duration
	Count  int
}

// reasonStopped is the Reason of EventExited for a child stopped on purpose.
const reasonStopped = "stopped"

// Private messages: each carries its Supervisor so that two Supervisors in
// one parent never take each other's.
type (
	restartDue struct {
		sup  *Supervisor
		name string
		gen  int
	}
	childGone struct {
		sup       *Supervisor
		name      string
		gen       int
		abandoned bool
	}
)

type phase int

const (
	phaseNotStarted phase = iota
	phaseUp
	phaseRestarting // old instance stopping and/or backoff pending
	phaseShutdown
	phaseDown
	phaseEscalated
)

type envelope struct {
	msg    any
	sender *actor.PID
}

type child struct {
	spec    ChildSpec
	tracker *Tracker
	phase   phase
	gen     int
	pid     *actor.PID // non-nil only in phaseUp
	waiting bool       // the instance of generation gen is being stopped
	due     bool       // phaseRestarting: the backoff delay has passed
	timer   *time.Timer
	// The current restart cycle, reported with EventRestarted.
	reason string
	delay  time.Duration
	// Messages for the next generation: bounced ones first, then Send's.
	bounced  []envelope
	buffered []envelope
}

type stopSeq struct {
	names []string
	done  any
}

// Supervisor supervises the children of one parent actor. It is not an
// actor: the parent embeds it and calls it only from its own Receive, so it
// needs no lock and must never be shared. Timers and stop waits run in
// goroutines that only send private messages to the parent, which passes
// them back through Handle.
type Supervisor struct {
	// OnEvent, if set, is called synchronously on the parent's goroutine
	// (from StartAll, Handle, Send and StopChildren) for every Event.
	OnEvent func(Event)
	// MaxBuffered bounds the messages held for one child between two
	// generations (bounced plus Send's); 0 means DefaultMaxBuffered.
	MaxBuffered int

	policy    Policy
	children  []*child
	byName    map[string]*child
	err       error
	started   bool
	closed    bool
	stops     []*stopSeq
	abandoned []string
}

// New returns a Supervisor of the children in specs (start order) under p.
// Specs and policy are validated by StartAll.
func New(specs []ChildSpec, p Policy) *Supervisor {
	s := &Supervisor{policy: p, byName: make(map[string]*child, len(specs))}
	errs := []error{p.Validate()}
	for _, spec := range specs {
		if err := spec.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if s.byName[spec.Name] != nil {
			errs = append(errs, fmt.Errorf("supervise: duplicate child name %q", spec.Name))
			continue
		}
		ch := &child{spec: spec, tracker: NewTracker(p), phase: phaseNotStarted}
		s.children = append(s.children, ch)
		s.byName[spec.Name] = ch
	}
	s.err = errors.Join(errs...)
	return s
}

// StartAll spawns every child, in spec order, as generation 1. It returns the
// validation error of New's arguments, or ErrAlreadyStarted. A child whose
// Initialized or Started panics is spawned all the same; its ChildFailed
// arrives through Handle like any other.
func (s *Supervisor) StartAll(c *actor.Context) error {
	if s.err != nil {
		return s.err
	}
	if s.started {
		return ErrAlreadyStarted
	}
	s.started = true
	for _, ch := range s.children {
		s.spawn(c, ch)
	}
	return nil
}

// PID returns the running instance of the named child; nil while it is down,
// stopping or waiting to restart.
func (s *Supervisor) PID(name string) *actor.PID {
	if ch := s.byName[name]; ch != nil && ch.phase == phaseUp {
		return ch.pid
	}
	return nil
}

// State returns the named child's state; the zero ChildState for an unknown
// name.
func (s *Supervisor) State(name string) ChildState {
	ch := s.byName[name]
	if ch == nil {
		return 0
	}
	switch ch.phase {
	case phaseNotStarted:
		return StateNotStarted
	case phaseUp:
		return StateUp
	case phaseRestarting:
		if ch.waiting {
			return StateStopping
		}
		return StateBackoff
	case phaseShutdown:
		return StateShutdown
	case phaseDown:
		return StateDown
	}
	return StateEscalated
}

// Gen returns the generation of the named child's latest instance (1 after
// StartAll); 0 for an unknown name or before StartAll.
func (s *Supervisor) Gen(name string) int {
	if ch := s.byName[name]; ch != nil {
		return ch.gen
	}
	return 0
}

// Names returns the children's names in start order.
func (s *Supervisor) Names() []string {
	names := make([]string, len(s.children))
	for i, ch := range s.children {
		names[i] = ch.spec.Name
	}
	return names
}

// Abandoned lists "<name>.<gen>" of every instance that did not stop within
// its ShutdownTimeout.
func (s *Supervisor) Abandoned() []string { return append([]string(nil), s.abandoned...) }

// Send sends msg to the named child, with the parent as sender. While the
// child is stopping or waiting to restart, msg is buffered (at most
// MaxBuffered per child) and delivered in order after the restart, after the
// messages the old instance bounced. It fails with ErrUnknownChild,
// ErrNotStarted, ErrChildDown (the child will not run again) or ErrBufferFull.
func (s *Supervisor) Send(c *actor.Context, name string, msg any) error {
	ch := s.byName[name]
	if ch == nil {
		return fmt.Errorf("send to %q: %w", name, ErrUnknownChild)
	}
	switch ch.phase {
	case phaseUp:
		c.Send(ch.pid, msg)
		return nil
	case phaseRestarting:
		if ch.held() >= s.maxBuffered() {
			return fmt.Errorf("send to %q: %w (%d held)", name, ErrBufferFull, ch.held())
		}
		ch.buffered = append(ch.buffered, envelope{msg: msg, sender: c.PID()})
		return nil
	case phaseNotStarted:
		return fmt.Errorf("send to %q: %w", name, ErrNotStarted)
	}
	return fmt.Errorf("send to %q: %w", name, ErrChildDown)
}

// Handle must see every message of the parent before the parent's own
// handling. It consumes ChildFailed, ChildExited and Undelivered of its own
// children and its private timer and stop messages (handled is true), and
// returns an Escalation when a child failed and will not be restarted.
// Messages of an older generation are ignored (a late bounce is still
// delivered to the current one).
func (s *Supervisor) Handle(c *actor.Context, msg any) (handled bool, esc *Escalation) {
	switch m := msg.(type) {
	case ChildFailed:
		ch := s.byName[m.Name]
		if ch == nil || !s.started {
			return false, nil
		}
		if s.closed || m.Gen != ch.gen {
			return true, nil
		}
		if ch.phase != phaseUp {
			s.emit(Event{Kind: EventFailed, Child: m.Name, Gen: m.Gen, Reason: ReasonStopping, Cause: m.Reason, Stack: m.Stack})
			return true, nil
		}
		return true, s.failed(c, ch, m.Reason, m.Stack, false, true)
	case ChildExited:
		ch := s.byName[m.Name]
		if ch == nil || !s.started {
			return false, nil
		}
		if s.closed || m.Gen != ch.gen || ch.phase != phaseUp {
			return true, nil
		}
		return true, s.exited(c, ch, m)
	case Undelivered:
		ch := s.byName[m.Name]
		if ch == nil || !s.started {
			return false, nil
		}
		if !s.closed {
			s.undelivered(c, ch, m)
		}
		return true, nil
	case restartDue:
		if m.sup != s {
			return false, nil
		}
		ch := s.byName[m.name]
		if s.closed || ch.gen != m.gen || ch.phase != phaseRestarting {
			return true, nil
		}
		ch.timer, ch.due = nil, true
		s.reconcile(c)
		return true, nil
	case childGone:
		if m.sup != s {
			return false, nil
		}
		ch := s.byName[m.name]
		if s.closed || ch.gen != m.gen || !ch.waiting {
			return true, nil
		}
		ch.waiting = false
		if m.abandoned {
			s.abandoned = append(s.abandoned, m.name+"."+strconv.Itoa(m.gen))
			s.emit(Event{Kind: EventAbandoned, Child: m.name, Gen: m.gen, Reason: ReasonShutdownTimeout})
		}
		switch ch.phase {
		case phaseRestarting:
			s.reconcile(c)
		case phaseShutdown:
			ch.phase = phaseDown
			s.emit(Event{Kind: EventExited, Child: m.name, Gen: m.gen, Reason: reasonStopped})
		}
		s.advanceStops(c)
		return true, nil
	}
	return false, nil
}

// StopChildren stops the named children one at a time in the given order
// (the parent usually passes reverse start order), each bounded by its
// ShutdownTimeout (an instance still running then is abandoned, reported
// with EventAbandoned and Abandoned, and the next one proceeds), and then
// sends done (unless nil) to the parent. It never blocks. Stopped children
// are final: they are not restarted, pending restarts are cancelled, and
// messages held for them are dropped (EventDropped). Unknown names are
// skipped.
//
// An abandoned instance stays in hollywood's children map of the parent: if
// the parent is later poisoned, hollywood v1.0.5 waits for it without a
// timeout. Whoever owns the blocking resource (the
// transport's process group) must be killed to release it.
func (s *Supervisor) StopChildren(c *actor.Context, names []string, done any) {
	s.stops = append(s.stops, &stopSeq{names: append([]string(nil), names...), done: done})
	s.advanceStops(c)
}

// StopAll is StopChildren of every child in reverse start order.
func (s *Supervisor) StopAll(c *actor.Context, done any) {
	names := s.Names()
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	s.StopChildren(c, names, done)
}

// Close cancels every pending restart timer and makes the Supervisor ignore
// what it receives from then on. Call it when the parent is about to stop
// without StopAll (its children are then stopped by hollywood, unbounded).
func (s *Supervisor) Close() {
	s.closed = true
	for _, ch := range s.children {
		ch.stopTimer()
	}
}

func (s *Supervisor) maxBuffered() int {
	if s.MaxBuffered > 0 {
		return s.MaxBuffered
	}
	return DefaultMaxBuffered
}

// emit calls OnEvent; a panic in it is logged and swallowed, so a faulty
// observer never leaves the Supervisor half way through a transition.
func (s *Supervisor) emit(e Event) {
	if s.OnEvent == nil {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			slog.Error("supervise: OnEvent panicked", "event", e.Kind.String(), "child", e.Child, "panic", fmt.Sprint(v))
		}
	}()
	s.OnEvent(e)
}

func (ch *child) held() int { return len(ch.bounced) + len(ch.buffered) }

func (ch *child) stopTimer() {
	if ch.timer != nil {
		ch.timer.Stop()
		ch.timer = nil
	}
}

// spawn starts generation ch.gen+1 (skipping any ID still registered, such as
// an abandoned instance of a previous Supervisor of the same parent).
func (s *Supervisor) spawn(c *actor.Context, ch *child) {
	ch.gen++
	for c.GetPID(c.PID().GetID()+"/"+ch.spec.Name+"/"+strconv.Itoa(ch.gen)) != nil {
		ch.gen++
	}
	in := &instance{name: ch.spec.Name, gen: ch.gen}
	ctx := c.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ch.phase, ch.due, ch.waiting = phaseUp, false, false
	ch.pid = c.SpawnChild(ch.spec.Producer, ch.spec.Name,
		actor.WithID(strconv.Itoa(ch.gen)),
		actor.WithInboxSize(ch.spec.inboxSize()),
		actor.WithMaxRestarts(-1),
		actor.WithMiddleware(in.middleware),
		actor.WithContext(context.WithValue(ctx, instanceKey{}, in)),
	)
	ch.tracker.Started(time.Now())
}

// failed handles a failure of the running instance of ch. alive says the
// instance still has to be stopped.
func (s *Supervisor) failed(c *actor.Context, ch *child, cause, stack string, exit, alive bool) *Escalation {
	reason := ReasonTemporary
	var d Decision
	if ch.spec.Restart != Temporary {
		d = ch.tracker.Failure(time.Now())
		reason = d.Reason
	}
	s.stopInstance(c, ch, alive)
	if !d.Restart {
		ch.phase = phaseEscalated
		s.drop(ch, ReasonChildDown)
		esc := &Escalation{Child: ch.spec.Name, Gen: ch.gen, Reason: reason, Cause: cause, Stack: stack}
		s.emit(Event{Kind: EventEscalated, Child: ch.spec.Name, Gen: ch.gen, Reason: reason, Cause: cause, Stack: stack})
		return esc
	}
	ch.phase = phaseRestarting
	ch.reason, ch.delay = ReasonWithinPolicy, d.Delay
	if exit {
		ch.reason = ReasonAbnormalExit
	}
	s.emit(Event{Kind: EventFailed, Child: ch.spec.Name, Gen: ch.gen, Reason: ch.reason, Cause: cause, Stack: stack, Delay: d.Delay})
	s.arm(c, ch, d.Delay)
	if s.policy.Strategy == RestForOne {
		after := false
		for _, sib := range s.children {
			if sib == ch {
				after = true
				continue
			}
			if after && sib.phase == phaseUp {
				s.stopInstance(c, sib, true)
				sib.phase, sib.due = phaseRestarting, true
				sib.reason, sib.delay = ReasonSiblingRestart, 0
			}
		}
	}
	s.reconcile(c)
	return nil
}

func (s *Supervisor) exited(c *actor.Context, ch *child, m ChildExited) *Escalation {
	restart := ch.spec.Restart
	if restart == Temporary || (restart == Transient && m.Normal) {
		reason := ReasonNormalExit
		if !m.Normal {
			reason = ReasonTemporary
		}
		s.stopInstance(c, ch, !m.gone)
		ch.phase = phaseDown
		s.drop(ch, ReasonChildDown)
		s.emit(Event{Kind: EventExited, Child: ch.spec.Name, Gen: ch.gen, Reason: reason})
		return nil
	}
	cause := "abnormal exit"
	if m.Normal {
		cause = "exit of a permanent child"
	}
	return s.failed(c, ch, cause, "", true, !m.gone)
}

// arm schedules restartDue after delay, or marks the restart due at once.
func (s *Supervisor) arm(c *actor.Context, ch *child, delay time.Duration) {
	ch.stopTimer()
	if delay <= 0 {
		ch.due = true
		return
	}
	ch.due = false
	eng, self, msg := c.Engine(), c.PID(), restartDue{sup: s, name: ch.spec.Name, gen: ch.gen}
	ch.timer = time.AfterFunc(delay, func() { eng.Send(self, msg) })
}

// stopInstance takes the running instance of ch out of service: its PID is
// forgotten at once (Send buffers from now on) and, if alive, it is poisoned
// and a goroutine reports childGone when it is gone or its ShutdownTimeout
// passed. Poison is a FIFO pill, so the instance first processes (a healthy
// one) or bounces (a failed one) whatever is queued before it.
func (s *Supervisor) stopInstance(c *actor.Context, ch *child, alive bool) {
	pid := ch.pid
	ch.pid = nil
	if !alive || pid == nil {
		return
	}
	ch.waiting = true
	done := c.Engine().Poison(pid).Done()
	eng, self := c.Engine(), c.PID()
	msg := childGone{sup: s, name: ch.spec.Name, gen: ch.gen}
	timeout := ch.spec.shutdownTimeout()
	go func() {
		var expired <-chan time.Time
		if timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-done:
		case <-expired:
			msg.abandoned = true
		}
		eng.Send(self, msg)
	}()
}

// reconcile spawns every child whose restart is ready, in start order. Under
// RestForOne a child also waits for every earlier child that is restarting.
func (s *Supervisor) reconcile(c *actor.Context) {
	blocked := false
	for _, ch := range s.children {
		if ch.phase != phaseRestarting {
			continue
		}
		if blocked || ch.waiting || !ch.due {
			blocked = s.policy.Strategy == RestForOne
			continue
		}
		s.spawn(c, ch)
		s.emit(Event{Kind: EventRestarted, Child: ch.spec.Name, Gen: ch.gen, Reason: ch.reason, Delay: ch.delay})
		held := append(ch.bounced, ch.buffered...)
		ch.bounced, ch.buffered = nil, nil
		for _, e := range held {
			c.Engine().SendWithSender(ch.pid, e.msg, e.sender)
		}
	}
}

func (s *Supervisor) undelivered(c *actor.Context, ch *child, m Undelivered) {
	switch ch.phase {
	case phaseUp:
		if m.Gen < ch.gen { // late bounce from an abandoned instance
			c.Engine().SendWithSender(ch.pid, m.Message, m.Sender)
			return
		}
	case phaseRestarting:
	default:
		s.emit(Event{Kind: EventDropped, Child: ch.spec.Name, Gen: m.Gen, Reason: ReasonChildDown, Count: 1})
		return
	}
	if ch.held() >= s.maxBuffered() {
		s.emit(Event{Kind: EventDropped, Child: ch.spec.Name, Gen: m.Gen, Reason: ReasonBufferFull, Count: 1})
		return
	}
	ch.bounced = append(ch.bounced, envelope{msg: m.Message, sender: m.Sender})
}

// drop discards what was held for a child that will not run again.
func (s *Supervisor) drop(ch *child, reason string) {
	ch.stopTimer()
	if n := ch.held(); n > 0 {
		ch.bounced, ch.buffered = nil, nil
		s.emit(Event{Kind: EventDropped, Child: ch.spec.Name, Gen: ch.gen, Reason: reason, Count: n})
	}
}

// advanceStops moves every stop sequence forward as far as it can go without
// waiting, and sends done for each one that finished.
func (s *Supervisor) advanceStops(c *actor.Context) {
	remaining := s.stops[:0]
	for _, seq := range s.stops {
		if !s.advance(c, seq) {
			remaining = append(remaining, seq)
			continue
		}
		if seq.done != nil {
			c.Engine().Send(c.PID(), seq.done)
		}
	}
	clear(s.stops[len(remaining):])
	s.stops = remaining
}

// advance reports whether seq is finished.
func (s *Supervisor) advance(c *actor.Context, seq *stopSeq) bool {
	for len(seq.names) > 0 {
		ch := s.byName[seq.names[0]]
		if ch == nil {
			seq.names = seq.names[1:]
			continue
		}
		switch ch.phase {
		case phaseUp:
			ch.phase = phaseShutdown
			s.stopInstance(c, ch, true)
		case phaseRestarting:
			ch.phase = phaseShutdown
			s.drop(ch, ReasonChildDown)
		case phaseNotStarted:
			ch.phase = phaseDown
		}
		if ch.waiting {
			return false
		}
		if ch.phase == phaseShutdown {
			ch.phase = phaseDown
			s.emit(Event{Kind: EventExited, Child: ch.spec.Name, Gen: ch.gen, Reason: reasonStopped})
		}
		seq.names = seq.names[1:]
	}
	return true
}
