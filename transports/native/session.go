package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// Compile-time checks of the abilities a native session has. It does not
// steer (guidance is queued, or sent after an interrupt) and its model is
// chosen per session.
var (
	_ transports.Session       = (*session)(nil)
	_ transports.Interrupter   = (*session)(nil)
	_ transports.PostureSetter = (*session)(nil)
)

// lifecycle is a session's state.
//
//	live --(Close)--> closed
type lifecycle int

const (
	lifeInvalid lifecycle = iota
	lifeLive
	lifeClosed
)

func (l lifecycle) String() string {
	switch l {
	case lifeLive:
		return "live"
	case lifeClosed:
		return "closed"
	}
	return "invalid"
}

// sessionConfig is everything a session runs with, fixed at Open.
type sessionConfig struct {
	prov       provider
	httpc      *http.Client // the provider's; its idle connections close with the session
	sink       transports.Sink
	externalID string
	model      string
	effort     messages.Effort
	system     string
	allowed    []string // nil: every tool
	maxRounds  int
	maxTokens  int64
	retry      RetryPolicy
	prices     map[string]Price
	tools      toolEnv
	// external, when set, are the only tools (OpenLoop, loop.go): each
	// call runs, ungated.
	external map[string]Tool
	// mcp are the plan's MCP tools (nil: none); mcpWarnings say which
	// servers did not start, emitted after EvStarted.
	mcp         *mcpTools
	mcpWarnings []string
}

// turnReq is one StartTurn handed to the session's goroutine.
type turnReq struct {
	turn   int
	input  string
	ctx    context.Context // cancelled by Interrupt and by Close
	cancel context.CancelFunc
}

// answer is a decision handed to a turn blocked on a clarification.
type answer struct {
	decision messages.Decision
	reason   string
}

// session is one native session. Its turns run on one goroutine (run),
// which is the only caller of the sink and the only owner of the
// conversation. The methods the host calls change state under mu and
// signal through channels and contexts; none blocks but Close.
type session struct {
	cfg   sessionConfig
	nonce string

	turns chan turnReq // buffered 1: StartTurn never blocks
	stop  chan struct{}
	done  chan struct{}
	stopO sync.Once
	// base is cancelled by Close: every turn's context derives from it.
	base       context.Context
	cancelBase context.CancelFunc

	mu      sync.Mutex
	life    lifecycle
	running bool
	cur     *turnReq
	posture messages.Posture
	asks    *transports.Asks // the permission questions raised

	// Owned by the goroutine.
	history        []message
	totalCost      float64
	priced         bool
	sessionAllowed map[string]bool
}

