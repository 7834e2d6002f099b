package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
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

// Compile-time checks of the abilities a claude-code session has.
var (
	_ transports.Session       = (*session)(nil)
	_ transports.Interrupter   = (*session)(nil)
	_ transports.Steerer       = (*session)(nil)
	_ transports.ModelSetter   = (*session)(nil)
	_ transports.PostureSetter = (*session)(nil)
)

// queuedEvent is an event waiting for the emitter, with the time its
// stdout line was read (zero for events that no line caused).
type queuedEvent struct {
	turn   int
	ev     messages.Event
	readAt time.Time
}

// pendingCtl is a control request of the host waiting for its response.
type pendingCtl struct {
	ch  chan ctlResult // buffered 1
	gen int
}

type ctlResult struct {
	resp   ControlResponse
	exited bool
}

// session is one claude-code session: the shell around core. Goroutines:
// per process a stdout reader, a stderr reader, a stdin writer and a
// waiter; per session one emitter (the only caller of the sink); per
// interrupt an escalator. All state is under mu; events leave through the
// emitter's queue in the order the core produced them.
type session struct {
	t     *Transport
	spec  transports.SessionSpec
	sink  transports.Sink
	bin   string
	ext   string
	nonce string

	stop      chan struct{} // closed by Close
	closed    atomic.Bool
	closeOnce sync.Once
	events    *subprocess.Queue[queuedEvent]
	wg        sync.WaitGroup

	mu       sync.Mutex
	core     *core
	proc     *proc
	gen      int
	started  bool
	pending  map[string]pendingCtl
	turnDone map[int]chan struct{}
	nextID   int
	settleT  *time.Timer
	// early holds events that came before EvStarted (a bad line while
	// starting): they follow it, or are dropped when Open fails.
	early []queuedEvent
	// ownGroup is the process bookkeeping the first process was started
	// in when it is not the session's own (a warm process booted under the
	// pool's): closed once every goroutine of the session is done.
	ownGroup     *prockit.Group
	ownGroupOnce sync.Once
	// firstEnd is closed when a turn first ends: the warm pool refills
	// after it, so a boot never competes with the session's first turn.
	firstEnd     chan struct{}
	firstEndOnce sync.Once
}

// proc is one claude process and what the session knows of its end.
type proc struct {
	*subprocess.Process
	gen int
	// set under session.mu before Exited closes
	status     string
	unreported bool // it exited before the session was started
}

func newSession(t *Transport, spec transports.SessionSpec, sink transports.Sink, bin, ext string, ws gate.Workspace) *session {
	return &session{
		t: t, spec: spec, sink: sink, bin: bin, ext: ext, nonce: transports.RandomHex(4),
		stop:   make(chan struct{}),
		events: subprocess.NewQueue[queuedEvent](),
		core: newCore(coreConfig{outputCap: t.outputCap, lineCap: t.lineCap, allowed: spec.AllowedTools,
			resumed: spec.ResumeExternalID != "", externalID: ext, posture: spec.Posture,
			gate: func(tool string, input json.RawMessage) error { return gateCheck(ws, tool, input) }}),
		pending:  map[string]pendingCtl{},
		turnDone: map[int]chan struct{}{},
		firstEnd: make(chan struct{}),
	}
}

// open starts the first process and completes the initialize handshake.
func (s *session) open(ctx context.Context) error {
	resume, note := s.spec.ResumeExternalID != "", ""
	if resume {
		if exists, known := transcriptExists(s.env(), s.ext); known && !exists {
			resume = false
			note = fmt.Sprintf("Claude Code keeps no transcript of session %s under this HOME: a new conversation starts with the same id, and the agent does not remember earlier turns", s.ext)
		}
	}
	version, err := s.boot(ctx, resume)
	if err != nil {
		return err
	}
	s.begin(version, note)
	return nil
}

