package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/gate"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
)

// session is one agent process and its one ACP session.
type session struct {
	t       *Transport
	spec    transports.SessionSpec
	sink    transports.Sink
	bin     string
	argv    []string // the binary and Launch's args, as the process started
	scratch string
	ws      gate.Workspace

	// proc is the agent process on the subprocess kit (spawn through
	// proc, pipes, capped line reader, stdin queue, stderr tail, waiter);
	// nil until start. exitStatus is its exit as the kit reports it, set
	// before exited closes.
	proc       *subprocess.Process
	exitStatus string
	conn       *acpsdk.ClientSideConnection
	sid        acpsdk.SessionId
	exited     chan struct{} // closed when the process is reaped and its stdout drained
	watched    chan struct{} // closed when watch returned (nil until it runs)
	turns      sync.WaitGroup
	asks       *transports.Asks

	// modes the agent offers: session modes, or the values of its select
	// config option of category "mode" (modeOption names it).
	modes      map[string]bool
	modeOption acpsdk.SessionConfigId
	// models the agent offers to switch to over the protocol: the values
	// of its select config option of category "model" (modelOption names
	// it), else its session model state (session/set_model); nil when it
	// offers neither. Learned at boot, never changed after.
	models      map[string]bool
	modelOption acpsdk.SessionConfigId

	// ownGroup is the process bookkeeping the process was started in when
	// it is not the session's own (a warm process booted under the pool's
	// group): closed once the process is gone.
	ownGroup *prockit.Group
	// firstEnd is closed when a turn first ends (or the session dies or
	// closes): the warm pool refills after it, so a boot never competes
	// with the session's first turn.
	firstEnd     chan struct{}
	firstEndOnce sync.Once

	mu          sync.Mutex
	closed      bool // nothing is emitted once set
	dead        bool
	loading     bool     // session/load replays history: not this run's events
	opened      bool     // EvStarted was emitted
	early       []string // dropped-line reports before it, emitted after it
	posture     messages.Posture
	turn        int
	running     bool
	interrupted bool
	pendingAsk  string
	mode        string   // the agent mode last selected ("" before any)
	dec         *decoder // this turn's; a fresh one each turn
	notes       []string // deny reasons the agent has not been told yet
}

func newSession(t *Transport, spec transports.SessionSpec, sink transports.Sink, bin string) (*session, error) {
	ws, err := gate.NewWorkspace(spec.Cwd)
	if err != nil {
		return nil, messages.FieldError(messages.OpStart, "cwd", "%v", err)
	}
	scratch, err := os.MkdirTemp("", "codesession-"+t.agent.Descriptor.ID+"-")
	if err != nil {
		return nil, messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot create the session's scratch directory")
	}
	spec.Confine = spec.Confine.WithWritable(scratch) // the agent's per-session config lives there
	return &session{t: t, spec: spec, sink: sink, bin: bin, scratch: scratch, ws: ws, posture: spec.Posture,
		exited: make(chan struct{}), firstEnd: make(chan struct{}),
		asks: transports.NewAsks(t.agent.Descriptor.ID + "-perm-"), dec: newDecoder(t.outputCap, spec.Home)}, nil
}

var _ interface {
	transports.Session
	transports.Interrupter
	transports.PostureSetter
} = (*session)(nil)

// emit hands ev to the sink unless the session is closed.
func (s *session) emit(turn int, ev messages.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitLocked(turn, ev)
}

func (s *session) emitLocked(turn int, ev messages.Event) {
	if ev.Type == messages.EvTurnEnd || (ev.Type == messages.EvError && ev.Fatal) {
		s.endedFirst()
	}
	if !s.closed {
		s.sink(turn, ev)
	}
}

// endedFirst marks the first turn over (idempotent).
func (s *session) endedFirst() { s.firstEndOnce.Do(func() { close(s.firstEnd) }) }

// open starts the process and the ACP session and emits EvStarted. On
// failure everything it started is stopped again.
func (s *session) open(ctx context.Context) error {
	if err := s.boot(ctx); err != nil {
		return err
	}
	s.begin()
	return nil
}

