package driver

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/actors/optool"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/native"
)

// Runtime is what a delegation drives: the op tool's ops, the scope's
// constraints and release, the lesson block and the session records.
// *actors.Runtime implements it.
type Runtime interface {
	optool.Ops
	SetScopeConstraints(ctx context.Context, scope string, c messages.ScopeConstraints) error
	ReleaseScope(ctx context.Context, scope string) (int, error)
	LessonBlock(backend, model string, tags []string) string
}

// MetaFunc reads a session's record (its rounds, at settle).
type MetaFunc func(ctx context.Context, sessionID string) (messages.SessionRecord, error)

// Options configure a Delegator. Runtime, Records and Loop are required.
type Options struct {
	Runtime Runtime
	Records *Records
	// Loop runs the drivers: the native backend's loop with the op tool
	// as its only tool.
	Loop *native.Transport
	// Env is the backend environment the driver's model endpoint is read
	// from (as a native session's).
	Env []string
	// Home is where <home>/agents/<name>.md personas are looked up.
	Home string
	// Ceiling is the runtime's default maxPosture: a persona without one
	// gets it.
	Ceiling   messages.Posture
	RuntimeID string
	Metrics   *Metrics
	Meta      MetaFunc
	Now       func() time.Time
	Logger    *slog.Logger
	// MaxDriverRounds caps the driver's own model rounds (0: 500).
	MaxDriverRounds int
	// OnChange, when set, is told of every record change (the live feed);
	// it must not block.
	OnChange func(Record)
}

// Request is one dispatch.
type Request struct {
	// Agent is the persona (default DefaultPersona).
	Agent string
	Brief string
	// Cwd is where the driver's sessions work when they name no cwd.
	Cwd string
	Overrides
	// ResumeOf adopts this session record: the driver's first start
	// continues it (a one-shot pin in the scope's constraints).
	ResumeOf string
	// Owner is the caller's ownership scope (a control-plane token's);
	// its record says so, and only that scope's token sees it.
	Owner string
	// Within, when set, holds the delegation to the caller's scope as
	// well (Narrow).
	Within *Within
}

// Delegator dispatches drivers and settles them. It is safe for
// concurrent use.
type Delegator struct {
	o Options

	mu     sync.Mutex
	live   map[string]*delegation
	closed bool
}

