package script

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// Compile-time checks of the abilities a scripted session has.
var (
	_ transports.Session       = (*session)(nil)
	_ transports.Interrupter   = (*session)(nil)
	_ transports.Steerer       = (*session)(nil)
	_ transports.ModelSetter   = (*session)(nil)
	_ transports.PostureSetter = (*session)(nil)
)

// lifecycle is a session's state.
//
//	live --(crash step)--> dead
//	live --(end step)----> ended
//	live | dead | ended --(Close)--> closed
type lifecycle int

const (
	lifeInvalid lifecycle = iota
	lifeLive
	lifeDead
	lifeEnded
	lifeClosed
)

func (l lifecycle) String() string {
	switch l {
	case lifeLive:
		return "live"
	case lifeDead:
		return "dead"
	case lifeEnded:
		return "ended"
	case lifeClosed:
		return "closed"
	}
	return "invalid"
}

type sessionConfig struct {
	scenario   *Scenario
	ws         workspace
	sink       transports.Sink
	externalID string
	model      string
	effort     messages.Effort
	posture    messages.Posture
	allowed    []string
	delayScale float64
	outputCap  int
}

// turnReq is one StartTurn handed to the session's goroutine.
type turnReq struct {
	turn  int
	input string
	ctl   *turnCtl
}

// turnCtl lets the caller's side interrupt one running turn.
type turnCtl struct {
	interrupt chan struct{}
	once      sync.Once
}

func (c *turnCtl) fire() { c.once.Do(func() { close(c.interrupt) }) }

// answer is a decision handed to a turn blocked on a clarification.
type answer struct {
	decision messages.Decision
	reason   string
}

// session is one scripted session. Its turns run on one goroutine (run),
// which is the only caller of the sink. The methods called by the host
// only change state under mu and signal through channels; none blocks but
// Close.
type session struct {
	cfg   sessionConfig
	nonce string // makes clarification ids unique across sessions

	turns chan turnReq // buffered 1: StartTurn never blocks
	stop  chan struct{}
	done  chan struct{}
	stopO sync.Once

	mu      sync.Mutex
	life    lifecycle
	running bool
	cur     *turnCtl
	steers  []string
	asks    *transports.Asks // the permission questions raised
	model   string
	effort  messages.Effort
	posture messages.Posture

	// Owned by the goroutine.
	used           []bool
	numTurns       int
	totalCost      float64
	toolSeq        int
	sessionAllowed map[string]bool
}

func newSession(cfg sessionConfig) *session {
	nonce := transports.RandomHex(4)
	return &session{
		cfg:            cfg,
		nonce:          nonce,
		asks:           transports.NewAsks("clar-" + nonce + "-"),
		turns:          make(chan turnReq, 1),
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
		life:           lifeLive,
		model:          cfg.model,
		effort:         cfg.effort,
		posture:        cfg.posture,
		used:           make([]bool, len(cfg.scenario.Turns)),
		sessionAllowed: map[string]bool{},
	}
}