// boot starts the first process and completes the initialize handshake,
// returning the CLI's version. Nothing reaches the sink yet: the session
// starts with begin (at once for Open, at adoption for a warm one). On
// failure the session is closed.
func (s *session) boot(ctx context.Context, resume bool) (version string, err error) {
	// Wait for a boot slot (the caller's context bounds the wait; the start
	// timeout bounds only the handshake itself), and hold it until the
	// handshake is over.
	select {
	case s.t.booting <- struct{}{}:
	case <-ctx.Done():
		return "", &messages.Error{Code: messages.CodeTimeout, Op: messages.OpStart, Retryable: true, Err: ctx.Err(),
			Message: fmt.Sprintf("%d claude processes were still starting when the caller's deadline passed", cap(s.t.booting))}
	}
	defer func() { <-s.t.booting }()
	s.mu.Lock()
	p, err := s.spawn(resume)
	s.mu.Unlock()
	if err != nil {
		return "", messages.Wrap(messages.CodeInternal, messages.OpStart, err, fmt.Sprintf("cannot start %s: %v", s.bin, err))
	}
	hctx, cancel := context.WithTimeout(ctx, s.t.startTimeout)
	defer cancel()
	// The handshake is bounded by the start timeout alone: on a loaded
	// machine the CLI's boot takes longer than any control request should.
	resp, err := s.controlWithin(hctx, messages.OpStart, map[string]any{"subtype": "initialize", "hooks": nil}, s.t.startTimeout)
	if err != nil {
		exited := messages.ErrorCode(err) == messages.CodeInternal && errors.Is(err, errExited)
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = s.Close(cctx)
		ccancel()
		s.mu.Lock()
		status := p.status
		s.mu.Unlock()
		tail := p.Tail().Text(1500)
		e := &messages.Error{Code: messages.CodeInternal, Op: messages.OpStart, Err: err}
		switch {
		case exited:
			e.Message = fmt.Sprintf("claude exited at start (%s): %s", status, firstNonEmpty(tail, "no output on stderr"))
		case messages.IsCode(err, messages.CodeTimeout):
			e.Code, e.Retryable = messages.CodeTimeout, true
			e.Message = "claude did not answer the initialize request in time; stderr: " + firstNonEmpty(tail, "(empty)")
		default:
			e.Message = messages.AsError(messages.OpStart, err).Message + "; stderr: " + firstNonEmpty(tail, "(empty)")
		}
		return "", e
	}
	var info struct {
		Version string `json:"claude_code_version"`
	}
	_ = json.Unmarshal(resp.Response, &info)
	return info.Version, nil
}

// begin starts the emitter and emits EvStarted, then what came before it,
// the note and a version warning (and the exit of a process that already
// ended).
func (s *session) begin(version, note string) {
	s.wg.Add(1)
	go s.emitLoop()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	s.started = true
	s.events.Push(queuedEvent{turn: 0, ev: messages.Event{Type: messages.EvStarted, ExternalSessionID: s.ext, Model: s.spec.Model}})
	for _, qe := range s.early {
		s.events.Push(qe)
	}
	s.early = nil
	if note != "" {
		s.events.Push(queuedEvent{turn: 0, ev: messages.Event{Type: messages.EvWarning, Text: note}})
	}
	if version != "" && version != PinnedVersion {
		s.events.Push(queuedEvent{turn: 0, ev: messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("claude %s is running; this transport was verified with %s", version, PinnedVersion)}})
	}
	if p.unreported {
		s.apply(s.core.exited(exitOwn, p.status, p.Tail().Text(1500)), time.Time{})
	}
}

// env is the environment of the session's processes.
func (s *session) env() []string { return buildEnv(os.Environ(), s.spec, s.t.env) }

// spawn starts a process (s.mu held). resume picks --resume over
// --session-id. Its lines and its exit come back through feed and exited,
// under s.mu, so they wait until p is s.proc.
func (s *session) spawn(resume bool) (*proc, error) {
	p := &proc{gen: s.gen + 1}
	sp, err := subprocess.Start(subprocess.Spawn{Bin: s.bin, Args: buildArgs(s.spec, s.ext, resume), Dir: s.spec.Cwd, Env: s.env(),
		Procs: s.spec.Procs, Confine: s.spec.Confine, LineCap: s.t.lineCap, WG: &s.wg,
		OnLine: func(line []byte, over int, readAt time.Time) { s.feed(p, line, over, readAt) },
		OnExit: func(status string, interrupted bool) { s.exited(p, status, interrupted) }})
	if err != nil {
		return nil, err
	}
	p.Process = sp
	s.gen = p.gen
	s.proc = p
	return p, nil
}

