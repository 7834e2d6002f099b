package droid

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/gate"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
)

// Compile-time checks of the abilities a droid session has.
var (
	_ transports.Session       = (*session)(nil)
	_ transports.Interrupter   = (*session)(nil)
	_ transports.PostureSetter = (*session)(nil)
)

var errExited = errors.New("droid exited")

type queuedEvent struct {
	turn int
	ev   messages.Event
}

type callResult struct {
	resp   Response
	exited bool
}

// session is one droid session: the shell around core. Goroutines: per
// process a stdout reader, a stderr reader, a stdin writer and a waiter;
// per session one emitter (the only caller of the sink); per interrupt an
// escalator. All state is under mu.
type session struct {
	t    *Transport
	spec transports.SessionSpec
	sink transports.Sink
	bin  string
	ext  string

	stop      chan struct{}
	closed    atomic.Bool
	closeOnce sync.Once
	events    *subprocess.Queue[queuedEvent]
	wg        sync.WaitGroup

	mu       sync.Mutex
	core     *core
	proc     *proc
	gen      int
	started  bool
	pending  map[string]chan callResult
	turnDone map[int]chan struct{}
	early    []queuedEvent
	// ownGroup is the process bookkeeping a pooled process was booted in
	// (not the session's own): closed once every goroutine of the session
	// is done.
	ownGroup     *prockit.Group
	ownGroupOnce sync.Once
	// firstEnd is closed when a turn first ends: the warm pool refills
	// after it, so a boot never competes with the session's first turn.
	firstEnd     chan struct{}
	firstEndOnce sync.Once
}

// proc is one droid process and what the session knows of its end.
type proc struct {
	*subprocess.Process
	gen    int
	status string // set under session.mu before Exited closes
}

func newSession(t *Transport, spec transports.SessionSpec, sink transports.Sink, bin, ext string, ws *gate.Workspace) *session {
	return &session{
		t: t, spec: spec, sink: sink, bin: bin, ext: ext,
		stop:   make(chan struct{}),
		events: subprocess.NewQueue[queuedEvent](),
		core: newCore(coreConfig{outputCap: t.outputCap, lineCap: t.lineCap, ws: ws, posture: spec.Posture,
			idPrefix: "cs-" + transports.RandomHex(4) + "-"}),
		pending:  map[string]chan callResult{},
		turnDone: map[int]chan struct{}{},
		firstEnd: make(chan struct{}),
	}
}

// open starts the first process and runs the handshake.
func (s *session) open(ctx context.Context) error {
	s.wg.Add(1)
	go s.emitLoop()
	resume := s.spec.ResumeExternalID != ""
	if err := s.start(ctx, resume, messages.OpStart); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = s.Close(cctx)
		cancel()
		return err
	}
	s.begin()
	return nil
}

// begin emits EvStarted (turn 0), then what came before it.
func (s *session) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
	s.events.Push(queuedEvent{turn: 0, ev: messages.Event{Type: messages.EvStarted, ExternalSessionID: s.ext, Model: s.spec.Model}})
	for _, qe := range s.early {
		s.events.Push(qe)
	}
	s.early = nil
}

// start spawns a process and runs the handshake: initialize (or load),
// then the session settings. Its errors are typed.
func (s *session) start(ctx context.Context, resume bool, op string) error {
	hctx, cancel := context.WithTimeout(ctx, s.t.startTimeout)
	defer cancel()
	p, err := s.initialize(hctx, resume, op)
	if err != nil {
		return err
	}
	return s.applySettings(hctx, p, op, nil)
}

// initialize spawns a process and sends droid.initialize_session (or
// droid.load_session when resume), bounded by ctx. Its errors are typed.
func (s *session) initialize(hctx context.Context, resume bool, op string) (*proc, error) {
	s.mu.Lock()
	p, err := s.spawn()
	s.mu.Unlock()
	if err != nil {
		return nil, messages.Wrap(messages.CodeInternal, op, err, fmt.Sprintf("cannot start %s: %v", s.bin, err))
	}
	method := methodInitialize
	params := map[string]any{"sessionId": s.ext, "machineId": "codesession", "cwd": s.spec.Cwd}
	if s.spec.Model != "" {
		params["modelId"] = s.spec.Model
	}
	if resume {
		method, params = methodLoad, map[string]any{"sessionId": s.ext}
	}
	if s.spec.Cwd == "" {
		delete(params, "cwd")
	}
	if _, err := s.call(hctx, op, method, params); err != nil {
		return nil, s.startErr(p, op, method, err)
	}
	return p, nil
}