// StartTurn hands input to the session's goroutine as turn number turn.
func (s *session) StartTurn(ctx context.Context, turn int, input string) error {
	if turn < 1 {
		return messages.FieldError(messages.OpStart, "turn", "turn numbers start at 1, got %d", turn)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.liveErrLocked(messages.OpStart); err != nil {
		return err
	}
	if s.running {
		return messages.Errorf(messages.CodeConflict, messages.OpStart, "a turn is still running")
	}
	ctl := &turnCtl{interrupt: make(chan struct{})}
	select {
	case s.turns <- turnReq{turn: turn, input: input, ctl: ctl}:
	default:
		// Unreachable: a request is queued only while no turn runs, and the
		// goroutine takes it before the turn can end.
		return messages.Errorf(messages.CodeInternal, messages.OpStart, "the scripted session's turn queue is full")
	}
	s.running, s.cur, s.steers = true, ctl, nil
	return nil
}

// liveErrLocked is the error of an op that needs a live session.
func (s *session) liveErrLocked(op string) error {
	switch s.life {
	case lifeLive:
		return nil
	case lifeDead:
		return messages.Errorf(messages.CodeInternal, op, "backend exited: the scripted agent crashed")
	case lifeEnded:
		return messages.Errorf(messages.CodeNotLive, op, "the agent ended the session")
	}
	return messages.Errorf(messages.CodeNotLive, op, "the session is closed")
}

// Answer answers the pending clarification. An id that was never raised is
// not_found; one that was raised but is not waiting (answered already, or
// its turn was interrupted) is a conflict.
func (s *session) Answer(ctx context.Context, clarificationID string, decision messages.Decision, reason string) error {
	if !decision.Valid() {
		return messages.FieldError(messages.OpAnswer, "decision", "unknown decision %q", decision)
	}
	s.mu.Lock()
	closed := s.life == lifeClosed
	s.mu.Unlock()
	if closed {
		return messages.Errorf(messages.CodeNotLive, messages.OpAnswer, "the session is closed")
	}
	return s.asks.Answer(clarificationID, decision, reason)
}

// Interrupt ends the running turn with EvTurnEnd{State: interrupted}; with
// no running turn it does nothing.
func (s *session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running && s.cur != nil {
		s.cur.fire()
	}
	return nil
}

// Steer queues text for the running turn; it is emitted as an EvText
// "[steer] <text>" at the next step boundary.
func (s *session) Steer(ctx context.Context, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.liveErrLocked(messages.OpGuide); err != nil {
		return err
	}
	if !s.running {
		return messages.Errorf(messages.CodeNotLive, messages.OpGuide, "no turn is running to steer")
	}
	s.steers = append(s.steers, text)
	return nil
}

// SetModel switches model and effort for the following steps; an empty
// value keeps the current one.
func (s *session) SetModel(ctx context.Context, model string, effort messages.Effort) error {
	if effort != "" && !effort.Valid() {
		return messages.FieldError(messages.OpGuide, "effort", "unknown effort %q", effort)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.liveErrLocked(messages.OpGuide); err != nil {
		return err
	}
	if model != "" {
		s.model = model
	}
	if effort != "" {
		s.effort = effort
	}
	return nil
}

// SetPosture changes the posture for the following steps.
func (s *session) SetPosture(ctx context.Context, p messages.Posture) error {
	if !p.Valid() {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.liveErrLocked(messages.OpSetPosture); err != nil {
		return err
	}
	s.posture = p
	return nil
}

// Close stops the session's goroutine and waits for it. From the moment
// Close is called no new sink call starts, and once it returns nil none is
// running. If ctx ends first (a sink call is stuck) it returns a timeout
// error, and the call in flight may still finish; calling Close again
// waits for it. It is idempotent.
func (s *session) Close(ctx context.Context) error {
	s.mu.Lock()
	s.life = lifeClosed
	s.mu.Unlock()
	s.stopO.Do(func() { close(s.stop) })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return messages.Wrap(messages.CodeTimeout, messages.OpStop, ctx.Err(), "closing the scripted session timed out waiting for its sink")
	}
}

// emit calls the sink unless Close was called.
func (s *session) emit(turn int, ev messages.Event) {
	select {
	case <-s.stop:
		return
	default:
	}
	s.cfg.sink(turn, ev)
}

// run is the session's goroutine: it announces the session, then runs
// turns one at a time until Close, a crash or an end.
func (s *session) run() {
	defer close(s.done)
	s.emit(0, messages.Event{Type: messages.EvStarted, ExternalSessionID: s.cfg.externalID, Model: s.cfg.model})
	for {
		select {
		case <-s.stop:
			return
		case req := <-s.turns:
			if !s.runTurn(req) {
				return
			}
		}
	}
}

// outcome is how a step (or a turn) ends.
type outcome int

const (
	outInvalid     outcome = iota
	outContinue            // go on with the next step
	outInterrupted         // interrupt, or a cancelled clarification
	outFailed              // a fail step
	outCrashed             // a crash step
	outEnded               // an end step
	outStopped             // Close
)

func (o outcome) String() string {
	switch o {
	case outContinue:
		return "continue"
	case outInterrupted:
		return "interrupted"
	case outFailed:
		return "failed"
	case outCrashed:
		return "crashed"
	case outEnded:
		return "ended"
	case outStopped:
		return "stopped"
	}
	return "invalid"
}

// turnRun is one running turn's state, owned by the goroutine.
type turnRun struct {
	req       turnReq
	cost      float64
	lastText  string
	outTokens int64
	message   string // the fail, crash or end text
}

// runTurn runs one turn; false means the session is over.
func (s *session) runTurn(req turnReq) bool {
	s.numTurns++
	tr := &turnRun{req: req}
	var turn *Turn
	if i := pickTurn(s.cfg.scenario, s.used, req.input); i >= 0 {
		s.used[i] = true
		turn = &s.cfg.scenario.Turns[i]
	} else if s.cfg.scenario.Fallback != nil {
		turn = s.cfg.scenario.Fallback
	} else {
		turn = &Turn{Steps: []Step{Text(ReplyExhausted)}}
	}
	tr.cost = turn.CostUSD
	for i := range turn.Steps {
		if out := s.boundary(tr); out != outContinue {
			return s.closeTurn(tr, out)
		}
		if out := s.step(tr, &turn.Steps[i]); out != outContinue {
			return s.closeTurn(tr, out)
		}
	}
	return s.closeTurn(tr, s.boundary(tr))
}

// boundary is checked between steps: Close, then an interrupt, then the
// steering text that arrived meanwhile.
func (s *session) boundary(tr *turnRun) outcome {
	select {
	case <-s.stop:
		return outStopped
	default:
	}
	select {
	case <-tr.req.ctl.interrupt:
		return outInterrupted
	default:
	}
	s.mu.Lock()
	steers := s.steers
	s.steers = nil
	s.mu.Unlock()
	for _, text := range steers {
		s.emit(tr.req.turn, messages.Event{Type: messages.EvText, Text: "[steer] " + text})
	}
	return outContinue
}

// closeTurn emits the event that closes the turn; false means the session
// is over.
func (s *session) closeTurn(tr *turnRun, out outcome) bool {
	turn := tr.req.turn
	if out == outStopped {
		return false
	}
	s.mu.Lock()
	s.running, s.cur = false, nil
	s.asks.Clear()
	dropped := s.steers
	s.steers = nil
	switch out {
	case outCrashed:
		s.life = lifeDead
	case outEnded:
		s.life = lifeEnded
	}
	s.mu.Unlock()
	switch out {
	case outCrashed:
		s.emit(turn, messages.Event{Type: messages.EvError, Text: tr.message, Fatal: true})
		return false
	case outEnded:
		s.emit(turn, messages.Event{Type: messages.EvEnded, Text: tr.message})
		return false
	}
	for _, text := range dropped {
		s.emit(turn, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("steering not delivered: turn %d closed first: %s", turn, text)})
	}
	state, text := messages.TurnCompleted, tr.lastText
	switch out {
	case outInterrupted:
		state = messages.TurnInterrupted
	case outFailed:
		state, text = messages.TurnErrored, tr.message
		s.emit(turn, messages.Event{Type: messages.EvError, Text: tr.message})
	}
	// Rounded so that sums of short decimal costs stay short (0.021, not
	// 0.020999999999999998).
	s.totalCost = math.Round((s.totalCost+tr.cost)*1e9) / 1e9
	s.emit(turn, messages.Event{
		Type:         messages.EvTurnEnd,
		State:        state,
		Text:         text,
		NumTurns:     s.numTurns,
		CostUSD:      tr.cost,
		TotalCostUSD: s.totalCost,
		Usage:        &messages.Usage{InputTokens: tokens(tr.req.input), OutputTokens: tr.outTokens},
	})
	return true
}

// step runs one step.
func (s *session) step(tr *turnRun, st *Step) outcome {
	turn := tr.req.turn
	switch {
	case st.Text != nil:
		text := s.vars(tr).expand(*st.Text)
		for _, c := range chunks(text) {
			s.emit(turn, messages.Event{Type: messages.EvText, Text: c, Delta: true})
		}
		s.emit(turn, messages.Event{Type: messages.EvText, Text: text})
		tr.lastText = text
		tr.outTokens += tokens(text)
	case st.Thinking != nil:
		text := s.vars(tr).expand(*st.Thinking)
		s.emit(turn, messages.Event{Type: messages.EvThinking, Text: text})
		tr.outTokens += tokens(text)
	case st.Delay != nil:
		return s.wait(tr, time.Duration(float64(*st.Delay)*s.cfg.delayScale))
	case st.Fail != nil:
		tr.message = *st.Fail
		return outFailed
	case st.Crash != nil:
		tr.message = *st.Crash
		return outCrashed
	case st.End != nil:
		tr.message = *st.End
		return outEnded
	case st.Tool != nil:
		t := st.Tool
		input := t.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		return s.call(tr, gated{kind: callTool, tool: t.Name, ask: t.Ask, input: input,
			run: func() (string, bool) { return t.Output, t.IsError }})
	case st.Write != nil:
		w := st.Write
		return s.call(tr, gated{kind: callWrite, tool: "Write", ask: w.Ask,
			input: mustJSON(map[string]string{"file_path": s.cfg.ws.display(w.Path), "content": w.Content}),
			run:   fileOp(func() (string, error) { return s.cfg.ws.write(w.Path, w.Content) })})
	case st.Edit != nil:
		e := st.Edit
		return s.call(tr, gated{kind: callWrite, tool: "Edit", ask: e.Ask,
			input: mustJSON(map[string]string{"file_path": s.cfg.ws.display(e.Path), "old_string": e.Old, "new_string": e.New}),
			run:   fileOp(func() (string, error) { return s.cfg.ws.edit(e.Path, e.Old, e.New) })})
	case st.Delete != nil:
		d := st.Delete
		return s.call(tr, gated{kind: callDelete, tool: "Bash", ask: d.Ask,
			input: mustJSON(map[string]string{"command": "rm -v -- " + shellQuote(s.cfg.ws.display(d.Path)),
				"description": "Delete " + d.Path}),
			run: fileOp(func() (string, error) { return s.cfg.ws.remove(d.Path) })})
	}
	return outContinue
}

func (s *session) vars(tr *turnRun) vars {
	s.mu.Lock()
	defer s.mu.Unlock()
	return vars{input: tr.req.input, turn: tr.req.turn, model: s.model, effort: s.effort, posture: s.posture}
}

// wait sleeps for d unless the turn is interrupted or the session closed.
func (s *session) wait(tr *turnRun, d time.Duration) outcome {
	if d <= 0 {
		return outContinue
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return outContinue
	case <-tr.req.ctl.interrupt:
		return outInterrupted
	case <-s.stop:
		return outStopped
	}
}

// gated is a tool call that goes through the permission gate.
type gated struct {
	kind  callKind
	tool  string
	ask   bool
	input json.RawMessage
	run   func() (output string, isError bool)
}

func fileOp(f func() (string, error)) func() (string, bool) {
	return func() (string, bool) {
		out, err := f()
		if err != nil {
			return err.Error(), true
		}
		return out, false
	}
}

// call emits the tool use, applies the gate (asking when it says so), runs
// the call and emits its result.
func (s *session) call(tr *turnRun, g gated) outcome {
	turn := tr.req.turn
	s.toolSeq++
	useID := "toolu_script_" + strconv.Itoa(s.toolSeq)
	s.emit(turn, messages.Event{Type: messages.EvToolUse, ToolUseID: useID, ToolName: g.tool, Input: g.input})
	result := func(out string, isErr bool) {
		out, truncated, original := transports.CapOutput(out, s.cfg.outputCap)
		s.emit(turn, messages.Event{Type: messages.EvToolResult, ToolUseID: useID, Output: out,
			IsError: isErr, Truncated: truncated, OriginalBytes: original})
	}
	s.mu.Lock()
	posture := s.posture
	s.mu.Unlock()
	switch decide(gateInput{kind: g.kind, tool: g.tool, ask: g.ask, posture: posture,
		allowed: s.cfg.allowed, sessionAllowed: s.sessionAllowed[g.tool]}) {
	case verdictRefuseTool:
		result(fmt.Sprintf(refusedNotTool, g.tool), true)
		return outContinue
	case verdictRefusePlan:
		result(refusedPlan, true)
		return outContinue
	case verdictAsk:
		a, out := s.ask(tr, g)
		switch {
		case out == outStopped:
			return out
		case out == outInterrupted:
			result("interrupted: the turn was interrupted while this call waited for permission", true)
			return out
		case a.decision == messages.DecisionDeny:
			reason := a.reason
			if reason == "" {
				reason = "no reason given"
			}
			result("denied: "+reason, true)
			return outContinue
		case a.decision == messages.DecisionCancel:
			result("cancelled: the user cancelled this call and the turn", true)
			return outInterrupted
		case a.decision == messages.DecisionAllowSession:
			s.sessionAllowed[g.tool] = true
		}
	}
	result(g.run())
	return outContinue
}

// ask raises a clarification and blocks until it is answered, the turn is
// interrupted or the session closed.
func (s *session) ask(tr *turnRun, g gated) (answer, outcome) {
	q := s.asks.Raise()
	s.emit(tr.req.turn, messages.Event{Type: messages.EvClarification, ClarificationID: q.ID,
		ToolName: g.tool, Input: g.input})
	select {
	case a := <-q.C:
		return answer{decision: a.Decision, reason: a.Reason}, outContinue
	case <-tr.req.ctl.interrupt:
	case <-s.stop:
		return answer{}, outStopped
	}
	s.asks.Withdraw(q)
	return answer{}, outInterrupted
}

func mustJSON(v map[string]string) json.RawMessage {
	b, _ := json.Marshal(v) // a map of strings always marshals
	return b
}

// shellQuote quotes p for a POSIX shell, as an agent would in a command.
func shellQuote(p string) string {
	out := []byte{'\''}
	for i := 0; i < len(p); i++ {
		if p[i] == '\'' {
			out = append(out, `'\''`...)
		} else {
			out = append(out, p[i])
		}
	}
	return string(append(out, '\''))
}