// feed hands one stdout line (or a parse error, or a dropped line's size)
// to the core, or a control response to its waiter.
func (s *session) feed(p *proc, line []byte, over int, readAt time.Time) {
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
		if cr, ok := l.(ControlResponse); ok {
			if pc, ok := s.pending[cr.RequestID]; ok {
				delete(s.pending, cr.RequestID)
				pc.ch <- ctlResult{resp: cr}
			}
			return
		}
		eff = s.core.line(l)
	}
	s.apply(eff, readAt)
}

// exited reports the end of p: its pending control requests fail and the
// core learns how it ended (or, before the session started, begin does).
func (s *session) exited(p *proc, status string, interrupted bool) {
	how := exitOwn
	if interrupted {
		how = exitInterrupt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.status = status
	for id, pc := range s.pending {
		if pc.gen == p.gen {
			delete(s.pending, id)
			pc.ch <- ctlResult{exited: true}
		}
	}
	switch {
	case p != s.proc || s.closed.Load():
	case !s.started:
		p.unreported = true
	default:
		s.apply(s.core.exited(how, status, p.Tail().Text(1500)), time.Time{})
	}
}

// apply carries out the core's effects (s.mu held).
func (s *session) apply(eff effects, readAt time.Time) {
	if p := s.proc; p != nil {
		for _, w := range eff.writes {
			p.Write(w)
		}
	}
	for _, te := range eff.events {
		s.push(queuedEvent{turn: te.turn, ev: te.ev, readAt: readAt})
		if te.ev.Type == messages.EvTurnEnd {
			s.firstEndOnce.Do(func() { close(s.firstEnd) })
		}
	}
	if eff.settle {
		turn := s.core.turn
		if s.settleT != nil {
			s.settleT.Stop()
		}
		s.settleT = time.AfterFunc(s.t.settle, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.closed.Load() {
				s.apply(s.core.settleTimeout(turn), time.Time{})
			}
		})
	}
	if eff.closed {
		for turn, ch := range s.turnDone {
			close(ch)
			delete(s.turnDone, turn)
		}
	}
}

// push queues an event for the emitter (s.mu held).
func (s *session) push(qe queuedEvent) {
	if !s.started {
		s.early = append(s.early, qe)
		return
	}
	s.events.Push(qe)
}

// emitLoop is the only caller of the sink.
func (s *session) emitLoop() {
	defer s.wg.Done()
	for {
		batch, ok := s.events.Wait(s.stop)
		for _, qe := range batch {
			if s.closed.Load() {
				return
			}
			s.sink(qe.turn, qe.ev)
			if s.t.trace != nil && !qe.readAt.IsZero() {
				s.t.trace(qe.readAt, qe.ev)
			}
		}
		if !ok {
			return
		}
	}
}

// warn emits a warning for the current turn.
func (s *session) warn(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed.Load() {
		s.push(queuedEvent{turn: s.core.evTurn(), ev: messages.Event{Type: messages.EvWarning, Text: text}})
	}
}

// liveErr is the error of an op on a closed session (s.mu held).
func (s *session) liveErr(op string) error {
	if s.closed.Load() {
		return messages.Errorf(messages.CodeNotLive, op, "the session is closed")
	}
	return nil
}

// StartTurn writes input as a user message. A process that ended between
// turns (or was stopped by an interrupt) is started again with --resume.
func (s *session) StartTurn(ctx context.Context, turn int, input string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.liveErr(messages.OpStart); err != nil {
		return err
	}
	if s.core.fatal {
		return messages.Errorf(messages.CodeInternal, messages.OpStart,
			"backend exited: claude died during a turn (%s); open the session again to resume it", firstNonEmpty(s.proc.status, "unknown"))
	}
	if s.core.dead && !s.core.running {
		prev := ""
		if s.proc != nil {
			prev = s.proc.status
		}
		// a process killed early in its first turn may not have written
		// its transcript yet: then the same id starts afresh
		resume, how := true, "--resume "+s.ext
		if exists, known := transcriptExists(s.env(), s.ext); known && !exists {
			resume, how = false, "--session-id "+s.ext+" (no transcript was written, so the agent does not remember earlier turns)"
		}
		if _, err := s.spawn(resume); err != nil {
			return messages.Wrap(messages.CodeInternal, messages.OpStart, err, fmt.Sprintf("cannot restart %s: %v", s.bin, err))
		}
		s.core.respawned(resume)
		s.events.Push(queuedEvent{turn: turn, ev: messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("claude was started again with %s; the previous process ended: %s", how, firstNonEmpty(prev, "unknown"))}})
	}
	eff, err := s.core.startTurn(turn, input)
	if err != nil {
		return err
	}
	s.turnDone[turn] = make(chan struct{})
	s.apply(eff, time.Time{})
	return nil
}