// applySettings sends the posture's autonomy level and the effort (and
// extra settings, a pooled process's model) with
// droid.update_session_settings, and warns where droid reports others.
func (s *session) applySettings(hctx context.Context, p *proc, op string, extra map[string]any) error {
	s.mu.Lock()
	posture := s.core.posture
	s.mu.Unlock()
	params := s.settings(posture)
	for k, v := range extra {
		params[k] = v
	}
	if _, err := s.call(hctx, op, methodUpdateSettings, params); err != nil {
		return s.startErr(p, op, methodUpdateSettings, err)
	}
	s.checkSettings(posture)
	return nil
}

// startErr says why the handshake failed, with the end of droid's stderr.
func (s *session) startErr(p *proc, op, method string, err error) error {
	if errors.Is(err, errExited) {
		select {
		case <-p.Exited():
		case <-time.After(5 * time.Second):
		}
	}
	s.mu.Lock()
	status := p.status
	s.mu.Unlock()
	tail := firstNonEmpty(p.Tail().Text(1500), "no output on stderr")
	e := &messages.Error{Code: messages.CodeInternal, Op: op, Err: err}
	switch {
	case errors.Is(err, errExited):
		e.Message = fmt.Sprintf("droid exited during %s (%s): %s", method, firstNonEmpty(status, "unknown"), tail)
	case messages.IsCode(err, messages.CodeTimeout):
		e.Code, e.Retryable = messages.CodeTimeout, true
		e.Message = fmt.Sprintf("droid did not answer %s in time; stderr: %s", method, tail)
	default:
		e.Code = messages.ErrorCode(err)
		e.Message = messages.AsError(op, err).Message + "; stderr: " + tail
	}
	return e
}

// settings are the droid.update_session_settings params for a posture and
// the session's effort.
func (s *session) settings(p messages.Posture) map[string]any {
	m := map[string]any{"autonomyLevel": AutonomyLevel(p)}
	if e := ReasoningEffort(s.spec.Effort); e != "" {
		m["reasoningEffort"] = e
	}
	return m
}

// checkSettings warns when droid reports settings other than those asked
// for (a model without reasoning efforts reports "none").
func (s *session) checkSettings(p messages.Posture) {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.core.settings
	if want := AutonomyLevel(p); got.AutonomyLevel != "" && got.AutonomyLevel != want {
		s.push(queuedEvent{turn: s.core.evTurn(), ev: messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("droid reports autonomy level %q, not the %q asked for posture %s", got.AutonomyLevel, want, p)}})
	}
	if want := ReasoningEffort(s.spec.Effort); want != "" && got.ReasoningEffort != "" && got.ReasoningEffort != want {
		s.push(queuedEvent{turn: s.core.evTurn(), ev: messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("droid applies reasoning effort %q for model %s, not the %q asked for", got.ReasoningEffort, firstNonEmpty(got.ModelID, s.spec.Model), want)}})
	}
}

func (s *session) env() []string { return buildEnv(os.Environ(), s.spec, s.t.env) }

// spawn starts a process (s.mu held): its lines and its exit come back
// through feed and exited, under s.mu, so they wait until p is s.proc.
func (s *session) spawn() (*proc, error) {
	p := &proc{gen: s.gen + 1}
	sp, err := subprocess.Start(subprocess.Spawn{Bin: s.bin, Args: buildArgs(), Dir: s.spec.Cwd, Env: s.env(),
		Procs: s.spec.Procs, Confine: s.spec.Confine, LineCap: s.t.lineCap, WG: &s.wg,
		OnLine: func(line []byte, over int, _ time.Time) { s.feed(p, line, over) },
		OnExit: func(status string, interrupted bool) { s.exited(p, status, interrupted) }})
	if err != nil {
		return nil, err
	}
	p.Process = sp
	s.gen = p.gen
	s.proc = p
	s.core.respawned()
	return p, nil
}

