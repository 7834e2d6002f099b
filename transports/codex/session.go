package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
)

// Session is one open codex session: one app-server process (started
// again, resuming the thread, after it stopped between turns or was killed
// to end an interrupt) and the core that reads it.
type Session struct {
	t    *Transport
	spec transports.SessionSpec
	sink transports.Sink
	bin  string
	env  []string
	// freshHome is the CODEX_HOME Open made; removed at Close when the
	// session never had a thread (see prepareHome)
	freshHome string
	// pooled is set for a warm pool's process until a start adopts it
	// (pool.go); oldHome is the path an adopted process was booted with,
	// a link to the session's CODEX_HOME removed at Close; ownGroup is the
	// process group bookkeeping the first process was booted under, closed
	// at Close.
	pooled   bool
	oldHome  string
	ownGroup *prockit.Group

	mu       sync.Mutex
	core     *core
	proc     *process
	threadID string
	settings Settings
	model    string // per-turn override for the next turn/start
	effort   string
	posture  messages.Posture
	sendPost bool // the posture changed since the last turn/start
	closed   bool
	// started: EvStarted went out; until then events wait in early, so
	// EvStarted comes first (and a failed Open emits nothing)
	started bool
	early   []turnEvent

	emitMu  sync.Mutex
	queue   []turnEvent
	wake    chan struct{}
	stopEm  chan struct{}
	emitted chan struct{}

	// firstEnd is closed once the first turn has ended (the warm pool
	// refills only then)
	firstEnd  chan struct{}
	firstOnce sync.Once
}

var (
	_ transports.Session       = (*Session)(nil)
	_ transports.Interrupter   = (*Session)(nil)
	_ transports.Steerer       = (*Session)(nil)
	_ transports.ModelSetter   = (*Session)(nil)
	_ transports.PostureSetter = (*Session)(nil)
)

// Settings are the sandbox and approval policy the app-server reported for
// the thread (thread/start or thread/resume), as it spells them.
type Settings struct {
	Sandbox        string
	ApprovalPolicy string
	Model          string
	Effort         string
}

// process is one running app-server, on the subprocess kit (spawn through
// proc, pipes, capped line reader, stdin queue, stderr tail, waiter).
type process struct {
	sp    *subprocess.Process
	ready chan struct{} // closed once sp is set
	done  chan struct{} // closed once it has exited and its output is drained
	exit  string        // its exit status, as the kit reports it

	mu     sync.Mutex
	nextID int64
	calls  map[string]chan message
	gone   bool

	pgid      int                  // its process group (the command's pid)
	killedFor string               // set before the shell kills it on purpose
	trace     func(string, []byte) // Transport.trace, for what it writes
}

// failed is the exit when it was not a clean one.
func (p *process) failed() string {
	if p.exit == cleanExit {
		return ""
	}
	return p.exit
}

const cleanExit = "exit status 0"

func newSession(t *Transport, spec transports.SessionSpec, sink transports.Sink, bin string, env []string) *Session {
	s := &Session{t: t, spec: spec, sink: sink, bin: bin, env: env, posture: spec.Posture,
		wake: make(chan struct{}, 1), stopEm: make(chan struct{}), emitted: make(chan struct{}), firstEnd: make(chan struct{})}
	s.core = newCore(coreConfig{outputCap: t.outputCap, posture: spec.Posture, ws: t.workspace(spec.Cwd)})
	if e, ok := effortMap[spec.Effort]; ok {
		s.effort = e
	}
	go s.emitter()
	return s
}

// emitter is the only caller of the Sink, in the order the core produced
// the events.
func (s *Session) emitter() {
	defer close(s.emitted)
	for {
		s.emitMu.Lock()
		q, sink := s.queue, s.sink // a warm pool's adoption sets the sink
		s.queue = nil
		s.emitMu.Unlock()
		for _, e := range q {
			sink(e.turn, e.ev)
		}
		select {
		case <-s.wake:
		case <-s.stopEm:
			s.emitMu.Lock()
			q, sink := s.queue, s.sink
			s.queue = nil
			s.emitMu.Unlock()
			for _, e := range q {
				sink(e.turn, e.ev)
			}
			return
		}
	}
}