// New checks o.
func New(o Options) (*Delegator, error) {
	if o.Runtime == nil || o.Records == nil || o.Loop == nil {
		return nil, fmt.Errorf("driver: Runtime, Records and Loop are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxDriverRounds <= 0 {
		o.MaxDriverRounds = 500
	}
	return &Delegator{o: o, live: map[string]*delegation{}}, nil
}

// delegation is one running driver.
type delegation struct {
	id      string
	scope   string
	backend string // the metrics label
	created time.Time
	policy  Policy
	cwd     string
	disp    *optool.Dispatcher
	sess    transports.Session

	mu       sync.Mutex
	sessions []string
	verdicts map[string]messages.Outcome
	question *Question // waiting for a human (policy AskHuman)

	answers chan humanAnswer // a human's answer to question

	ended  chan turnEnd  // the driver's turn ended (buffered 1)
	cancel chan struct{} // Cancel asked
	once   sync.Once     // closes cancel
	done   chan struct{} // settled
	final  Record        // valid once done is closed
}

// humanAnswer is a human's answer handed to the delegation waiting on it.
type humanAnswer struct {
	op    messages.Answer
	reply chan<- answerReply
}

type answerReply struct {
	res messages.AnswerResult
	err error
}

type turnEnd struct {
	state  messages.TurnState
	text   string
	errMsg string
	rounds int
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "dl_" + hex.EncodeToString(b[:])
}

// Delegate dispatches a driver: it loads the persona, merges its policy
// with the caller's overrides (narrow-only), registers that as a fresh
// ownership scope's constraints, writes the delegation's record and only
// then starts the driver's first turn (its brief, then the lesson block
// when one qualifies). It returns the record once the driver runs; Wait
// follows it to its settle. A driver has no duration limit: its sessions
// keep their own.
func (d *Delegator) Delegate(ctx context.Context, req Request) (Record, error) {
	const op = "delegate"
	if strings.TrimSpace(req.Brief) == "" {
		return Record{}, messages.FieldError(op, "brief", "required")
	}
	if len(req.Brief) > messages.MaxBriefBytes {
		return Record{}, messages.FieldError(op, "brief", "longer than %d bytes", messages.MaxBriefBytes)
	}
	if req.ResumeOf != "" && !messages.ValidSessionID(req.ResumeOf) {
		return Record{}, messages.FieldError(op, "resumeOf", "not a session id")
	}
	p, err := Load(d.o.Home, cmp.Or(req.Agent, DefaultPersona))
	if err != nil {
		return Record{}, err
	}
	if !p.Driver {
		return Record{}, messages.FieldError(op, "agent", "persona %s is not a driver (its frontmatter lacks driver: true)", p.Name)
	}
	pol, err := Merge(p, req.Overrides, d.o.Ceiling)
	if err != nil {
		return Record{}, err
	}
	if req.Within != nil {
		if pol, err = Narrow(pol, req.Overrides, *req.Within); err != nil {
			return Record{}, err
		}
	}
	cons := pol.Constraints
	cons.AdoptRecordID = req.ResumeOf
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return Record{}, messages.Errorf(messages.CodeNotLive, op, "the runtime is closing")
	}

	now := d.o.Now()
	id := newID()
	dl := &delegation{id: id, scope: ScopeOf(id), backend: cmp.Or(cons.Backend, "any"), created: now, policy: pol, cwd: req.Cwd,
		verdicts: map[string]messages.Outcome{}, answers: make(chan humanAnswer), ended: make(chan turnEnd, 1), cancel: make(chan struct{}), done: make(chan struct{})}
	// the constraints are in place before anything of the persona runs: a
	// prompt-injected driver cannot pick its own ceiling
	if err := d.o.Runtime.SetScopeConstraints(ctx, dl.scope, cons); err != nil {
		return Record{}, err
	}
	undo := func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = d.o.Runtime.ReleaseScope(cctx, dl.scope)
	}
	dl.disp, err = optool.New(optool.Options{Ops: d.o.Runtime, Scope: dl.scope, Limits: pol.Constraints})
	if err != nil {
		undo()
		return Record{}, messages.Wrap(messages.CodeInternal, op, err, "cannot build the driver's op tool")
	}
	rec := Record{ID: id, Agent: p.Name, Source: p.Source, Brief: truncate(req.Brief, maxRecordBrief), Scope: dl.scope,
		Runtime: d.o.RuntimeID, Owner: req.Owner, Supervised: req.Supervised, Constraints: cons, ResumeOf: req.ResumeOf,
		State: StateRunning, Sessions: []string{}, CreatedAt: now, UpdatedAt: now}
	if err := d.o.Records.Put(rec); err != nil {
		undo()
		return Record{}, messages.Wrap(messages.CodeInternal, op, err, "cannot write the delegation record")
	}
	sess, err := d.o.Loop.OpenLoop(ctx, native.LoopSpec{Env: d.o.Env, Model: p.Model, Effort: p.Effort, System: p.Prompt,
		MaxRounds: d.o.MaxDriverRounds, Tools: []native.Tool{d.opTool(dl)}}, dl.sink)
	if err != nil {
		undo()
		d.finish(dl, rec, StateFailed, "", "the driver's loop could not open: "+messages.AsError(op, err).Message, 0)
		return Record{}, err
	}
	dl.sess = sess
	first := firstMessage(req, pol, d.o.Runtime.LessonBlock(cons.Backend, "", nil))
	if err := sess.StartTurn(ctx, 1, first); err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = sess.Close(closeCtx)
		cancel()
		undo()
		d.finish(dl, rec, StateFailed, "", "the driver's first turn could not start", 0)
		return Record{}, err
	}
	d.mu.Lock()
	d.live[id] = dl
	d.mu.Unlock()
	d.o.Metrics.dispatch(dl.backend)
	d.o.Logger.Info("code_specialist_dispatched", "delegation", id, "agent", p.Name, "backend", dl.backend, "resumeOf", req.ResumeOf)
	d.changed(rec)
	go d.run(dl, rec)
	return rec, nil
}

