package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
)

// ErrExited is wrapped by a Request's error when the process ended (or was
// not running) before it answered.
var ErrExited = errors.New("the CLI exited")

// Event is one thing a stdout line says, as the backend's pure Decode
// reads it: a reply to a request of the host, a message for the core, or
// why the line cannot be read. A reply that no request waits for goes to
// the core as Msg when Msg is set (droid's replies to its turn messages),
// else it is dropped.
type Event[M comparable] struct {
	Reply *Reply
	Msg   M // the zero M: nothing for the core
	Err   error
}

// Reply answers a request of the host.
type Reply struct {
	ID     string
	Result json.RawMessage
	// Refused is set for an error reply: Message says why, Code is ours.
	Refused bool
	Message string
	Code    messages.Code
}

// Core is what the shell needs of a backend's session core.
type Core[M comparable] interface {
	// Line maps one decoded message.
	Line(m M) Effects
	// Exited takes the end of the process.
	Exited(how ExitKind, status, tail string) Effects
	// Answer answers a question the core raised.
	Answer(id string, d messages.Decision, reason string) (Effects, error)
	// State is the core's turn bookkeeping.
	State() *Turn
}

// Settler is a core that asks for a settle timer (Effects.Settle).
type Settler interface {
	SettleTimeout(turn int) Effects
}

// InterruptAsker is a core whose interrupt request depends on its state
// (codex names its thread and its turn); it replaces Backend.Interrupt.
// ok false says the CLI cannot be asked now (codex before it named the
// turn): the escalation then signals at once, without the grace.
type InterruptAsker interface {
	InterruptRequest() (encode func(id string) []byte, ok bool)
}

// Backend is what a stream-JSON CLI supplies to the kit besides its core.
type Backend[M comparable] struct {
	// Name is the CLI in messages: "claude".
	Name string
	// Decode reads one stdout line; pure.
	Decode func(line []byte) []Event[M]
	// Interrupt encodes the interrupt request with id (nil: none).
	Interrupt func(id string) []byte
	// Stop is how Close ends the process after closing its stdin.
	Stop []subprocess.Step
}

// Proc is one process of a session and what the shell knows of its end.
type Proc struct {
	*subprocess.Process
	gen int
	// Status is how it ended ("" while it runs); set under the shell's
	// mutex before Exited closes.
	Status     string
	unreported bool // it exited before the session started
}

type queued struct {
	turn   int
	ev     messages.Event
	readAt time.Time
}

type waiter struct {
	ch  chan replied // buffered 1
	gen int
}

type replied struct {
	r      Reply
	exited bool
}

// Shell runs a session's processes around a backend's core C. A backend's
// session embeds *Shell and adds its ops; every exported field is read and
// written under the Shell's mutex.
type Shell[M comparable, C Core[M]] struct {
	sync.Mutex
	b    Backend[M]
	cfg  *Config
	Spec transports.SessionSpec
	Sink transports.Sink
	Bin  string
	// Ext is the external (the CLI's) session id.
	Ext string
	// Model is the model EvStarted names ("": Spec.Model), for a CLI that
	// reports the one it chose.
	Model string
	// HostEnv are entries of this session's processes above the backend's
	// HostDefaults and below Config.Env (codex: its CODEX_HOME).
	HostEnv []string
	// Core is the session core; a warm adoption replaces it.
	Core C
	// Proc is the current process (nil before the first spawn).
	Proc *Proc
	// NewID mints the id of a request of the host (under the mutex).
	NewID func() string
	// OwnGroup is the process bookkeeping the first process was started in
	// when it is not the session's own (a warm process booted under the
	// pool's): closed once every goroutine of the session is done.
	OwnGroup *prockit.Group
	// FirstEnd closes when a turn first ends (the warm pool refills then).
	FirstEnd chan struct{}
	// Stop closes when Close is called.
	Stop chan struct{}

	closed       atomic.Bool
	closeOnce    sync.Once
	emitOnce     sync.Once
	ownGroupOnce sync.Once
	firstEndOnce sync.Once
	events       *subprocess.Queue[queued]
	wg           sync.WaitGroup
	gen          int
	started      bool
	pending      map[string]waiter
	turnDone     map[int]chan struct{}
	settleT      *time.Timer
	// early holds events that came before Begin: they follow EvStarted, or
	// are dropped when the start fails.
	early []queued
	seq   int
	nonce string
}