func newSession(cfg sessionConfig, posture messages.Posture) *session {
	base, cancel := context.WithCancel(context.Background())
	nonce := transports.RandomHex(4)
	return &session{
		cfg:            cfg,
		nonce:          nonce,
		asks:           transports.NewAsks("clar-native-" + nonce + "-"),
		turns:          make(chan turnReq, 1),
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
		base:           base,
		cancelBase:     cancel,
		life:           lifeLive,
		posture:        posture,
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
	if s.life != lifeLive {
		return messages.Errorf(messages.CodeNotLive, messages.OpStart, "the session is closed")
	}
	if s.running {
		return messages.Errorf(messages.CodeConflict, messages.OpStart, "a turn is still running")
	}
	tctx, cancel := context.WithCancel(s.base)
	req := turnReq{turn: turn, input: input, ctx: tctx, cancel: cancel}
	select {
	case s.turns <- req:
	default:
		cancel()
		// Unreachable: a request is queued only while no turn runs.
		return messages.Errorf(messages.CodeInternal, messages.OpStart, "the native session's turn queue is full")
	}
	s.running, s.cur = true, &req
	return nil
}

// Prompt says that the session's commands return at once
// (transports.Prompt): StartTurn queues the turn for the session's loop,
// the others answer an ask, cancel or set a field under the session's lock.
func (s *session) Prompt() bool { return true }

// Answer answers the pending clarification. An id that was never raised is
// not_found; one that is not waiting (answered already, or its turn ended)
// is a conflict.
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

// Interrupt cancels the running turn: the model request in flight and any
// running tool (a bash command's process group is killed). The turn ends
// with EvTurnEnd{State: interrupted}. With no running turn it does nothing.
func (s *session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running && s.cur != nil {
		s.cur.cancel()
	}
	return nil
}

// SetPosture changes the posture for the following tool calls, including
// those of the running turn.
func (s *session) SetPosture(ctx context.Context, p messages.Posture) error {
	if !p.Valid() {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.life != lifeLive {
		return messages.Errorf(messages.CodeNotLive, messages.OpSetPosture, "the session is closed")
	}
	s.posture = p
	return nil
}

// Close cancels whatever runs (the request in flight, a tool) and waits for
// the session's goroutine. From the moment Close is called no new sink call
// starts; once it returns nil none is running. If ctx ends first it
// returns a timeout error; calling Close again waits again. Idempotent.
func (s *session) Close(ctx context.Context) error {
	s.mu.Lock()
	s.life = lifeClosed
	s.mu.Unlock()
	s.stopO.Do(func() {
		close(s.stop)
		s.cancelBase()
	})
	select {
	case <-s.done:
	case <-ctx.Done():
		select {
		case <-s.done: // it ended just as ctx did
		default:
			return messages.Wrap(messages.CodeTimeout, messages.OpStop, ctx.Err(), "closing the native session timed out")
		}
	}
	if s.cfg.httpc != nil {
		s.cfg.httpc.CloseIdleConnections()
	}
	if s.cfg.tools.removeTmp != nil {
		s.cfg.tools.removeTmp()
	}
	s.cfg.mcp.close()
	return nil
}

func (s *session) closing() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// emit calls the sink unless Close was called.
func (s *session) emit(turn int, ev messages.Event) {
	if s.closing() {
		return
	}
	s.cfg.sink(turn, ev)
}

// run is the session's goroutine.
func (s *session) run() {
	defer close(s.done)
	s.emit(0, messages.Event{Type: messages.EvStarted, ExternalSessionID: s.cfg.externalID, Model: s.cfg.model})
	for _, w := range s.cfg.mcpWarnings {
		s.emit(0, messages.Event{Type: messages.EvWarning, Text: w})
	}
	for {
		select {
		case <-s.stop:
			return
		case req := <-s.turns:
			s.runTurn(req)
			req.cancel()
			if s.closing() {
				return
			}
		}
	}
}

// turnRun is one running turn's state, owned by the goroutine.
type turnRun struct {
	req      turnReq
	rounds   int
	usage    messages.Usage
	cost     float64
	priced   bool
	lastText string
	toolSeq  int
}

// outcome is how a turn ends.
type outcome int

const (
	outInvalid     outcome = iota
	outCompleted           // the model ended its turn
	outCapped              // the per-turn round cap was reached
	outInterrupted         // Interrupt, or a cancelled clarification
	outFailed              // the model call failed
	outStopped             // Close
)

func (o outcome) String() string {
	switch o {
	case outCompleted:
		return "completed"
	case outCapped:
		return "capped"
	case outInterrupted:
		return "interrupted"
	case outFailed:
		return "failed"
	case outStopped:
		return "stopped"
	}
	return "invalid"
}

// appendUser adds blocks as a user message, merging them into the last
// message when that is a user message already (tool results of a turn that
// ended before the model answered them), so roles keep alternating.
func (s *session) appendUser(blocks ...block) {
	if n := len(s.history); n > 0 && s.history[n-1].role == roleUser {
		s.history[n-1].blocks = append(s.history[n-1].blocks, blocks...)
		return
	}
	s.history = append(s.history, message{role: roleUser, blocks: blocks})
}

// runTurn runs one turn: model calls and tool calls until the model ends
// its turn, the round cap, an interrupt, a failure or Close.
func (s *session) runTurn(req turnReq) {
	tr := &turnRun{req: req}
	s.appendUser(block{kind: blockText, text: req.input})
	out, msg := s.loop(tr)
	s.closeTurn(tr, out, msg)
}

func (s *session) loop(tr *turnRun) (outcome, string) {
	turn := tr.req.turn
	ctx := tr.req.ctx
	for {
		if out, ok := s.cancelled(ctx); ok {
			return out, ""
		}
		if s.cfg.maxRounds > 0 && tr.rounds >= s.cfg.maxRounds {
			return outCapped, fmt.Sprintf("stopped after %d model rounds: the per-turn round cap; the model was still calling tools", tr.rounds)
		}
		tr.rounds++
		s.mu.Lock()
		posture := s.posture
		s.mu.Unlock()
		offer := append(offered(posture, s.cfg.allowed), s.cfg.mcp.offered(s.cfg.allowed, posture == messages.PosturePlan)...)
		if s.cfg.external != nil {
			offer = s.offeredExternal()
		}
		req := request{model: s.cfg.model, system: s.cfg.system, messages: s.history,
			tools: offer, effort: s.cfg.effort, maxTokens: s.cfg.maxTokens}
		resp, err := retrying(ctx, s.cfg.retry, func(ctx context.Context) (response, bool, error) {
			streamed := false
			r, err := s.cfg.prov.stream(ctx, req, func(d delta) {
				streamed = true
				if d.thinking {
					s.emit(turn, messages.Event{Type: messages.EvThinking, Text: d.text})
				} else {
					s.emit(turn, messages.Event{Type: messages.EvText, Text: d.text, Delta: true})
				}
			})
			return r, streamed, err
		}, func(attempt int, wait time.Duration, err error) {
			s.emit(turn, messages.Event{Type: messages.EvWarning,
				Text: fmt.Sprintf("model call failed (%v); retry %d of %d in %s", err, attempt, s.cfg.retry.MaxRetries, wait.Round(time.Millisecond))})
		})
		if err != nil {
			if out, ok := s.cancelled(ctx); ok {
				return out, ""
			}
			return outFailed, s.callError(err)
		}
		addUsage(&tr.usage, resp.usage)
		if p, ok := priceFor(s.cfg.prices, s.cfg.model); ok {
			tr.cost += p.cost(resp.usage)
			tr.priced = true
		}
		if t := resp.text(); t != "" {
			tr.lastText = t
			s.emit(turn, messages.Event{Type: messages.EvText, Text: t})
		}
		if len(resp.blocks) > 0 {
			s.history = append(s.history, message{role: roleAssistant, blocks: resp.blocks})
		}
		uses := resp.toolUses()
		if len(uses) == 0 {
			if resp.stop == "max_tokens" {
				s.emit(turn, messages.Event{Type: messages.EvWarning,
					Text: fmt.Sprintf("the model's answer was cut at its output limit (%d tokens)", s.cfg.maxTokens)})
			}
			return outCompleted, ""
		}
		results := make([]block, 0, len(uses))
		var stopped outcome
		for _, u := range uses {
			if stopped != outInvalid {
				results = append(results, block{kind: blockToolResult, id: u.id, isError: true,
					text: "not run: the turn was interrupted before this call"})
				continue
			}
			res, out := s.call(tr, u)
			results = append(results, res)
			if out != outInvalid {
				stopped = out
			}
		}
		s.appendUser(results...)
		if stopped != outInvalid {
			return stopped, ""
		}
	}
}

// cancelled says whether the turn's context ended, and why: Close or an
// interrupt.
func (s *session) cancelled(ctx context.Context) (outcome, bool) {
	if ctx.Err() == nil {
		return outInvalid, false
	}
	if s.closing() {
		return outStopped, true
	}
	return outInterrupted, true
}

// callError is the text of a failed model call: what the endpoint said,
// naming it.
func (s *session) callError(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return "model call failed: " + ae.Error()
	}
	return fmt.Sprintf("model call to the %s endpoint %s failed: %v", s.cfg.prov.name(), s.cfg.prov.endpoint(), err)
}

// call runs one tool call: the event, the gate (asking when it says so),
// the tool, the result event. It returns the result block for the model and
// a non-invalid outcome when the call ended the turn.
func (s *session) call(tr *turnRun, u block) (block, outcome) {
	turn := tr.req.turn
	input := u.input
	if len(input) == 0 || !json.Valid(input) {
		input = json.RawMessage(`{}`)
	}
	s.emit(turn, messages.Event{Type: messages.EvToolUse, ToolUseID: u.id, ToolName: u.name, Input: input})
	result := func(r toolResult) block {
		out, truncated, original := r.output, r.truncated, r.original
		if !truncated {
			out, truncated, original = transports.CapOutput(out, s.cfg.tools.outputCap)
		}
		s.emit(turn, messages.Event{Type: messages.EvToolResult, ToolUseID: u.id, Output: out,
			IsError: r.isError, Truncated: truncated, OriginalBytes: original})
		return block{kind: blockToolResult, id: u.id, text: out, isError: r.isError}
	}
	if s.cfg.external != nil {
		return s.callExternal(tr, u, input, result)
	}
	s.mu.Lock()
	posture := s.posture
	s.mu.Unlock()
	d := permit(u.name, posture, s.cfg.allowed, s.sessionAllowed[u.name])
	isMCP := s.cfg.mcp.has(u.name)
	if isMCP {
		d = permitKind(u.name, kindExec, posture, s.cfg.allowed, s.sessionAllowed[u.name])
	}
	switch d.verdict {
	case verdictRefuse:
		return result(toolResult{output: d.reason, isError: true}), outInvalid
	case verdictAsk:
		a, out := s.ask(tr, u.name, input)
		switch {
		case out == outStopped:
			return block{kind: blockToolResult, id: u.id, isError: true, text: "not run: the session was closed"}, out
		case out == outInterrupted:
			return result(toolResult{output: "not run: the turn was interrupted while this call waited for permission", isError: true}), out
		case a.decision == messages.DecisionDeny:
			reason := a.reason
			if reason == "" {
				reason = "no reason given"
			}
			return result(toolResult{output: "denied by the user: " + reason, isError: true}), outInvalid
		case a.decision == messages.DecisionCancel:
			return result(toolResult{output: "cancelled: the user cancelled this call and the turn", isError: true}), outInterrupted
		case a.decision == messages.DecisionAllowSession:
			s.sessionAllowed[u.name] = true
		}
	}
	var r toolResult
	if isMCP {
		r = s.cfg.mcp.call(tr.req.ctx, u.name, input)
	} else {
		r = tools[u.name].run(tr.req.ctx, &s.cfg.tools, input)
	}
	if out, ok := s.cancelled(tr.req.ctx); ok {
		if out == outStopped {
			return block{kind: blockToolResult, id: u.id, isError: true, text: "interrupted: the session was closed"}, out
		}
		return result(r), out
	}
	return result(r), outInvalid
}

// ask raises a clarification and blocks until it is answered, the turn is
// interrupted or the session closed.
func (s *session) ask(tr *turnRun, tool string, input json.RawMessage) (answer, outcome) {
	q := s.asks.Raise()
	s.emit(tr.req.turn, messages.Event{Type: messages.EvClarification, ClarificationID: q.ID, ToolName: tool, Input: input})
	select {
	case a := <-q.C:
		return answer{decision: a.Decision, reason: a.Reason}, outInvalid
	case <-tr.req.ctx.Done():
	}
	s.asks.Withdraw(q)
	if s.closing() {
		return answer{}, outStopped
	}
	return answer{}, outInterrupted
}

// closeTurn emits the events that close the turn.
func (s *session) closeTurn(tr *turnRun, out outcome, msg string) {
	turn := tr.req.turn
	s.mu.Lock()
	s.running, s.cur = false, nil
	s.mu.Unlock()
	s.asks.Clear()
	if out == outStopped {
		return
	}
	state, text := messages.TurnCompleted, tr.lastText
	switch out {
	case outInterrupted:
		state = messages.TurnInterrupted
	case outCapped:
		s.emit(turn, messages.Event{Type: messages.EvWarning, Text: msg})
		text = msg
	case outFailed:
		state, text = messages.TurnErrored, msg
		s.emit(turn, messages.Event{Type: messages.EvError, Text: msg})
	}
	ev := messages.Event{Type: messages.EvTurnEnd, State: state, Text: text, NumTurns: tr.rounds}
	u := tr.usage
	ev.Usage = &u
	if tr.priced {
		s.priced = true
		// Rounded so sums of costs stay short.
		ev.CostUSD = math.Round(tr.cost*1e9) / 1e9
		s.totalCost = math.Round((s.totalCost+tr.cost)*1e9) / 1e9
		ev.TotalCostUSD = s.totalCost
	}
	s.emit(turn, ev)
}