// firstMessage is the driver's first message: the brief, the policy it is
// held to, and (at the very end) the lesson block when one qualifies.
func firstMessage(req Request, pol Policy, lessons string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(req.Brief))
	b.WriteString("\n\n")
	if req.Cwd != "" {
		fmt.Fprintf(&b, "Repository (pass it as cwd to start): %s\n", req.Cwd)
	}
	c := pol.Constraints
	var limits []string
	if c.Backend != "" {
		limits = append(limits, "backend pinned to "+c.Backend)
	}
	if c.MaxPosture != "" {
		limits = append(limits, "maxPosture at most "+string(c.MaxPosture))
	}
	if c.MaxRounds > 0 {
		limits = append(limits, fmt.Sprintf("at most %d rounds a session", c.MaxRounds))
	}
	if c.AllowedTools != nil {
		limits = append(limits, "agent tools within "+strings.Join(c.AllowedTools, ", "))
	}
	if len(limits) > 0 {
		fmt.Fprintf(&b, "The runtime holds your sessions to: %s (asking above is refused).\n", strings.Join(limits, "; "))
	}
	if req.ResumeOf != "" {
		fmt.Fprintf(&b, "You are resuming session %s: your first start continues it (same session id); check the workspace's state, then carry on.\n", req.ResumeOf)
	}
	if lessons != "" {
		b.WriteString("\n")
		b.WriteString(lessons)
	}
	return b.String()
}

// opTool is the driver's one tool: the op tool under the delegation's
// scope and limits, filling the persona's initial posture into a start
// that names none, and keeping the sessions it started and its verdicts.
func (d *Delegator) opTool(dl *delegation) native.Tool {
	schema := map[string]any{}
	if s, err := messages.ToolInputSchema(); err == nil {
		if b, err := json.Marshal(s); err == nil {
			_ = json.Unmarshal(b, &schema)
		}
	}
	return native.Tool{
		Spec: native.ToolSpec{Name: messages.ToolName, Description: messages.ToolDescription(), Schema: schema},
		Run: func(ctx context.Context, input json.RawMessage) (string, bool) {
			res, err := d.call(ctx, dl, input)
			if err != nil {
				e := *messages.AsError("tool", err)
				e.Err = nil
				b, _ := json.Marshal(map[string]any{"error": &e})
				return string(b), true
			}
			b, err := json.Marshal(res)
			if err != nil {
				return `{"error":{"code":"internal","message":"cannot encode the result"}}`, true
			}
			return string(b), false
		},
	}
}

func (d *Delegator) call(ctx context.Context, dl *delegation, input json.RawMessage) (any, error) {
	c, err := messages.DecodeToolCall(input)
	if err != nil {
		return nil, err
	}
	if st, ok := c.Args.(*messages.Start); ok {
		if st.InitialPosture == "" && dl.policy.InitialPosture != "" {
			ip := dl.policy.InitialPosture
			if st.MaxPosture != "" {
				ip = messages.MinPosture(ip, st.MaxPosture)
			}
			st.InitialPosture = ip
		}
		if st.Cwd == "" {
			st.Cwd = dl.cwd
		}
	}
	res, err := dl.disp.Dispatch(ctx, c, nil)
	if err != nil {
		return nil, messages.AsError(c.Op, err)
	}
	if tr, ok := res.(messages.TurnResult); ok && tr.Kind == messages.KindClarification && dl.policy.AskHuman {
		return d.askHuman(ctx, dl, c, tr)
	}
	switch r := res.(type) {
	case messages.StartResult:
		dl.mu.Lock()
		if !slices.Contains(dl.sessions, r.SessionID) {
			dl.sessions = append(dl.sessions, r.SessionID)
		}
		dl.mu.Unlock()
		d.update(dl.id, func(rec *Record) {
			if !slices.Contains(rec.Sessions, r.SessionID) {
				rec.Sessions = append(rec.Sessions, r.SessionID)
			}
		})
	case messages.StopResult:
		if stop, ok := c.Args.(*messages.Stop); ok && stop.Outcome != "" {
			dl.mu.Lock()
			dl.verdicts[stop.SessionID] = stop.Outcome
			dl.mu.Unlock()
			d.update(dl.id, func(rec *Record) {
				if rec.Verdicts == nil {
					rec.Verdicts = map[string]messages.Outcome{}
				}
				rec.Verdicts[stop.SessionID] = stop.Outcome
			})
		}
	}
	return res, nil
}