// NewShell returns the shell of one session; nothing runs yet.
func NewShell[M comparable, C Core[M]](b Backend[M], cfg *Config, spec transports.SessionSpec, sink transports.Sink, bin, ext string, core C) *Shell[M, C] {
	s := &Shell[M, C]{b: b, cfg: cfg, Spec: spec, Sink: sink, Bin: bin, Ext: ext, Core: core,
		FirstEnd: make(chan struct{}), Stop: make(chan struct{}), events: subprocess.NewQueue[queued](),
		pending: map[string]waiter{}, turnDone: map[int]chan struct{}{}, nonce: transports.RandomHex(4)}
	s.NewID = func() string { s.seq++; return fmt.Sprintf("req_%d_%s", s.seq, s.nonce) }
	return s
}

// Closed reports whether Close was called.
func (s *Shell[M, C]) Closed() bool { return s.closed.Load() }

// Started reports whether Begin ran (mutex held).
func (s *Shell[M, C]) Started() bool { return s.started }

// Env is the environment of the session's processes.
func (s *Shell[M, C]) Env() []string {
	c := *s.cfg
	c.HostDefaults = append(slices.Clip(c.HostDefaults), s.HostEnv...)
	return c.Environ(os.Environ(), s.Spec)
}

// Spawn starts a process with args (mutex held). Its lines and its exit
// come back under the mutex, so they wait until it is s.Proc.
func (s *Shell[M, C]) Spawn(args []string) (*Proc, error) {
	p := &Proc{gen: s.gen + 1}
	sp, err := subprocess.Start(subprocess.Spawn{Bin: s.Bin, Args: args, Dir: s.Spec.Cwd, Env: s.Env(),
		Procs: s.Spec.Procs, Confine: s.Spec.Confine, LineCap: s.cfg.LineCap, WG: &s.wg,
		OnLine: func(line []byte, over int, readAt time.Time) { s.feed(p, line, over, readAt) },
		OnExit: func(status string, interrupted bool) { s.exited(p, status, interrupted) }})
	if err != nil {
		return nil, err
	}
	p.Process = sp
	s.gen, s.Proc = p.gen, p
	s.Core.State().Dead = false
	return p, nil
}

// feed hands one stdout line (or a dropped line's size) to the core, or a
// reply to its waiter.
func (s *Shell[M, C]) feed(p *Proc, line []byte, over int, readAt time.Time) {
	var evs []Event[M]
	if over == 0 {
		evs = s.b.Decode(line)
	}
	s.Lock()
	defer s.Unlock()
	if p != s.Proc || s.closed.Load() {
		return
	}
	if over > 0 {
		s.emitNow(OverCap(s.b.Name, over, s.cfg.LineCap), readAt)
		return
	}
	var zero M
	for _, ev := range evs {
		switch {
		case ev.Err != nil:
			s.emitNow(BadLine(s.b.Name, ev.Err), readAt)
		case ev.Reply != nil && s.deliver(*ev.Reply):
		case ev.Msg != zero:
			s.Apply(s.Core.Line(ev.Msg), readAt)
		}
	}
}

func (s *Shell[M, C]) emitNow(ev messages.Event, readAt time.Time) {
	var e Effects
	e.Emit(s.Core.State().EvTurn(), ev)
	s.Apply(e, readAt)
}

// deliver hands r to the request waiting for it (mutex held).
func (s *Shell[M, C]) deliver(r Reply) bool {
	w, ok := s.pending[r.ID]
	if ok {
		delete(s.pending, r.ID)
		w.ch <- replied{r: r}
	}
	return ok
}

// exited reports the end of p: its waiting requests fail and the core
// learns how it ended (or, before the session started, Begin does).
func (s *Shell[M, C]) exited(p *Proc, status string, interrupted bool) {
	how := ExitOwn
	if interrupted {
		how = ExitInterrupt
	}
	s.Lock()
	defer s.Unlock()
	p.Status = status
	for id, w := range s.pending {
		if w.gen == p.gen {
			delete(s.pending, id)
			w.ch <- replied{exited: true}
		}
	}
	switch {
	case p != s.Proc || s.closed.Load():
	case !s.started:
		p.unreported = true
		s.Core.State().Dead = true
	default:
		s.Apply(s.Core.Exited(how, status, p.Tail().Text(1500)), time.Time{})
	}
}