// feed hands one stdout line (or a dropped line's size) to the core, or a
// response to its waiter.
func (s *session) feed(p *proc, line []byte, over int) {
	var l Line
	var perr error
	if over == 0 {
		l, perr = ParseLine(line)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p != s.proc || s.closed.Load() {
		return
	}
	var eff effects
	switch {
	case over > 0:
		eff = s.core.overCap(over)
	case perr != nil:
		eff = s.core.badLine(perr)
	default:
		if r, ok := l.(Response); ok {
			if ch, ok := s.pending[r.ID]; ok {
				delete(s.pending, r.ID)
				ch <- callResult{resp: r}
				return
			}
		}
		eff = s.core.line(l)
	}
	s.apply(eff)
}

// exited reports the end of p: its pending calls fail and the core learns
// how it ended.
func (s *session) exited(p *proc, status string, interrupted bool) {
	how := exitOwn
	if interrupted {
		how = exitInterrupt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.status = status
	for id, ch := range s.pending {
		delete(s.pending, id)
		ch <- callResult{exited: true}
	}
	if p == s.proc && !s.closed.Load() && s.started {
		s.apply(s.core.exited(how, status, p.Tail().Text(1500)))
	} else if p == s.proc {
		s.core.dead = true
	}
}

// apply carries out the core's effects (s.mu held).
func (s *session) apply(eff effects) {
	if p := s.proc; p != nil {
		for _, w := range eff.writes {
			p.Write(w)
		}
	}
	for _, te := range eff.events {
		s.push(queuedEvent{turn: te.turn, ev: te.ev})
		if te.ev.Type == messages.EvTurnEnd {
			s.firstEndOnce.Do(func() { close(s.firstEnd) })
		}
	}
	if eff.closed {
		for turn, ch := range s.turnDone {
			close(ch)
			delete(s.turnDone, turn)
		}
	}
}

func (s *session) push(qe queuedEvent) {
	if !s.started {
		s.early = append(s.early, qe)
		return
	}
	s.events.Push(qe)
}

func (s *session) emitLoop() {
	defer s.wg.Done()
	for {
		batch, ok := s.events.Wait(s.stop)
		for _, qe := range batch {
			if s.closed.Load() {
				return
			}
			s.sink(qe.turn, qe.ev)
		}
		if !ok {
			return
		}
	}
}

func (s *session) warn(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed.Load() {
		s.push(queuedEvent{turn: s.core.evTurn(), ev: messages.Event{Type: messages.EvWarning, Text: text}})
	}
}

// StartTurn sends input with droid.add_user_message. A process that ended
// between turns (or was killed by an interrupt) is started again with
// droid.load_session.
func (s *session) StartTurn(ctx context.Context, turn int, input string) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return messages.Errorf(messages.CodeNotLive, messages.OpStart, "the session is closed")
	}
	if s.core.fatal {
		status := s.proc.status
		s.mu.Unlock()
		return messages.Errorf(messages.CodeInternal, messages.OpStart,
			"backend exited: droid died during a turn (%s); open the session again to resume it", firstNonEmpty(status, "unknown"))
	}
	if s.core.running {
		s.mu.Unlock()
		return messages.Errorf(messages.CodeConflict, messages.OpStart, "turn %d is still running", s.core.turn)
	}
	dead, prev := s.core.dead, ""
	if s.proc != nil {
		prev = s.proc.status
	}
	s.mu.Unlock()
	if dead {
		if err := s.start(ctx, true, messages.OpStart); err != nil {
			return err
		}
		s.warn(fmt.Sprintf("droid was started again with droid.load_session %s; the previous process ended: %s", s.ext, firstNonEmpty(prev, "unknown")))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	eff, err := s.core.startTurn(turn, input)
	if err != nil {
		return err
	}
	s.turnDone[turn] = make(chan struct{})
	s.apply(eff)
	return nil
}

// Answer answers a droid.request_permission (see core.answer).
func (s *session) Answer(ctx context.Context, clarificationID string, decision messages.Decision, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return messages.Errorf(messages.CodeNotLive, messages.OpAnswer, "the session is closed")
	}
	eff, err := s.core.answer(clarificationID, decision, reason)
	if err != nil {
		return err
	}
	s.apply(eff)
	return nil
}

// Interrupt sends droid.interrupt_session and escalates with signals to
// the process group when the turn does not end in time. With no turn
// running it does nothing.
func (s *session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	if s.closed.Load() || !s.core.interrupt() {
		s.mu.Unlock()
		return nil
	}
	p, done := s.proc, s.turnDone[s.core.turn]
	s.mu.Unlock()
	if done != nil {
		s.wg.Add(1)
		go s.escalate(p, done)
	}
	_, err := s.call(ctx, messages.OpInterrupt, methodInterrupt, map[string]any{})
	if messages.IsCode(err, messages.CodeTimeout) {
		s.warn("droid did not acknowledge the interrupt in time; escalating with signals if the turn does not end")
		return nil
	}
	if errors.Is(err, errExited) {
		return nil // the waiter closes the turn interrupted
	}
	return err
}

func (s *session) escalate(p *proc, done chan struct{}) {
	defer s.wg.Done()
	d := s.t.deadlines
	steps := []subprocess.Step{{Wait: d.Grace, Signal: syscall.SIGINT}, {Wait: d.AfterINT, Signal: syscall.SIGTERM}, {Wait: d.AfterTERM, Signal: syscall.SIGKILL}}
	p.Escalate(steps, func(st subprocess.Step, waited time.Duration) {
		s.warn(fmt.Sprintf("the interrupted turn had not ended after %s: sent %s to droid's process group", waited, subprocess.SignalName(st.Signal)))
	}, done, s.stop)
}