// apply carries out a core step's effects; called with s.mu held.
func (s *Session) apply(fx effects) {
	if !s.started {
		s.early = append(s.early, fx.events...)
		fx.events = nil
	}
	for _, e := range fx.events {
		if e.turn > 0 && (e.ev.Type == messages.EvTurnEnd || e.ev.Type == messages.EvError && e.ev.Fatal) {
			s.firstOnce.Do(func() { close(s.firstEnd) })
		}
	}
	if len(fx.events) > 0 && !s.closed {
		s.emitMu.Lock()
		s.queue = append(s.queue, fx.events...)
		s.emitMu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	if s.proc != nil {
		for _, w := range fx.writes {
			s.proc.send(w)
		}
	}
	if fx.steer != "" && s.proc != nil {
		p, thread, turn := s.proc, s.threadID, s.core.codexTurn
		go func() { // never wait for a response under the lock
			ctx, cancel := context.WithTimeout(context.Background(), s.t.requestTimeout)
			defer cancel()
			_, _ = p.call(ctx, "turn/steer", steerParams(thread, turn, fx.steer))
			if fx.afterSteer != nil {
				p.send(fx.afterSteer) // steered or not, the question is answered
			}
		}()
	}
}

func steerParams(thread, turn, text string) map[string]any {
	return map[string]any{"threadId": thread, "expectedTurnId": turn, "input": textInput(text)}
}

func textInput(text string) []any {
	return []any{map[string]any{"type": "text", "text": text, "text_elements": []any{}}}
}

// isGone: the process has exited (and was waited for).
func (p *process) isGone() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gone
}

// send queues a line for the writer; a gone process drops it.
func (p *process) send(b []byte) {
	p.mu.Lock()
	gone := p.gone
	p.mu.Unlock()
	if gone {
		return
	}
	if p.trace != nil {
		p.trace(">>", b)
	}
	p.sp.Write(b)
}

// call sends a request and waits for its response, ctx or the process's end.
func (p *process) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p.mu.Lock()
	if p.gone {
		p.mu.Unlock()
		return nil, errExited
	}
	p.nextID++
	id := p.nextID
	ch := make(chan message, 1)
	p.calls[fmt.Sprint(id)] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.calls, fmt.Sprint(id))
		p.mu.Unlock()
	}()
	p.send(encodeRequest(id, method, params))
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-p.done:
		return nil, errExited
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var errExited = errors.New("the codex app-server exited")

// start runs a new app-server and completes initialize and thread/start
// (or thread/resume when the session has a thread already or resumes one),
// both bounded by the start timeout.
func (s *Session) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.t.startTimeout)
	defer cancel()
	p, err := s.boot(ctx)
	if err != nil {
		return err
	}
	return s.openThread(ctx, p)
}

// boot runs a new app-server, contained by the session's process group
// (proc: its own process group under the watchdog, the group's cgroup and
// boot-sweep record), and completes initialize: all a warm pool does ahead
// of a start.
func (s *Session) boot(ctx context.Context) (*process, error) {
	p := &process{ready: make(chan struct{}), done: make(chan struct{}), calls: map[string]chan message{}, trace: s.t.trace}
	sp, err := subprocess.Start(subprocess.Spawn{
		Bin: s.bin, Args: []string{"app-server"}, Dir: s.spec.Cwd, Env: s.env,
		Procs: s.spec.Procs, Confine: s.spec.Confine, LineCap: s.t.lineCap,
		OnLine: func(line []byte, over int, _ time.Time) { s.line(p, line, over) },
		OnExit: func(status string, _ bool) {
			<-p.ready
			p.mu.Lock()
			p.exit, p.gone = status, true
			p.mu.Unlock()
			close(p.done)
			s.processEnded(p)
		},
	})
	if err != nil {
		return nil, messages.Wrap(messages.CodeUnsupported, messages.OpStart, err, fmt.Sprintf("cannot start %s app-server: %v", s.bin, err))
	}
	p.sp, p.pgid = sp, sp.Pgid
	close(p.ready)
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	if _, err := p.call(ctx, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "codesession", "title": "codesession", "version": "1"},
		"capabilities": nil,
	}); err != nil {
		return nil, s.bootFailed(p, "initialize", err)
	}
	p.send(encodeNotification("initialized"))
	return p, nil
}