// boot starts the process, completes initialize and session/new (or
// session/load) and selects the posture's mode: everything of a start but
// EvStarted, which a warm process emits only once a start adopts it. On
// failure everything it started is stopped again.
func (s *session) boot(ctx context.Context) error {
	fail := func(err error) error {
		s.kill()
		s.wait()
		_ = os.RemoveAll(s.scratch)
		return err
	}
	args, extra, err := s.t.agent.Launch(s.spec, s.scratch)
	if err != nil {
		_ = os.RemoveAll(s.scratch)
		return messages.AsError(messages.OpStart, err)
	}
	if s.spec.ResumeExternalID != "" && s.t.agent.BeforeLoad != nil {
		if err := s.t.agent.BeforeLoad(ctx, s.spec); err != nil {
			_ = os.RemoveAll(s.scratch)
			return messages.Wrap(messages.CodeTimeout, messages.OpStart, err, "the start ended before "+s.t.agent.Descriptor.ID+" could load the session")
		}
	}
	s.argv = append([]string{s.bin}, args...)
	if err := s.start(args, extra); err != nil {
		_ = os.RemoveAll(s.scratch)
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.t.startTimeout)
	defer cancel()
	init, err := s.conn.Initialize(ctx, acpsdk.InitializeRequest{
		ProtocolVersion: acpsdk.ProtocolVersionNumber,
		// No file system and no terminal: the agent reads and writes the
		// workspace itself (gemini breaks on a client's missing-file
		// error), and asks before it does.
		ClientCapabilities: acpsdk.ClientCapabilities{Fs: acpsdk.FileSystemCapabilities{}, Terminal: false},
	})
	if err != nil {
		return fail(s.startError(ctx, "initialize", err))
	}
	var modes *acpsdk.SessionModeState
	var opts []acpsdk.SessionConfigOption
	if ext := s.spec.ResumeExternalID; ext != "" {
		if !init.AgentCapabilities.LoadSession {
			return fail(messages.Errorf(messages.CodeUnsupported, messages.OpStart,
				"%s does not offer session/load: session %s cannot be resumed", s.t.agent.Descriptor.ID, ext))
		}
		s.mu.Lock()
		s.loading = true
		s.mu.Unlock()
		resp, err := s.conn.LoadSession(ctx, acpsdk.LoadSessionRequest{SessionId: acpsdk.SessionId(ext), Cwd: s.ws.Given(), McpServers: mcpServers(s.spec.Provision, init.AgentCapabilities.McpCapabilities.Http)})
		s.mu.Lock()
		s.loading = false
		s.mu.Unlock()
		if err != nil {
			return fail(s.startError(ctx, "session/load", err))
		}
		s.sid, modes, opts = acpsdk.SessionId(ext), resp.Modes, resp.ConfigOptions
		s.learnModels(resp.Models, opts)
	} else {
		resp, err := s.conn.NewSession(ctx, acpsdk.NewSessionRequest{Cwd: s.ws.Given(), McpServers: mcpServers(s.spec.Provision, init.AgentCapabilities.McpCapabilities.Http)})
		if err != nil {
			return fail(s.startError(ctx, "session/new", err))
		}
		s.sid, modes, opts = resp.SessionId, resp.Modes, resp.ConfigOptions
		s.learnModels(resp.Models, opts)
	}
	s.learnModes(modes, opts)
	if err := s.selectMode(ctx, s.spec.Posture); err != nil {
		return fail(messages.AsError(messages.OpStart, err))
	}
	return nil
}

// begin makes the booted session live: EvStarted with the agent's session
// id, then the reports of lines dropped before it, then the watch for the
// process's death.
func (s *session) begin() {
	s.mu.Lock()
	s.opened = true
	s.emitLocked(0, messages.Event{Type: messages.EvStarted, ExternalSessionID: string(s.sid), Model: s.spec.Model})
	for _, e := range s.early {
		s.emitLocked(0, messages.Event{Type: messages.EvError, Text: e})
	}
	s.early = nil
	s.mu.Unlock()
	s.watched = make(chan struct{})
	go s.watch()
}