// Apply carries out the core's effects (mutex held); readAt is when the
// line that caused them was read (zero for an op).
func (s *Shell[M, C]) Apply(eff Effects, readAt time.Time) {
	if p := s.Proc; p != nil {
		for _, w := range eff.Writes {
			p.Write(w)
		}
		if !s.closed.Load() {
			for _, f := range eff.Followups {
				s.wg.Add(1)
				go s.followup(p, f)
			}
		}
	}
	for _, te := range eff.Events {
		s.push(queued{turn: te.Turn, ev: te.Ev, readAt: readAt})
		if te.Ev.Type == messages.EvTurnEnd {
			s.firstEndOnce.Do(func() { close(s.FirstEnd) })
		}
	}
	if st, ok := any(s.Core).(Settler); ok && eff.Settle {
		turn := s.Core.State().Number
		if s.settleT != nil {
			s.settleT.Stop()
		}
		s.settleT = time.AfterFunc(s.cfg.Settle, func() {
			s.Lock()
			defer s.Unlock()
			if !s.closed.Load() {
				s.Apply(st.SettleTimeout(turn), time.Time{})
			}
		})
	}
	if eff.Closed {
		for turn, ch := range s.turnDone {
			close(ch)
			delete(s.turnDone, turn)
		}
	}
}

// followup sends f's request and then writes f.Then to p (see Followup).
func (s *Shell[M, C]) followup(p *Proc, f Followup) {
	defer s.wg.Done()
	_, _ = s.Request(context.Background(), messages.OpAnswer, f.What, s.cfg.ControlTimeout, f.Encode)
	s.Lock()
	defer s.Unlock()
	if p == s.Proc && !s.closed.Load() {
		for _, w := range f.Then {
			p.Write(w)
		}
	}
}

// Emit queues one event (mutex held).
func (s *Shell[M, C]) Emit(turn int, ev messages.Event) { s.push(queued{turn: turn, ev: ev}) }

func (s *Shell[M, C]) push(q queued) {
	if !s.started {
		s.early = append(s.early, q)
		return
	}
	s.events.Push(q)
}

// Warn emits a warning for the current turn.
func (s *Shell[M, C]) Warn(text string) {
	s.Lock()
	defer s.Unlock()
	if !s.closed.Load() {
		s.Emit(s.Core.State().EvTurn(), messages.Event{Type: messages.EvWarning, Text: text})
	}
}

// Begin starts the emitter and emits EvStarted (turn 0), then what came
// before it, then notes (warnings), and the exit of a process that ended
// before it.
func (s *Shell[M, C]) Begin(notes ...string) {
	s.emitOnce.Do(func() {
		s.wg.Add(1)
		go s.emitLoop()
	})
	s.Lock()
	defer s.Unlock()
	s.started = true
	model := s.Model
	if model == "" {
		model = s.Spec.Model
	}
	s.events.Push(queued{ev: messages.Event{Type: messages.EvStarted, ExternalSessionID: s.Ext, Model: model}})
	for _, q := range s.early {
		s.events.Push(q)
	}
	s.early = nil
	for _, n := range notes {
		if n != "" {
			s.events.Push(queued{ev: messages.Event{Type: messages.EvWarning, Text: n}})
		}
	}
	if p := s.Proc; p != nil && p.unreported {
		p.unreported = false
		s.Apply(s.Core.Exited(ExitOwn, p.Status, p.Tail().Text(1500)), time.Time{})
	}
}

// Adopted hands the shell of a pooled process to a start: its spec, sink
// and core (mutex held); what the idle process said belongs to nobody.
func (s *Shell[M, C]) Adopted(spec transports.SessionSpec, sink transports.Sink, core C) {
	s.Spec, s.Sink, s.Core = spec, sink, core
	s.early = nil
}

// emitLoop is the only caller of the sink.
func (s *Shell[M, C]) emitLoop() {
	defer s.wg.Done()
	for {
		batch, ok := s.events.Wait(s.Stop)
		for _, q := range batch {
			if s.closed.Load() {
				return
			}
			s.Sink(q.turn, q.ev)
			if s.cfg.Trace != nil && !q.readAt.IsZero() {
				s.cfg.Trace(q.readAt, q.ev)
			}
		}
		if !ok {
			return
		}
	}
}