// askHuman hands a driven session's clarification to the human (the
// policy does not let the driver answer it): the record shows it, the
// driver's read-turn waits, and once the human answered (Answer) the read
// goes on, so the driver gets the session's next result.
func (d *Delegator) askHuman(ctx context.Context, dl *delegation, read messages.ToolCall, tr messages.TurnResult) (any, error) {
	for tr.Kind == messages.KindClarification {
		q := &Question{SessionID: tr.SessionID, ClarificationID: tr.ClarificationID, ToolName: tr.ToolName, Input: tr.Input, At: d.o.Now()}
		dl.mu.Lock()
		dl.question = q
		dl.mu.Unlock()
		d.update(dl.id, func(r *Record) { r.Question = q })
		d.o.Logger.Info("code_session_question", "delegation", dl.id, "session", q.SessionID, "tool", q.ToolName, "clarification", q.ClarificationID)
		answered := false
		for !answered {
			select {
			case a := <-dl.answers:
				res, err := d.o.Runtime.Answer(ctx, dl.scope, a.op)
				a.reply <- answerReply{res: res, err: err}
				answered = err == nil
			case <-ctx.Done():
				dl.mu.Lock()
				dl.question = nil
				dl.mu.Unlock()
				return nil, messages.Wrap(messages.CodeTimeout, messages.OpReadTurn, ctx.Err(), "stopped waiting for the human's answer")
			}
		}
		dl.mu.Lock()
		dl.question = nil
		dl.mu.Unlock()
		d.update(dl.id, func(r *Record) { r.Question = nil })
		res, err := dl.disp.Dispatch(ctx, read, nil)
		if err != nil {
			return nil, messages.AsError(read.Op, err)
		}
		tr = res.(messages.TurnResult)
	}
	return tr, nil
}

// Answer answers a driven session's clarification that waits for a human
// (Record.Question). handled is false when no live delegation of this
// runtime waits on that clarification (answer it as any other).
func (d *Delegator) Answer(ctx context.Context, op messages.Answer) (res messages.AnswerResult, handled bool, err error) {
	d.mu.Lock()
	var dl *delegation
	for _, x := range d.live {
		x.mu.Lock()
		q := x.question
		x.mu.Unlock()
		if q != nil && q.SessionID == op.SessionID && q.ClarificationID == op.ClarificationID {
			dl = x
			break
		}
	}
	d.mu.Unlock()
	if dl == nil {
		return res, false, nil
	}
	reply := make(chan answerReply, 1)
	select {
	case dl.answers <- humanAnswer{op: op, reply: reply}:
	case <-dl.done:
		return res, true, messages.Errorf(messages.CodeNotLive, messages.OpAnswer, "the delegation settled before the answer reached it")
	case <-ctx.Done():
		return res, true, messages.Wrap(messages.CodeTimeout, messages.OpAnswer, ctx.Err(), "the delegation did not take the answer")
	}
	select {
	case r := <-reply:
		return r.res, true, r.err
	case <-ctx.Done():
		return res, true, messages.Wrap(messages.CodeTimeout, messages.OpAnswer, ctx.Err(), "the answer was not confirmed")
	}
}

func (d *Delegator) update(id string, f func(*Record)) {
	rec, err := d.o.Records.Update(id, func(r *Record) {
		f(r)
		r.UpdatedAt = d.o.Now()
	})
	if err != nil {
		d.o.Logger.Warn("delegation record not updated", "delegation", id, "err", err)
		return
	}
	d.changed(rec)
}

func (d *Delegator) changed(rec Record) {
	if d.o.OnChange != nil {
		d.o.OnChange(rec)
	}
}

// sink sees the driver loop's events: the end of its (one) turn settles it.
func (dl *delegation) sink(turn int, ev messages.Event) {
	if ev.Type != messages.EvTurnEnd {
		return
	}
	te := turnEnd{state: ev.State, text: ev.Text, rounds: ev.NumTurns}
	if ev.State == messages.TurnErrored {
		te.errMsg = ev.Text
	}
	select {
	case dl.ended <- te:
	default:
	}
}