// start spawns the process on the subprocess kit (its own process group
// under proc's watchdog, the session's cgroup and boot-sweep record, so
// nothing of it outlives the runtime, SIGKILL included) with its stdout
// lines filtered into the ACP connection.
func (s *session) start(args, extra []string) error {
	sdkR, sdkW := io.Pipe()
	toSDK := tapWriter{w: sdkW, tap: s.t.wire, dir: "<<"}
	p, err := subprocess.Start(subprocess.Spawn{
		Bin: s.bin, Args: args, Dir: s.ws.Given(),
		Env:   s.t.buildEnv(os.Environ(), s.spec, append(append([]string(nil), extra...), s.t.env...)),
		Procs: s.spec.Procs, Confine: s.spec.Confine, LineCap: s.t.lineCap, TailBytes: 8 << 10,
		OnLine: func(line []byte, over int, _ time.Time) {
			// a write error: the SDK's connection ended; the waiter reports the exit
			_ = filterLine(line, over, toSDK, s.dropped)
		},
		OnExit: func(status string, _ bool) {
			_ = sdkW.Close()
			s.ownGroup.Close()
			s.exitStatus = status
			close(s.exited)
		},
	})
	if err != nil {
		_ = sdkR.Close()
		return messages.Wrap(messages.CodeUnsupported, messages.OpStart, err, fmt.Sprintf("cannot start %s: %v", s.bin, err))
	}
	s.proc = p
	// The SDK starts its receive goroutine inside NewClientSideConnection
	// and reads its logger unsynchronized, so SetLogger after it races
	// with an agent that exits at once. The gate holds the receiver's
	// first read until the logger is in place.
	ready := make(chan struct{})
	s.conn = acpsdk.NewClientSideConnection(&client{s: s}, tapWriter{w: stdinWriter{p}, tap: s.t.wire, dir: ">>"}, gatedReader{r: sdkR, ready: ready})
	s.conn.SetLogger(slog.New(slog.DiscardHandler))
	close(ready)
	return nil
}

// dropped reports a line the filter dropped: through the sink once the
// session is open, else after EvStarted (a failed Open reports nothing).
func (s *session) dropped(v lineVerdict, n int, head []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.opened {
		s.early = append(s.early, describeDropped(v, n, head))
		return
	}
	s.emitLocked(s.turn, messages.Event{Type: messages.EvError, Text: describeDropped(v, n, head)})
}

// stdinWriter queues the SDK's writes (one JSON-RPC message each) for the
// process's stdin.
type stdinWriter struct{ p *subprocess.Process }

func (w stdinWriter) Write(b []byte) (int, error) {
	w.p.Write(append([]byte(nil), b...)) // the SDK may reuse b
	return len(b), nil
}

// startError is the typed error of a failed start step: the process's
// exit and the end of its stderr when it died, else the protocol error.
func (s *session) startError(ctx context.Context, step string, err error) error {
	select {
	case <-s.exited:
	case <-time.After(2 * time.Second):
	}
	select {
	case <-s.exited:
		return messages.Wrap(messages.CodeInternal, messages.OpStart, err, fmt.Sprintf("%s exited during %s (%s): %s",
			s.t.agent.Descriptor.ID, step, s.exitStatus, s.proc.Tail().Text(400)))
	default:
	}
	if ctx.Err() != nil {
		return messages.Wrap(messages.CodeTimeout, messages.OpStart, err, fmt.Sprintf("%s did not answer %s in time (%v): %s",
			s.t.agent.Descriptor.ID, step, context.Cause(ctx), s.proc.Tail().Text(400)))
	}
	return messages.Wrap(messages.CodeInternal, messages.OpStart, err, fmt.Sprintf("%s refused %s: %v", s.t.agent.Descriptor.ID, step, err))
}

// watch reports the death of the process, unless Close caused it.
func (s *session) watch() {
	defer close(s.watched)
	<-s.exited
	s.die(fmt.Sprintf("%s exited (%s): %s", s.t.agent.Descriptor.ID, s.exitStatus, s.proc.Tail().Text(400)))
}

// die marks the session dead and reports it once, closing a running turn.
func (s *session) die(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	s.dead = true
	s.running = false
	s.emitLocked(s.turn, messages.Event{Type: messages.EvError, Fatal: true, Text: text})
}