// bootFailed kills p, waits for its end and says why the handshake failed,
// with the end of its stderr.
func (s *Session) bootFailed(p *process, what string, err error) error {
	s.kill(p, "handshake failed")
	<-p.done
	msg := fmt.Sprintf("codex app-server %s failed: %v", what, err)
	if t := p.sp.Tail().Text(600); t != "" {
		msg += " (stderr: " + t + ")"
	}
	if f := p.failed(); errors.Is(err, errExited) && f != "" {
		msg += " [" + f + "]"
	}
	return messages.Wrap(messages.CodeInternal, messages.OpStart, err, msg)
}

// openThread starts the session's thread on the initialized process p
// (thread/resume when the session has a thread or resumes one): the cwd,
// model, sandbox and approval policy go as its parameters, and Codex reads
// the CODEX_HOME's config.toml again for it (verified on 0.169.0), so a
// pooled process takes the adopting session's settings here.
func (s *Session) openThread(ctx context.Context, p *process) error {
	s.mu.Lock()
	thread := s.threadID
	if thread == "" {
		thread = s.spec.ResumeExternalID
	}
	params := s.threadParams()
	s.mu.Unlock()
	method := "thread/start"
	if thread != "" {
		method = "thread/resume"
		params["threadId"] = thread
		params["excludeTurns"] = true // the history stays in Codex; we need none of it
	}
	res, err := p.call(ctx, method, params)
	if err != nil {
		return s.bootFailed(p, method, err)
	}
	var r struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		Model           string          `json:"model"`
		ReasoningEffort string          `json:"reasoningEffort"`
		ApprovalPolicy  json.RawMessage `json:"approvalPolicy"`
		Sandbox         json.RawMessage `json:"sandbox"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Thread.ID == "" {
		return s.bootFailed(p, method, fmt.Errorf("no thread id in %s", clip(res, 200)))
	}
	s.mu.Lock()
	s.threadID = r.Thread.ID
	s.settings = Settings{Sandbox: sandboxType(r.Sandbox), ApprovalPolicy: unquote(r.ApprovalPolicy), Model: r.Model, Effort: r.ReasoningEffort}
	s.sendPost = false
	s.mu.Unlock()
	return nil
}

// threadParams are thread/start's (and thread/resume's) settings; with
// s.mu held.
func (s *Session) threadParams() map[string]any {
	pc, _ := PostureOf(s.posture)
	p := map[string]any{"approvalPolicy": pc.ApprovalPolicy, "sandbox": pc.Sandbox}
	if s.spec.Cwd != "" {
		p["cwd"] = s.spec.Cwd
	}
	if m := firstNonEmpty(s.model, s.spec.Model); m != "" {
		p["model"] = m
	}
	if s.spec.AppendSystemPrompt != "" {
		p["developerInstructions"] = s.spec.AppendSystemPrompt
	}
	return p
}

// sandboxType reads the sandbox of a thread response: {"type": "..."} or
// a bare mode string.
func sandboxType(raw json.RawMessage) string {
	var obj struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Type != "" {
		return obj.Type
	}
	return unquote(raw)
}

func unquote(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// line turns one stdout line of p into a core step or a call response
// (over: a line over the cap, dropped).
func (s *Session) line(p *process, b []byte, over int) {
	if over > 0 {
		s.report(messages.Event{Type: messages.EvError, Text: fmt.Sprintf("codex app-server wrote a %d-byte line, over the %d-byte cap; dropped", over, s.t.lineCap)})
		return
	}
	if s.t.trace != nil {
		s.t.trace("<<", b)
	}
	m, err := parseMessage(b)
	if err != nil {
		s.report(messages.Event{Type: messages.EvError, Text: err.Error()})
		return
	}
	if m.Kind == kindResponse {
		p.mu.Lock()
		ch := p.calls[idKey(m.ID)]
		p.mu.Unlock()
		if ch != nil {
			ch <- m
		}
		return
	}
	s.mu.Lock()
	fx := s.core.step(m)
	s.apply(fx)
	s.mu.Unlock()
}

// report emits a session event outside the core (a stream problem).
func (s *Session) report(ev messages.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if s.core.running {
		n = s.core.turn
	}
	s.apply(effects{events: []turnEvent{{n, ev}}})
}

// processEnded runs once per process when it is gone.
func (s *Session) processEnded(p *process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != p {
		return
	}
	s.proc = nil
	if s.closed {
		return
	}
	why := "exit"
	if f := p.failed(); f != "" {
		why = f
	}
	if t := p.sp.Tail().Text(600); t != "" {
		why += "; stderr: " + t
	}
	p.mu.Lock()
	on := p.killedFor
	p.mu.Unlock()
	s.apply(s.core.exited(on == "interrupt", why))
}

// kill signals the process group: SIGTERM, then SIGKILL after a second.
func (s *Session) kill(p *process, why string) {
	p.mu.Lock()
	if p.killedFor == "" {
		p.killedFor = why
	}
	p.mu.Unlock()
	pid := p.pgid
	subprocess.Signal(pid, syscall.SIGTERM)
	go subprocess.Escalate(pid, []subprocess.Step{{Wait: time.Second, Signal: syscall.SIGKILL}}, nil, p.done)
}

// StartTurn sends input as turn n (turn/start, with the model, effort and
// posture changed since the last turn), starting the app-server again
// first when it is not running.
func (s *Session) StartTurn(ctx context.Context, n int, input string) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return messages.Errorf(messages.CodeNotLive, messages.OpStart, "the codex session is closed")
	case s.core.dead:
		s.mu.Unlock()
		return messages.Errorf(messages.CodeNotLive, messages.OpStart, "the codex app-server died mid-turn; resume the session")
	case s.core.running:
		s.mu.Unlock()
		return messages.Errorf(messages.CodeConflict, messages.OpStart, "turn %d is still running", s.core.turn)
	}
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		if err := s.start(ctx); err != nil {
			return err
		}
	}
	s.mu.Lock()
	p = s.proc
	if p == nil || s.closed {
		s.mu.Unlock()
		return messages.Errorf(messages.CodeNotLive, messages.OpStart, "the codex app-server is gone")
	}
	params := map[string]any{"threadId": s.threadID, "input": textInput(input)}
	if s.model != "" {
		params["model"] = s.model
	}
	if s.effort != "" {
		params["effort"] = s.effort
	}
	if s.sendPost {
		pc, _ := PostureOf(s.posture)
		params["approvalPolicy"] = pc.ApprovalPolicy
		params["sandboxPolicy"] = map[string]any{"type": pc.SandboxPolicy}
		s.sendPost = false
	}
	s.core.beginTurn(n)
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, s.t.requestTimeout)
	defer cancel()
	res, err := p.call(ctx, "turn/start", params)
	if err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.core.running && s.core.turn == n && s.core.codexTurn == "" {
			s.core.running = false
		}
		return messages.Wrap(messages.CodeInternal, messages.OpStart, err, "codex turn/start failed: "+err.Error())
	}
	var r struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	_ = json.Unmarshal(res, &r)
	s.mu.Lock()
	if s.core.turn == n {
		s.core.turnStarted(r.Turn.ID)
	}
	s.mu.Unlock()
	return nil
}

// Answer answers a clarification (see core.answer).
func (s *Session) Answer(ctx context.Context, id string, d messages.Decision, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return messages.Errorf(messages.CodeNotLive, messages.OpAnswer, "the codex session is closed")
	}
	fx, err := s.core.answer(id, d, reason)
	if err != nil {
		return err
	}
	s.apply(fx)
	return nil
}

// Steer sends text into the running turn (turn/steer).
func (s *Session) Steer(ctx context.Context, text string) error {
	s.mu.Lock()
	p, thread, turn, running := s.proc, s.threadID, s.core.codexTurn, s.core.running
	s.mu.Unlock()
	if !running || p == nil {
		return messages.Errorf(messages.CodeConflict, messages.OpGuide, "no turn is running to steer")
	}
	if turn == "" {
		return messages.Errorf(messages.CodeConflict, messages.OpGuide, "the running turn has not started in codex yet")
	}
	ctx, cancel := context.WithTimeout(ctx, s.t.requestTimeout)
	defer cancel()
	if _, err := p.call(ctx, "turn/steer", steerParams(thread, turn, text)); err != nil {
		return messages.Wrap(messages.CodeInternal, messages.OpGuide, err, "codex turn/steer failed: "+err.Error())
	}
	return nil
}

// Interrupt sends turn/interrupt; when the turn has not ended after the
// grace period, the process group is killed and the turn ends interrupted
// (the next turn starts the app-server again on the same thread).
func (s *Session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	p, thread, turn, running, n := s.proc, s.threadID, s.core.codexTurn, s.core.running, s.core.turn
	if running {
		s.core.interrupting = true
	}
	s.mu.Unlock()
	if !running || p == nil {
		return nil // nothing runs: an interrupt is a no-op
	}
	if turn != "" {
		cctx, cancel := context.WithTimeout(ctx, s.t.requestTimeout)
		_, err := p.call(cctx, "turn/interrupt", map[string]any{"threadId": thread, "turnId": turn})
		cancel()
		if err == nil {
			go s.escalate(p, n)
			return nil
		}
	}
	s.kill(p, "interrupt")
	return nil
}

// escalate kills the process when turn n is still open after the grace.
func (s *Session) escalate(p *process, n int) {
	select {
	case <-time.After(s.t.interruptGrace):
	case <-p.done:
		return
	}
	s.mu.Lock()
	still := s.core.running && s.core.turn == n && s.proc == p
	s.mu.Unlock()
	if still {
		s.kill(p, "interrupt")
	}
}

// SetModel sets the model and effort of the following turns (turn/start's
// per-turn overrides).
func (s *Session) SetModel(ctx context.Context, model string, effort messages.Effort) error {
	if effort != "" && !effort.Valid() {
		return messages.FieldError(messages.OpGuide, "effort", "unknown effort %q", effort)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if model != "" {
		s.model = model
	}
	if e, ok := effortMap[effort]; ok {
		s.effort = e
	}
	return nil
}

// SetPosture changes the sandbox and approval policy from the next
// turn/start on, and the transport's own auto-acceptance at once.
func (s *Session) SetPosture(ctx context.Context, p messages.Posture) error {
	if _, ok := PostureOf(p); !ok {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.posture != p {
		s.posture, s.sendPost = p, true
		s.core.cfg.posture = p
	}
	return nil
}

// Settings returns what the app-server reported for the thread when the
// current process started it (or resumed it).
func (s *Session) Settings() Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settings
}

// ThreadID is Codex's thread id, the session's external id.
func (s *Session) ThreadID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threadID
}

// Close stops the app-server and the emitter; idempotent.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.emitted
		return nil
	}
	s.closed = true
	p, thread := s.proc, s.threadID
	group, oldHome, freshHome := s.ownGroup, s.oldHome, s.freshHome
	s.mu.Unlock()
	if p != nil {
		// end of input, then SIGTERM after 2 s and SIGKILL a second later
		// (at once when ctx ends)
		p.sp.Stop(ctx, subprocess.Step{Wait: 2 * time.Second, Signal: syscall.SIGTERM}, subprocess.Step{Wait: time.Second, Signal: syscall.SIGKILL})
	}
	close(s.stopEm)
	<-s.emitted
	group.Close() // the process is gone (Stop waited for it): its cgroup can go
	if oldHome != "" {
		_ = os.Remove(oldHome)
	}
	if thread == "" {
		_ = removeFresh(freshHome)
	}
	return nil
}