// LiveErr is the error of an op on a closed session, else nil.
func (s *Shell[M, C]) LiveErr(op string) error {
	if s.closed.Load() {
		return messages.Errorf(messages.CodeNotLive, op, "the session is closed")
	}
	return nil
}

// OpenTurn applies the effects that start turn (mutex held): the turn's
// interrupt escalation ends when it closes.
func (s *Shell[M, C]) OpenTurn(turn int, eff Effects) {
	s.turnDone[turn] = make(chan struct{})
	s.Apply(eff, time.Time{})
}

// Answer answers a question the core raised.
func (s *Shell[M, C]) Answer(ctx context.Context, clarificationID string, decision messages.Decision, reason string) error {
	s.Lock()
	defer s.Unlock()
	if err := s.LiveErr(messages.OpAnswer); err != nil {
		return err
	}
	eff, err := s.Core.Answer(clarificationID, decision, reason)
	if err != nil {
		return err
	}
	s.Apply(eff, time.Time{})
	return nil
}

// Interrupt sends the backend's interrupt request (the core's, for an
// InterruptAsker) and starts the escalation: when the turn has not ended
// within the deadlines, SIGINT, SIGTERM and SIGKILL go to the process
// group. With no turn running it does nothing; a process that exits
// meanwhile closes the turn itself, and a refusal that raced the turn's
// end is no error.
func (s *Shell[M, C]) Interrupt(ctx context.Context) error {
	s.Lock()
	if s.closed.Load() || !s.Core.State().Interrupt() {
		s.Unlock()
		return nil
	}
	encode, ask := s.b.Interrupt, true
	if ia, ok := any(s.Core).(InterruptAsker); ok {
		encode, ask = ia.InterruptRequest()
	}
	p, done := s.Proc, s.turnDone[s.Core.State().Number]
	s.Unlock()
	if done != nil {
		s.wg.Add(1)
		go s.escalate(p, done, ask)
	}
	if !ask || encode == nil {
		return nil
	}
	_, err := s.Request(ctx, messages.OpInterrupt, "the interrupt", s.cfg.ControlTimeout, encode)
	switch {
	case messages.IsCode(err, messages.CodeTimeout):
		s.Warn(s.b.Name + " did not acknowledge the interrupt in time; escalating with signals if the turn does not end")
		return nil
	case errors.Is(err, ErrExited):
		return nil // the waiter closes the turn
	case err != nil && done != nil:
		select {
		case <-done:
			return nil // the turn ended before the CLI read the interrupt
		default:
		}
	}
	return err
}

// escalate signals the process group until the interrupted turn ends;
// each step's warning is queued before its signal goes, so it is in the
// turn before the turn can end of that signal.
func (s *Shell[M, C]) escalate(p *Proc, done chan struct{}, grace bool) {
	defer s.wg.Done()
	d := s.cfg.Deadlines
	if !grace {
		d.Grace = 0
	}
	steps := []subprocess.Step{{Wait: d.Grace, Signal: syscall.SIGINT}, {Wait: d.AfterINT, Signal: syscall.SIGTERM}, {Wait: d.AfterTERM, Signal: syscall.SIGKILL}}
	p.Escalate(steps, func(st subprocess.Step, waited time.Duration) {
		s.Warn(fmt.Sprintf("the interrupted turn had not ended after %s: sent %s to %s's process group", waited, subprocess.SignalName(st.Signal), s.b.Name))
	}, done, s.Stop)
}