// Answer answers a can_use_tool request (see core.answer).
func (s *session) Answer(ctx context.Context, clarificationID string, decision messages.Decision, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.liveErr(messages.OpAnswer); err != nil {
		return err
	}
	eff, err := s.core.answer(clarificationID, decision, reason)
	if err != nil {
		return err
	}
	s.apply(eff, time.Time{})
	return nil
}

// Steer writes text as a user message while the turn runs.
func (s *session) Steer(ctx context.Context, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.liveErr(messages.OpGuide); err != nil {
		return err
	}
	eff, err := s.core.steer(text)
	if err != nil {
		return err
	}
	s.apply(eff, time.Time{})
	return nil
}

// Interrupt sends the interrupt control request (cancelling queued
// steering) and starts the escalation: if the turn has not ended within
// the deadlines, SIGINT, SIGTERM and SIGKILL go to the process group. The
// turn ends with EvTurnEnd{State: interrupted}. With no turn running it
// does nothing.
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
	_, err := s.control(ctx, messages.OpInterrupt, map[string]any{"subtype": "interrupt", "cancel_queued": true})
	if messages.IsCode(err, messages.CodeTimeout) {
		s.warn("claude did not acknowledge the interrupt in time; escalating with signals if the turn does not end")
		return nil
	}
	return err
}

// escalate signals the process group until the interrupted turn ends;
// each step's warning is queued before its signal goes, so it is in the
// turn before the turn can end of that signal.
func (s *session) escalate(p *proc, done chan struct{}) {
	defer s.wg.Done()
	d := s.t.deadlines
	steps := []subprocess.Step{{Wait: d.Grace, Signal: syscall.SIGINT}, {Wait: d.AfterINT, Signal: syscall.SIGTERM}, {Wait: d.AfterTERM, Signal: syscall.SIGKILL}}
	p.Escalate(steps, func(st subprocess.Step, waited time.Duration) {
		s.warn(fmt.Sprintf("the interrupted turn had not ended after %s: sent %s to claude's process group", waited, subprocess.SignalName(st.Signal)))
	}, done, s.stop)
}