// SetPosture changes droid's autonomy level with
// droid.update_session_settings; it applies to droid's next permission
// decision. Between turns with no process running it is kept for the
// restart.
func (s *session) SetPosture(ctx context.Context, p messages.Posture) error {
	if AutonomyLevel(p) == "" {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	s.mu.Lock()
	between := !s.closed.Load() && s.core.dead && !s.core.running && !s.core.fatal
	if between {
		// no process runs: the restart with the next turn applies it
		s.core.setPosture(p)
	}
	s.mu.Unlock()
	if between {
		return nil
	}
	if _, err := s.call(ctx, messages.OpSetPosture, methodUpdateSettings, map[string]any{"autonomyLevel": AutonomyLevel(p)}); err != nil {
		return err
	}
	s.mu.Lock()
	s.core.setPosture(p)
	s.mu.Unlock()
	s.checkSettings(p)
	return nil
}

// call sends a request of the host and waits for droid's response,
// bounded by ctx and the control timeout. An error response is a typed
// error.
func (s *session) call(ctx context.Context, op, method string, params any) (Response, error) {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return Response{}, messages.Errorf(messages.CodeNotLive, op, "the session is closed")
	}
	p := s.proc
	if p == nil || s.core.dead {
		s.mu.Unlock()
		return Response{}, &messages.Error{Code: messages.CodeNotLive, Op: op, Err: errExited,
			Message: "droid is not running (it starts again with the next turn)"}
	}
	id := s.core.nextID()
	ch := make(chan callResult, 1)
	s.pending[id] = ch
	p.Write(requestLine(id, method, params))
	s.mu.Unlock()

	timer := time.NewTimer(s.t.controlTimeout)
	if method == methodInitialize || method == methodLoad {
		timer.Reset(s.t.startTimeout)
	}
	defer timer.Stop()
	var r callResult
	select {
	case r = <-ch:
	case <-ctx.Done():
		s.forget(id)
		return Response{}, &messages.Error{Code: messages.CodeTimeout, Op: op, Retryable: true, Err: ctx.Err(),
			Message: fmt.Sprintf("droid did not answer %s before the caller's deadline", method)}
	case <-timer.C:
		s.forget(id)
		return Response{}, &messages.Error{Code: messages.CodeTimeout, Op: op, Retryable: true,
			Message: fmt.Sprintf("droid did not answer %s in time", method)}
	case <-s.stop:
		s.forget(id)
		return Response{}, messages.Errorf(messages.CodeNotLive, op, "the session closed while waiting for droid to answer %s", method)
	}
	if r.exited {
		return Response{}, &messages.Error{Code: messages.CodeInternal, Op: op, Err: errExited,
			Message: fmt.Sprintf("droid exited before answering %s", method)}
	}
	if r.resp.Err != nil {
		return r.resp, &messages.Error{Code: rpcErrorCode(r.resp.Err.Code), Op: op,
			Message: fmt.Sprintf("droid refused %s: %s", method, firstNonEmpty(r.resp.Err.Message, "no reason given"))}
	}
	return r.resp, nil
}

// rpcErrorCode maps a JSON-RPC error code to ours.
func rpcErrorCode(c int) messages.Code {
	switch c {
	case -32602, -32600, -32700:
		return messages.CodeInvalid
	case -32601:
		return messages.CodeUnsupported
	}
	return messages.CodeInternal
}

func (s *session) forget(id string) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// Close ends the session: no sink call starts from now on; stdin is
// closed so droid exits by itself, then its process group gets SIGTERM and
// SIGKILL after short grace periods, or at once when ctx ends. It waits
// for every goroutine of the session and is idempotent.
func (s *session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		p := s.proc
		s.mu.Unlock()
		close(s.stop)
		if p != nil {
			s.wg.Add(1)
			go s.stopProc(p)
		}
	})
	return subprocess.AwaitClose(ctx, &s.wg, func() { s.ownGroupOnce.Do(s.ownGroup.Close) }, func() {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p != nil {
			p.Kill()
		}
	}, "droid")
}

// stopProc ends a process: stdin closed, then SIGTERM after a short grace
// (droid 0.215.0 lingers about 15 s after its stdin closes, but exits at
// once on SIGTERM; it writes its session as it goes, so nothing is lost),
// then SIGKILL.
func (s *session) stopProc(p *proc) {
	defer s.wg.Done()
	p.Stop(context.Background(),
		subprocess.Step{Wait: 500 * time.Millisecond, Signal: syscall.SIGTERM}, subprocess.Step{Wait: 2 * time.Second, Signal: syscall.SIGKILL})
}