// Request sends the request encode makes with a fresh id and waits for its
// reply, bounded by ctx and limit; what names it in errors. A refusal is a
// *messages.Error of the reply's code; a process that is gone or ends
// first is one wrapping ErrExited.
func (s *Shell[M, C]) Request(ctx context.Context, op, what string, limit time.Duration, encode func(id string) []byte) (Reply, error) {
	s.Lock()
	if err := s.LiveErr(op); err != nil {
		s.Unlock()
		return Reply{}, err
	}
	p := s.Proc
	switch {
	case p != nil && p.Status != "":
		s.Unlock()
		return Reply{}, &messages.Error{Code: messages.CodeInternal, Op: op, Err: ErrExited,
			Message: fmt.Sprintf("%s exited before answering %s", s.b.Name, what)}
	case p == nil || s.Core.State().Dead:
		s.Unlock()
		return Reply{}, &messages.Error{Code: messages.CodeNotLive, Op: op, Err: ErrExited,
			Message: s.b.Name + " is not running (it starts again with the next turn)"}
	}
	id := s.NewID()
	ch := make(chan replied, 1)
	s.pending[id] = waiter{ch: ch, gen: p.gen}
	p.Write(encode(id))
	s.Unlock()

	timer := time.NewTimer(limit)
	defer timer.Stop()
	var r replied
	select {
	case r = <-ch:
	case <-ctx.Done():
		s.forget(id)
		return Reply{}, &messages.Error{Code: messages.CodeTimeout, Op: op, Retryable: true, Err: ctx.Err(),
			Message: fmt.Sprintf("%s did not answer %s before the caller's deadline", s.b.Name, what)}
	case <-timer.C:
		s.forget(id)
		return Reply{}, &messages.Error{Code: messages.CodeTimeout, Op: op, Retryable: true,
			Message: fmt.Sprintf("%s did not answer %s within %s", s.b.Name, what, limit)}
	case <-s.Stop:
		s.forget(id)
		return Reply{}, messages.Errorf(messages.CodeNotLive, op, "the session closed while waiting for %s to answer %s", s.b.Name, what)
	}
	if r.exited {
		return Reply{}, &messages.Error{Code: messages.CodeInternal, Op: op, Err: ErrExited,
			Message: fmt.Sprintf("%s exited before answering %s", s.b.Name, what)}
	}
	if r.r.Refused {
		msg := r.r.Message
		if msg == "" {
			msg = "no reason given"
		}
		return r.r, &messages.Error{Code: r.r.Code, Op: op, Message: fmt.Sprintf("%s refused %s: %s", s.b.Name, what, msg)}
	}
	return r.r, nil
}

func (s *Shell[M, C]) forget(id string) {
	s.Lock()
	delete(s.pending, id)
	s.Unlock()
}

// StartErr is the error of a failed handshake: what went wrong with the
// end of the CLI's stderr (an exit waits up to 5 s for its status). where
// says where it exited ("at start"), what the request it did not answer.
func (s *Shell[M, C]) StartErr(p *Proc, op, where, what string, err error) error {
	if errors.Is(err, ErrExited) {
		select {
		case <-p.Exited():
		case <-time.After(5 * time.Second):
		}
	}
	s.Lock()
	status := p.Status
	s.Unlock()
	tail := p.Tail().Text(1500)
	if tail == "" {
		tail = "no output on stderr"
	}
	if status == "" {
		status = "unknown"
	}
	e := &messages.Error{Code: messages.CodeInternal, Op: op, Err: err}
	switch {
	case errors.Is(err, ErrExited):
		e.Message = fmt.Sprintf("%s exited %s (%s): %s", s.b.Name, where, status, tail)
	case messages.IsCode(err, messages.CodeTimeout):
		e.Code, e.Retryable = messages.CodeTimeout, true
		e.Message = fmt.Sprintf("%s did not answer %s in time; stderr: %s", s.b.Name, what, tail)
	default:
		e.Code = messages.ErrorCode(err)
		e.Message = messages.AsError(op, err).Message + "; stderr: " + tail
	}
	return e
}

// Alive reports whether the process runs and nobody closed the session
// (a pooled process is adopted only then).
func (s *Shell[M, C]) Alive() bool {
	s.Lock()
	defer s.Unlock()
	return !s.closed.Load() && s.Proc != nil && s.Proc.Status == "" && !s.Core.State().Dead
}

// Discard closes the session within 10 s (a pooled process nobody adopts).
func (s *Shell[M, C]) Discard() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Close(ctx)
}

// Close ends the session: no sink call starts from now on; stdin is closed
// so the CLI exits by itself, then its process group walks the backend's
// Stop steps, or is killed at once when ctx ends. It waits for every
// goroutine of the session; if ctx ends first it returns a timeout error,
// and a later Close waits again. It is idempotent.
func (s *Shell[M, C]) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.Lock()
		s.closed.Store(true)
		if s.settleT != nil {
			s.settleT.Stop()
		}
		p := s.Proc
		s.Unlock()
		close(s.Stop)
		if p != nil {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				p.Stop(context.Background(), s.b.Stop...)
			}()
		}
	})
	return subprocess.AwaitClose(ctx, &s.wg, func() { s.ownGroupOnce.Do(s.OwnGroup.Close) }, func() {
		s.Lock()
		p := s.Proc
		s.Unlock()
		if p != nil {
			p.Kill()
		}
	}, s.b.Name)
}