// run waits for the driver's turn to end or a cancel, then settles.
func (d *Delegator) run(dl *delegation, rec Record) {
	var te turnEnd
	state := StateDone
	select {
	case te = <-dl.ended:
		switch te.state {
		case messages.TurnErrored:
			state = StateFailed
		case messages.TurnInterrupted:
			state = StateCancelled
		}
	case <-dl.cancel:
		state = StateCancelled
		te.errMsg = "cancelled before the driver finished"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := dl.sess.Close(ctx); err != nil {
		d.o.Logger.Warn("the driver's loop did not close", "delegation", dl.id, "err", err)
	}
	// the sweep: every session the scope owns is released and the scope's
	// constraints cleared; no driven agent outlives its driver
	n, err := d.o.Runtime.ReleaseScope(ctx, dl.scope)
	if err != nil {
		d.o.Logger.Error("releasing a settled driver's sessions failed", "delegation", dl.id, "err", err)
	}
	d.o.Logger.Info("code_specialist_settled", "delegation", dl.id, "state", state, "released", n)
	cur, gerr := d.o.Records.Get(dl.id)
	if gerr == nil {
		rec = cur
	}
	d.finish(dl, rec, state, te.text, te.errMsg, te.rounds)
}

// finish writes the settled record and the settle metrics.
func (d *Delegator) finish(dl *delegation, rec Record, state State, report, errMsg string, rounds int) {
	now := d.o.Now()
	rec.State, rec.UpdatedAt, rec.EndedAt, rec.Question = state, now, now, nil
	rec.Report = truncate(report, maxRecordReport)
	rec.Error = truncate(errMsg, maxRecordReport)
	rec.Rounds = rounds
	dl.mu.Lock()
	for _, sid := range dl.sessions {
		if !slices.Contains(rec.Sessions, sid) {
			rec.Sessions = append(rec.Sessions, sid)
		}
	}
	dl.mu.Unlock()
	// the metrics first, the record second: whoever sees the record
	// settled (GET /api/delegations/{id}) finds it counted too
	backend, sessionRounds := dl.backend, 0
	if d.o.Meta != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for _, sid := range rec.Sessions {
			if m, err := d.o.Meta(ctx, sid); err == nil {
				sessionRounds += m.RoundsElapsed
			}
		}
		cancel()
	}
	if dl.sess != nil { // dispatched: it settles in the metrics
		d.o.Metrics.settle(backend, state, float64(max(now.Sub(dl.created), 0).Milliseconds()), sessionRounds)
	}
	if err := d.o.Records.Put(rec); err != nil {
		d.o.Logger.Error("the settled delegation record was not written", "delegation", dl.id, "err", err)
	}
	d.mu.Lock()
	delete(d.live, dl.id)
	d.mu.Unlock()
	dl.final = rec
	close(dl.done)
	d.changed(rec)
}

// Wait blocks until delegation id settles and returns its record; a
// delegation not running in this process returns its stored record.
func (d *Delegator) Wait(ctx context.Context, id string) (Record, error) {
	d.mu.Lock()
	dl := d.live[id]
	d.mu.Unlock()
	if dl == nil {
		return d.o.Records.Get(id)
	}
	select {
	case <-dl.done:
		return dl.final, nil
	case <-ctx.Done():
		return Record{}, messages.Wrap(messages.CodeTimeout, "delegation", ctx.Err(), "the delegation is still running")
	}
}

// Cancel ends a running delegation: its loop is closed, its sessions are
// released (sweep) and it settles cancelled. A settled one is left as is.
func (d *Delegator) Cancel(ctx context.Context, id string) (Record, error) {
	d.mu.Lock()
	dl := d.live[id]
	d.mu.Unlock()
	if dl == nil {
		return d.o.Records.Get(id)
	}
	dl.once.Do(func() { close(dl.cancel) })
	return d.Wait(ctx, id)
}

// Get reads a delegation's record.
func (d *Delegator) Get(id string) (Record, error) { return d.o.Records.Get(id) }

// List returns every delegation, newest first.
func (d *Delegator) List() ([]Record, error) { return d.o.Records.List() }

// Close cancels every running delegation and waits for them to settle (or
// ctx), refusing new ones.
func (d *Delegator) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	ids := make([]string, 0, len(d.live))
	for id := range d.live {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	for _, id := range ids {
		if _, err := d.Cancel(ctx, id); err != nil && messages.IsCode(err, messages.CodeTimeout) {
			return err
		}
	}
	return nil
}