// StartTurn sends input as an ACP prompt and returns; the turn ends with
// the prompt's stop reason.
func (s *session) StartTurn(ctx context.Context, turn int, input string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return messages.Errorf(messages.CodeNotLive, "turn", "the session is closed")
	case s.dead:
		return messages.Errorf(messages.CodeNotLive, "turn", "the %s process is gone", s.t.agent.Descriptor.ID)
	case s.running:
		return messages.Errorf(messages.CodeConflict, "turn", "turn %d is still running", s.turn)
	}
	text := input
	if len(s.notes) > 0 {
		// ACP has no field for a deny's reason, so the agent hears it
		// with the next prompt.
		text = "[codesession: " + strings.Join(s.notes, "; ") + "]\n\n" + input
		s.notes = nil
	}
	s.turn, s.running, s.interrupted = turn, true, false
	s.dec = newDecoder(s.t.outputCap, s.spec.Home)
	s.turns.Add(1)
	go s.runTurn(turn, text)
	return nil
}

func (s *session) runTurn(turn int, text string) {
	defer s.turns.Done()
	resp, err := s.conn.Prompt(context.Background(), acpsdk.PromptRequest{SessionId: s.sid, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
	if err != nil {
		select {
		case <-s.conn.Done():
			select { // let the watcher report the death with the stderr tail
			case <-s.exited:
			case <-time.After(5 * time.Second):
			}
			s.die(fmt.Sprintf("%s stopped answering during turn %d: %v: %s", s.t.agent.Descriptor.ID, turn, err, s.proc.Tail().Text(400)))
			return
		default:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.running && s.turn == turn {
			s.running = false
			s.emitLocked(turn, messages.Event{Type: messages.EvError, Text: "session/prompt failed: " + err.Error()})
			s.emitLocked(turn, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnErrored, Text: err.Error()})
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running || s.turn != turn {
		return
	}
	s.running = false
	s.pendingAsk = ""
	ev := messages.Event{Type: messages.EvTurnEnd, State: messages.TurnCompleted, Usage: usageOf(resp.Usage, resp.Meta)}
	switch {
	case resp.StopReason == acpsdk.StopReasonCancelled || s.interrupted:
		ev.State = messages.TurnInterrupted
	case resp.StopReason == acpsdk.StopReasonRefusal:
		ev.State, ev.Text = messages.TurnErrored, "the agent refused"
	case resp.StopReason != acpsdk.StopReasonEndTurn:
		s.emitLocked(turn, messages.Event{Type: messages.EvWarning, Text: "the turn stopped early: " + string(resp.StopReason)})
	}
	s.emitLocked(turn, ev)
}

// usageOf reads the prompt's usage, or gemini's _meta.quota.token_count.
func usageOf(u *acpsdk.Usage, meta map[string]any) *messages.Usage {
	if u != nil {
		out := &messages.Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens)}
		if u.CachedReadTokens != nil {
			out.CacheReadTokens = int64(*u.CachedReadTokens)
		}
		if u.CachedWriteTokens != nil {
			out.CacheWriteTokens = int64(*u.CachedWriteTokens)
		}
		return out
	}
	var q struct {
		Quota struct {
			TokenCount struct {
				In  int64 `json:"input_tokens"`
				Out int64 `json:"output_tokens"`
			} `json:"token_count"`
		} `json:"quota"`
	}
	if b, err := json.Marshal(meta); err == nil && json.Unmarshal(b, &q) == nil && q.Quota.TokenCount.In+q.Quota.TokenCount.Out > 0 {
		return &messages.Usage{InputTokens: q.Quota.TokenCount.In, OutputTokens: q.Quota.TokenCount.Out}
	}
	return nil
}

// Answer answers the pending permission question.
func (s *session) Answer(ctx context.Context, id string, d messages.Decision, reason string) error {
	return s.asks.Answer(id, d, reason)
}

// Interrupt sends session/cancel; a pending question is answered
// cancelled, as ACP asks of a client. A turn that has not ended after the
// grace is closed interrupted and the process killed.
func (s *session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	if s.closed || s.dead {
		s.mu.Unlock()
		return messages.Errorf(messages.CodeNotLive, messages.OpInterrupt, "the session is not live")
	}
	if !s.running {
		s.mu.Unlock()
		return nil
	}
	s.interrupted = true
	turn, pending := s.turn, s.pendingAsk
	s.mu.Unlock()
	if pending != "" {
		_ = s.asks.Answer(pending, messages.DecisionCancel, "")
	}
	if err := s.conn.Cancel(ctx, acpsdk.CancelNotification{SessionId: s.sid}); err != nil {
		return messages.Wrap(messages.CodeInternal, messages.OpInterrupt, err, "session/cancel could not be sent: "+err.Error())
	}
	go s.enforceInterrupt(turn)
	return nil
}

func (s *session) enforceInterrupt(turn int) {
	select {
	case <-time.After(s.t.grace):
	case <-s.exited:
		return
	}
	s.mu.Lock()
	stuck := s.running && s.turn == turn && !s.closed
	if stuck {
		s.running = false
		s.emitLocked(turn, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted,
			Text: fmt.Sprintf("the agent did not end the cancelled turn within %s; its process was killed", s.t.grace)})
	}
	s.mu.Unlock()
	if stuck {
		s.kill()
	}
}

// SetPosture changes the client's permission policy at once and selects
// the posture's mode where the agent has one.
func (s *session) SetPosture(ctx context.Context, p messages.Posture) error {
	if !p.Valid() {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	s.mu.Lock()
	if s.closed || s.dead {
		s.mu.Unlock()
		return messages.Errorf(messages.CodeNotLive, messages.OpSetPosture, "the session is not live")
	}
	s.mu.Unlock()
	if err := s.selectMode(ctx, p); err != nil {
		return messages.AsError(messages.OpSetPosture, err)
	}
	s.mu.Lock()
	s.posture = p
	s.mu.Unlock()
	return nil
}

// learnModes records the modes the agent offers.
func (s *session) learnModes(modes *acpsdk.SessionModeState, opts []acpsdk.SessionConfigOption) {
	s.modes = map[string]bool{}
	if modes != nil {
		for _, m := range modes.AvailableModes {
			s.modes[string(m.Id)] = true
		}
		return
	}
	for _, o := range opts {
		sel := o.Select
		if sel == nil || sel.Category == nil || *sel.Category != acpsdk.SessionConfigOptionCategoryMode {
			continue
		}
		s.modeOption = sel.Id
		if sel.Options.Ungrouped != nil {
			for _, v := range *sel.Options.Ungrouped {
				s.modes[string(v.Value)] = true
			}
		}
	}
}

// learnModels records the models the agent can be switched to: a select
// config option of category "model" (opencode), else the session's model
// state (gemini's session/set_model).
func (s *session) learnModels(state *acpsdk.SessionModelState, opts []acpsdk.SessionConfigOption) {
	for _, o := range opts {
		sel := o.Select
		if sel == nil || sel.Category == nil || *sel.Category != acpsdk.SessionConfigOptionCategoryModel || sel.Options.Ungrouped == nil {
			continue
		}
		s.modelOption, s.models = sel.Id, map[string]bool{}
		for _, v := range *sel.Options.Ungrouped {
			s.models[string(v.Value)] = true
		}
		return
	}
	if state != nil {
		s.models = map[string]bool{}
		for _, m := range state.AvailableModels {
			s.models[string(m.ModelId)] = true
		}
	}
}

// offersModel says whether the agent can be switched to model over the
// protocol (selectModel).
func (s *session) offersModel(model string) bool { return model != "" && s.models[model] }

// selectModel switches the agent to model: session/set_config_option for
// an agent whose models are a config option, else session/set_model.
func (s *session) selectModel(ctx context.Context, model string) error {
	if !s.offersModel(model) {
		return messages.Errorf(messages.CodeUnsupported, messages.OpStart,
			"%s offers no switch to model %q over ACP", s.t.agent.Descriptor.ID, model)
	}
	var err error
	if s.modelOption != "" {
		err = s.setOption(ctx, s.modelOption, model)
	} else {
		_, err = s.conn.UnstableSetSessionModel(ctx, acpsdk.UnstableSetSessionModelRequest{SessionId: s.sid, ModelId: acpsdk.UnstableModelId(model)})
	}
	if err != nil {
		return messages.Wrap(messages.CodeInternal, messages.OpStart, err, fmt.Sprintf("%s refused model %q: %v", s.t.agent.Descriptor.ID, model, err))
	}
	return nil
}

// setOption sets the agent's select config option id to value
// (session/set_config_option).
func (s *session) setOption(ctx context.Context, id acpsdk.SessionConfigId, value string) error {
	_, err := s.conn.SetSessionConfigOption(ctx, acpsdk.SetSessionConfigOptionRequest{ValueId: &acpsdk.SetSessionConfigOptionValueId{
		SessionId: s.sid, ConfigId: id, Value: acpsdk.SessionConfigValueId(value)}})
	return err
}

// selectMode sets the agent's mode for p: session/set_mode, or
// session/set_config_option for an agent whose modes are a config option.
func (s *session) selectMode(ctx context.Context, p messages.Posture) error {
	id, ok := s.t.agent.Modes[p]
	if !ok || id == "" {
		return nil
	}
	if !s.modes[id] {
		return messages.Errorf(messages.CodeUnsupported, messages.OpSetPosture,
			"%s offers no mode %q for posture %s", s.t.agent.Descriptor.ID, id, p)
	}
	var err error
	if s.modeOption != "" {
		err = s.setOption(ctx, s.modeOption, id)
	} else {
		_, err = s.conn.SetSessionMode(ctx, acpsdk.SetSessionModeRequest{SessionId: s.sid, ModeId: acpsdk.SessionModeId(id)})
	}
	if err != nil {
		return messages.Wrap(messages.CodeInternal, messages.OpSetPosture, err, fmt.Sprintf("%s refused mode %q: %v", s.t.agent.Descriptor.ID, id, err))
	}
	s.mu.Lock()
	s.mode = id
	s.mu.Unlock()
	return nil
}

// Close stops the process group (stdin closed, SIGTERM, SIGKILL after
// three seconds or when ctx ends) and waits for every goroutine of the
// session. It is idempotent.
func (s *session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed, s.running = true, false
	pending := s.pendingAsk
	s.mu.Unlock()
	s.endedFirst()
	if pending != "" {
		_ = s.asks.Answer(pending, messages.DecisionCancel, "")
	}
	// end of input first, and a moment to save the conversation (gemini
	// writes its chat file as it goes out; killed at once, a later
	// session/load found "no previous sessions"), then SIGTERM, then SIGKILL
	s.proc.Stop(ctx, subprocess.Step{Wait: 2 * time.Second, Signal: syscall.SIGTERM}, subprocess.Step{Wait: 3 * time.Second, Signal: syscall.SIGKILL})
	s.kill() // what the agent left in its group
	s.wait()
	_ = os.RemoveAll(s.scratch)
	s.t.forgetLaunched(s.spec.SessionID)
	return nil
}

// kill sends SIGKILL to the process group.
func (s *session) kill() {
	if s.proc != nil {
		s.proc.Kill()
	}
}

// wait waits for the process, the reader, the SDK and the turn goroutine.
func (s *session) wait() {
	if s.proc == nil {
		return
	}
	<-s.exited
	<-s.conn.Done()
	s.turns.Wait()
	if s.watched != nil {
		<-s.watched
	}
}

// tapWriter copies each write to the wire tap.
type tapWriter struct {
	w   io.Writer
	tap func(dir string, line []byte)
	dir string
}

func (t tapWriter) Write(p []byte) (int, error) {
	if t.tap != nil {
		t.tap(t.dir, append([]byte(nil), p...))
	}
	return t.w.Write(p)
}

// gatedReader blocks reads until ready is closed.
type gatedReader struct {
	r     io.Reader
	ready <-chan struct{}
}

func (g gatedReader) Read(p []byte) (int, error) {
	<-g.ready
	return g.r.Read(p)
}

// Pid is the agent process's pid (the leader of its process group), for
// tests and the benchmark that tell a pooled process from a fresh one.
func (s *session) Pid() int { return s.proc.Pgid }