// SetPosture switches the permission mode (set_permission_mode).
func (s *session) SetPosture(ctx context.Context, p messages.Posture) error {
	mode := PermissionMode(p)
	if mode == "" {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	resp, err := s.control(ctx, messages.OpSetPosture, map[string]any{"subtype": "set_permission_mode", "mode": mode})
	if err != nil {
		return err
	}
	var got struct {
		Mode string `json:"mode"`
	}
	if json.Unmarshal(resp.Response, &got) == nil && got.Mode != "" && got.Mode != mode {
		return messages.Errorf(messages.CodeInternal, messages.OpSetPosture, "claude switched to %q, not %q", got.Mode, mode)
	}
	s.mu.Lock()
	s.core.setPosture(p)
	s.mu.Unlock()
	return nil
}

// SetModel switches the model for the next turn (set_model). Effort is
// fixed at start: a different effort is rejected as unsupported.
func (s *session) SetModel(ctx context.Context, model string, effort messages.Effort) error {
	if effort != "" {
		if !effort.Valid() {
			return messages.FieldError(messages.OpGuide, "effort", "unknown effort %q", effort)
		}
		if effort != s.spec.Effort {
			return messages.Errorf(messages.CodeUnsupported, messages.OpGuide,
				"claude-code sets effort at start only (this session: %q); start a new session for effort %q", s.spec.Effort, effort)
		}
	}
	if model == "" {
		return nil
	}
	_, err := s.control(ctx, messages.OpGuide, map[string]any{"subtype": "set_model", "model": model})
	return err
}

// control sends a control request and waits for its response, bounded by
// ctx and the control timeout. An error response is a typed error.
func (s *session) control(ctx context.Context, op string, req map[string]any) (ControlResponse, error) {
	return s.controlWithin(ctx, op, req, s.t.controlTimeout)
}

// controlWithin is control bounded by limit instead of the control timeout.
func (s *session) controlWithin(ctx context.Context, op string, req map[string]any, limit time.Duration) (ControlResponse, error) {
	subtype, _ := req["subtype"].(string)
	s.mu.Lock()
	if err := s.liveErr(op); err != nil {
		s.mu.Unlock()
		return ControlResponse{}, err
	}
	p := s.proc
	switch {
	case p != nil && p.status != "":
		s.mu.Unlock()
		return ControlResponse{}, &messages.Error{Code: messages.CodeInternal, Op: op, Err: errExited,
			Message: fmt.Sprintf("claude exited before answering %s", subtype)}
	case p == nil || s.core.dead:
		s.mu.Unlock()
		return ControlResponse{}, messages.Errorf(messages.CodeNotLive, op, "claude is not running (it starts again with the next turn)")
	}
	s.nextID++
	id := fmt.Sprintf("req_%d_%s", s.nextID, s.nonce)
	ch := make(chan ctlResult, 1)
	s.pending[id] = pendingCtl{ch: ch, gen: p.gen}
	p.Write(controlRequestLine(id, req))
	s.mu.Unlock()

	timer := time.NewTimer(limit)
	defer timer.Stop()
	var r ctlResult
	select {
	case r = <-ch:
	case <-ctx.Done():
		s.forget(id)
		return ControlResponse{}, &messages.Error{Code: messages.CodeTimeout, Op: op, Retryable: true, Err: ctx.Err(),
			Message: fmt.Sprintf("claude did not answer %s before the caller's deadline", subtype)}
	case <-timer.C:
		s.forget(id)
		return ControlResponse{}, &messages.Error{Code: messages.CodeTimeout, Op: op, Retryable: true,
			Message: fmt.Sprintf("claude did not answer %s within %s", subtype, limit)}
	case <-s.stop:
		s.forget(id)
		return ControlResponse{}, messages.Errorf(messages.CodeNotLive, op, "the session closed while waiting for claude to answer %s", subtype)
	}
	if r.exited {
		return ControlResponse{}, &messages.Error{Code: messages.CodeInternal, Op: op, Err: errExited,
			Message: fmt.Sprintf("claude exited before answering %s", subtype)}
	}
	if !r.resp.OK {
		return r.resp, &messages.Error{Code: controlErrorCode(r.resp.ErrorCode), Op: op,
			Message: fmt.Sprintf("claude refused %s: %s", subtype, firstNonEmpty(r.resp.Error, "no reason given"))}
	}
	return r.resp, nil
}

// controlErrorCode maps the CLI's error_code to ours.
func controlErrorCode(c string) messages.Code {
	switch {
	case strings.HasPrefix(c, "invalid"):
		return messages.CodeInvalid
	case strings.HasPrefix(c, "unsupported"):
		return messages.CodeUnsupported
	case strings.Contains(c, "not_found"):
		return messages.CodeNotFound
	}
	return messages.CodeInternal
}

func (s *session) forget(id string) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// Close ends the session: no sink call starts from now on; stdin is
// closed so claude exits by itself, then its process group gets SIGTERM
// and SIGKILL after short grace periods, or at once when ctx ends. It
// waits for every goroutine of the session; if ctx ends first it returns a
// timeout error, and a later Close waits again. It is idempotent.
func (s *session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		if s.settleT != nil {
			s.settleT.Stop()
		}
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
	}, "claude")
}

// stopProc ends a process: stdin closed, then SIGTERM after 3 s, then
// SIGKILL after 2 s more.
func (s *session) stopProc(p *proc) {
	defer s.wg.Done()
	p.Stop(context.Background(),
		subprocess.Step{Wait: 3 * time.Second, Signal: syscall.SIGTERM}, subprocess.Step{Wait: 2 * time.Second, Signal: syscall.SIGKILL})
}
