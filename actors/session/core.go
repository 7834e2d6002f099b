package session

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/codesession/codesession/learning"
	"github.com/codesession/codesession/learning/routing"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// Spec is the resolved, fixed part of a session: what the registry decided
// at start after applying defaults and scope constraints.
type Spec struct {
	SessionID          string
	Descriptor         messages.Descriptor
	Cwd                string
	Model              string
	Effort             messages.Effort
	MaxPosture         messages.Posture
	Posture            messages.Posture
	MaxRounds          int     // 0: unlimited
	MaxCostUSD         float64 // 0: no budget; the reported cost reaching it stops the session (max_budget)
	AllowedTools       []string
	Brief              string
	AppendSystemPrompt string
	TaskTags           []string
	OwnerScope         string
	ResumeExternalID   string
	// Runtime is the id of the runtime driving the session.
	Runtime string
	// AdoptWarnings say what the resuming scope's constraints clamped; an
	// adopted session records each as a warning event.
	AdoptWarnings []string
	// DanglingTurn is the turn an adopted record's log shows started and
	// never ended (the runtime died mid-turn), 0 for none: Adopt closes it
	// with an interrupted turn_end and numbers the next turn after it.
	DanglingTurn int

	// Worktree is the session's own git worktree (Cwd is inside it), when
	// it is isolated; it goes on the record.
	Worktree *messages.Worktree

	// Provision is the backend's capability plan (transports read it);
	// ProvisionMeta what curation did, for the record.
	Provision     *transports.Provision
	ProvisionMeta *messages.Provision

	// Network is the session's network mode (SessionSpec.Network).
	Network string
}

// Phase is where a session is in its lifecycle.
//
//	starting -> baselining -> running -> diffing -> idle -> baselining ...
//	any -> releasing -> released
type Phase int

const (
	phaseInvalid Phase = iota
	PhaseStarting
	PhaseIdle
	PhaseBaselining
	PhaseRunning
	PhaseDiffing
	PhaseReleasing
	PhaseReleased
)

func (p Phase) String() string {
	return [...]string{"invalid", "starting", "idle", "baselining", "running", "diffing", "releasing", "released"}[p]
}

// TurnOpen reports whether a turn is in flight (being set up, run or diffed).
func (p Phase) TurnOpen() bool {
	return p == PhaseBaselining || p == PhaseRunning || p == PhaseDiffing
}

// DefaultStoreGiveUp is how many failed store writes in a row make a
// session give up and release itself with reason store.
const DefaultStoreGiveUp = 8

// storeFailingAfter is how many failed store writes in a row make ops answer
// unavailable: a single failure is retried before anyone is told.
const storeFailingAfter = 3

type queuedResult struct {
	result messages.TurnResult
	seq    uint64 // deliverable once the store holds this seq
}

type deliveredResult struct {
	token uint64
	q     queuedResult
}

type reader struct {
	token       uint64
	includeDiff bool
}

// Core is a session's decisions as a single-threaded state machine: message
// in, effects out (collected in an Output the shell drains). It does no I/O
// and reads no clock; every input carries the time.
type Core struct {
	spec Spec
	rec  messages.SessionRecord

	seq        uint64 // last assigned
	durableSeq uint64 // highest seq the store acknowledged
	// held are the events after durableSeq, in seq order: the session (not
	// its persist child, whose restart would lose them) keeps them until
	// the store takes them. Nothing is ever dropped to make room. Their
	// chunks are write-once (heldEvents), so a view of them (Unsent,
	// Unpersisted, Output.Events, Output.Durable) is safe to hand to the
	// shell and on to the store without a copy.
	held heldEvents
	// drained is the last seq a Drain handed out in Output.Events.
	drained uint64
	// storeErr is the last store failure while the store keeps failing;
	// storeFails counts the failures in a row.
	storeErr   error
	storeFails int
	giveUp     int
	phase      Phase
	turn       int

	// turnText is the turn's text so far; streamed deltas append to it in
	// place (a string += per delta made a long turn quadratic)
	turnText  []byte
	actions   []messages.Action
	editPaths []string
	end       turnEnd
	lastTotal float64

	pending []messages.Clarification // raised and not yet answered, oldest first
	queue   []queuedResult
	reader  *reader
	// delivered is the last result handed to a reader, kept until the next
	// delivery: a reader that turns out to be gone gives it back (Unread)
	delivered *deliveredResult

	guidance []string // queued for the next turn
	carry    []string // deny reasons riding into the next turn
	diet     Diet

	capped     bool // max_rounds reached
	overBudget bool // max_budget reached: the reported cost reached maxCostUsd
	agentEnded bool

	lastKind       messages.TurnKind
	lastState      messages.TurnState
	completedTurns int

	failed        bool
	outcome       messages.Outcome
	releaseReason messages.ReleaseReason
	releaseNote   string
	releaseWhy    string
	persistWarns  int
	pendingInput  string          // the input of a turn waiting for its baseline
	adopted       bool            // continues an earlier record (resume)
	tally         *learning.Tally // the evidence an inferred verdict needs

	// noCapture, when set, is every turn's diff: diff capture is off, so
	// the baseline is ready at once and the diff needs no round trip to
	// the diff child (whose answer would come while turn_end's write is
	// syncing, and cost the reader a second sync).
	noCapture *messages.TurnDiff

	// the release protocol (lifecycle.go)
	life             Lifecycle
	releasedSeq      uint64
	abandonedRelease bool

	out Output
}

type turnEnd struct {
	kind    messages.TurnKind
	state   messages.TurnState
	text    string
	message string
	code    messages.Code
	num     int
	cost    float64
}

// New builds the core for a fresh session and its initial record. lastSeq is
// the highest seq already in the store for this id (0 for a new session).
func New(spec Spec, now time.Time, lastSeq uint64) *Core {
	c := &Core{spec: spec, phase: PhaseStarting, life: LifeRunning, seq: lastSeq, durableSeq: lastSeq, giveUp: DefaultStoreGiveUp,
		tally: learning.NewTally(spec.Descriptor.EditToolNames, spec.Posture)}
	c.rec = messages.SessionRecord{
		SessionID:    spec.SessionID,
		BackendID:    spec.Descriptor.ID,
		Cwd:          spec.Cwd,
		Model:        spec.Model,
		Effort:       spec.Effort,
		MaxPosture:   spec.MaxPosture,
		Posture:      spec.Posture,
		MaxRounds:    spec.MaxRounds,
		MaxCostUSD:   spec.MaxCostUSD,
		AllowedTools: spec.AllowedTools,
		TaskBrief:    messages.CapBrief(spec.Brief),
		TaskTags:     spec.TaskTags,
		Status:       messages.StatusRunning,
		CreatedAt:    now,
		UpdatedAt:    now,
		Runs:         []messages.Run{{StartedAt: now, ExternalSessionID: spec.ResumeExternalID, OwnerScopeID: spec.OwnerScope, Runtime: spec.Runtime}},
		Version:      messages.RecordVersion,
		Worktree:     spec.Worktree,
		Provision:    spec.ProvisionMeta.Clone(),
	}
	return c
}

// Adopt builds the core for a resumed session: it continues rec (same id,
// rounds, cost, runs) after lastSeq, appends the new run and records an
// `adopted` event. Turn numbers continue after the rounds already run.
func Adopt(spec Spec, rec messages.SessionRecord, now time.Time, lastSeq uint64) *Core {
	c := New(spec, now, lastSeq)
	run := c.rec.Runs[0]
	c.rec = rec.Clone()
	c.rec.Runs = append(c.rec.Runs, run)
	c.rec.Status = messages.StatusRunning
	// the resuming scope's limits replace the record's (resolveResume)
	c.rec.Posture, c.rec.MaxPosture = spec.Posture, spec.MaxPosture
	c.rec.MaxRounds, c.rec.AllowedTools = spec.MaxRounds, spec.AllowedTools
	c.rec.MaxCostUSD = spec.MaxCostUSD
	c.rec.Outcome, c.rec.OutcomeNote = "", ""
	if spec.ProvisionMeta != nil {
		c.rec.Provision = spec.ProvisionMeta.Clone() // what this run was provisioned with
	}
	c.rec.UpdatedAt = now
	c.turn = rec.RoundsElapsed
	if d := spec.DanglingTurn; d > c.turn {
		// turn numbers stay unique across the resume: the dangling turn
		// gets its end and counts as run
		c.turn, c.rec.RoundsElapsed = d, d
		c.emit(now, d, messages.Event{Type: messages.EvTurnEnd, State: messages.TurnInterrupted,
			Text: fmt.Sprintf("turn %d was orphaned: the runtime stopped in the middle of it; the resume closes it", d)})
	}
	c.adopted = true
	c.emit(now, c.turn, messages.Event{Type: messages.EvAdopted, Text: fmt.Sprintf("run %d resumes the session", len(c.rec.Runs)),
		ExternalSessionID: run.ExternalSessionID})
	for _, w := range spec.AdoptWarnings {
		c.emit(now, c.turn, messages.Event{Type: messages.EvWarning, Text: w})
	}
	return c
}

// Adopted reports whether this core continues an earlier record.
func (c *Core) Adopted() bool { return c.adopted }

// Record returns a copy of the session record as the core sees it.
func (c *Core) Record() messages.SessionRecord { return c.rec.Clone() }

// Phase returns the lifecycle phase.
func (c *Core) Phase() Phase { return c.phase }

// Turn returns the current turn number.
func (c *Core) Turn() int { return c.turn }

// LastSeq returns the last assigned seq.
func (c *Core) LastSeq() uint64 { return c.seq }

// ExternalID returns the backend's own session id, once known.
func (c *Core) ExternalID() string {
	if r := c.rec.LatestRun(); r != nil {
		return r.ExternalSessionID
	}
	return ""
}

// Pending returns the oldest unanswered clarification, or nil.
func (c *Core) Pending() *messages.Clarification {
	if len(c.pending) == 0 {
		return nil
	}
	cl := c.pending[0]
	return &cl
}

// syncWaiting keeps a running record's status in step with its questions:
// waiting while one is unanswered, running again once none is, so the
// stored record (and what the daemon's list and show and the feed's
// record changes say of it) tells a session waiting for an answer without
// anyone reading its log.
func (c *Core) syncWaiting(now time.Time) {
	if c.rec.Status != messages.StatusRunning && c.rec.Status != messages.StatusWaiting {
		return
	}
	want := messages.StatusRunning
	if len(c.pending) > 0 {
		want = messages.StatusWaiting
	}
	if c.rec.Status != want {
		c.rec.Status = want
		c.touchMeta(now)
	}
}

// dropPending forgets every unanswered clarification and removes their
// unread results: once the turn is closed they can no longer be answered,
// and reading them would mislead.
func (c *Core) dropPending() {
	c.pending = nil
	kept := c.queue[:0]
	for _, q := range c.queue {
		if q.result.Kind != messages.KindClarification {
			kept = append(kept, q)
		}
	}
	c.queue = kept
}

// Drain returns and clears the accumulated output. Its Events and Durable
// are views of the events the core holds: read them, never modify them.
func (c *Core) Drain() Output {
	o := c.out
	c.out = Output{}
	// the events emitted since the last Drain are held's tail, but for
	// any acknowledged meanwhile (Persisted kept those in out.Events)
	if tail := c.held.from(c.drained, 0); len(o.Events) > 0 {
		o.Events = append(o.Events, tail...)
	} else if len(tail) > 0 {
		o.Events = tail
	}
	c.drained = c.seq
	return o
}

// emit emits ev. It is never inlined, nor are the other helpers of the
// core's steps that take or build an Event, a TurnResult or a record (some
// 250-430 bytes each): inlined, every call site keeps its own copy in the
// caller's frame, and Go sizes a frame for all its locals at once. The
// session runs each wake-up on a new goroutine (hollywood starts one when
// an idle actor gets a message), which starts on a small stack: every
// frame on the way from Receive to the store is stack the goroutine may
// have to grow by copying (runtime.copystack, about half of the session's
// own CPU per event at 10,000 sessions in wave 12's profiles). Keep the
// steps on that path small: each rare case in a method of its own.
//
//go:noinline
func (c *Core) emit(now time.Time, turn int, ev messages.Event) uint64 {
	return c.emitFrom(now, turn, &ev)
}

// emitFrom is emit from a pointer: the event is copied once, straight into
// the held array (an Event is some 400 bytes, and a copy of it per call
// level is a copy the collector's write barriers see too).
func (c *Core) emitFrom(now time.Time, turn int, ev *messages.Event) uint64 {
	c.seq++
	pe := c.held.add()
	// one statement each: a tuple assignment copies *ev to a temporary
	// first (another 400 bytes of frame, and a second copy)
	pe.Seq, pe.At, pe.Turn = c.seq, now, turn
	pe.Event = *ev
	c.tally.ObserveRef(&pe.Event)
	return c.seq
}

// Unpersisted returns the events the store has not acknowledged yet, oldest
// first, at most max of them (max <= 0: all). The slice is the core's (or,
// when they span two chunks, a copy): the caller must not modify it.
func (c *Core) Unpersisted(max int) []messages.PersistedEvent {
	return c.held.from(c.durableSeq, max)
}

// Held is how many events the store has not acknowledged yet.
func (c *Core) Held() int { return c.held.len() }

// Unsent returns the held events after seq after (the last one the shell
// handed to the store), at most max of them, as Unpersisted does: one
// chunk's view unless a failed write sends everything held again.
func (c *Core) Unsent(after uint64, max int) []messages.PersistedEvent {
	return c.held.from(after, max)
}

// Sent says the shell handed the held events up to seq to the store: they
// stay where they are until acknowledged, and only the events after seq
// move when a new chunk starts.
func (c *Core) Sent(seq uint64) { c.held.markSent(seq) }

// DurableSeq returns the highest seq the store has acknowledged.
func (c *Core) DurableSeq() uint64 { return c.durableSeq }

// SetStoreGiveUp sets how many failed store writes in a row make the
// session give up (StoreGaveUp); n < 1 keeps the default.
func (c *Core) SetStoreGiveUp(n int) {
	if n > 0 {
		c.giveUp = n
	}
}

// StoreGaveUp reports that the store has failed giveUp times in a row: the
// shell releases the session with reason store (the record ends failed once
// the store takes the released event).
func (c *Core) StoreGaveUp() bool { return c.storeFails >= c.giveUp }

// storeUnavailable is the typed error ops get while the store keeps failing:
// nothing they did could be acknowledged.
func (c *Core) storeUnavailable(op string) error {
	if c.storeErr == nil || c.storeFails < storeFailingAfter {
		return nil // a passing failure: the retry will most likely land
	}
	cause := messages.AsError(op, c.storeErr)
	return &messages.Error{Code: messages.CodeUnavailable, Op: op, Retryable: true, Err: c.storeErr,
		Message: "the session cannot persist its events (" + cause.Message + "); nothing acknowledged was lost, retry later"}
}

// touchMeta queues the record as it is now for the store (never inlined:
// see emit).
//
//go:noinline
func (c *Core) touchMeta(now time.Time) {
	c.rec.UpdatedAt = now
	r := c.rec.Clone()
	c.out.Meta = &r
}

func (c *Core) live() bool { return c.phase != PhaseReleasing && c.phase != PhaseReleased }

// Created is called once the store holds the new record: the first turn
// starts with the brief.
func (c *Core) Created(now time.Time) {
	if c.phase != PhaseStarting {
		return
	}
	c.phase = PhaseIdle
	c.beginTurn(now, c.spec.Brief)
}

func (c *Core) beginTurn(now time.Time, input string) {
	c.turn++
	c.phase = PhaseBaselining
	c.turnText, c.actions, c.editPaths, c.end = nil, nil, nil, turnEnd{}
	c.pendingInput = input
	c.rec.Status = messages.StatusRunning
	c.touchMeta(now)
	if c.noCapture != nil {
		c.BaselineReady(now, c.turn)
		return
	}
	c.out.Diff = append(c.out.Diff, DBaseline{Turn: c.turn})
}

// CaptureOff says diff capture is off for this session: each turn's diff
// is d, decided here with no diff child involved.
func (c *Core) CaptureOff(d messages.TurnDiff) { c.noCapture = &d }

// BaselineReady is diff capture's answer to DBaseline: the turn may start.
func (c *Core) BaselineReady(now time.Time, turn int) {
	if c.phase != PhaseBaselining || turn != c.turn {
		return
	}
	c.phase = PhaseRunning
	input := c.pendingInput
	c.pendingInput = ""
	c.emit(now, c.turn, messages.Event{Type: messages.EvTurnStarted, Text: input})
	c.out.Transport = append(c.out.Transport, TStartTurn{Turn: c.turn, Input: input})
}

// AgentEvent takes one normalized event from the transport.
func (c *Core) AgentEvent(now time.Time, turn int, ev messages.Event) {
	c.agentEvent(now, turn, &ev)
}

// agentEvent is AgentEvent from a pointer, for the shell's batches: ev is
// read, never kept (the core keeps its own copy). Streamed output is
// handled here; every other kind in a method of its own (see emit).
func (c *Core) agentEvent(now time.Time, turn int, ev *messages.Event) {
	if !c.live() {
		return // released: emit nothing after released
	}
	seq := c.emitFrom(now, turn, ev)
	if ev.Type == messages.EvStarted {
		c.backendStarted(now, ev)
		return
	}
	if ev.Type == messages.EvEnded {
		c.agentEnded = true // whenever it comes, the backend has said it is done
	}
	if turn != c.turn || c.phase != PhaseRunning {
		return // a stale event of an earlier (interrupted) turn: kept, never acted on
	}
	switch ev.Type {
	case messages.EvText:
		if ev.Delta {
			c.turnText = append(c.turnText, ev.Text...)
		} else {
			c.turnText = append(c.turnText[:0], ev.Text...)
		}
	case messages.EvToolUse:
		c.toolUse(turn, ev)
	case messages.EvToolResult:
		c.toolResult(turn, ev)
	case messages.EvClarification:
		if ev.Decision != "" || ev.ClarificationID == "" {
			return
		}
		c.clarification(now, ev, seq)
	case messages.EvTurnEnd, messages.EvEnded, messages.EvError:
		c.agentTurnEnd(now, ev)
	}
	c.deliver()
}

// backendStarted takes the backend's started event: what it says of the
// run goes into the record.
//
//go:noinline
func (c *Core) backendStarted(now time.Time, ev *messages.Event) {
	if ev.ExternalSessionID != "" && ev.ExternalSessionID != c.ExternalID() {
		c.rec.Runs[len(c.rec.Runs)-1].ExternalSessionID = ev.ExternalSessionID
		c.touchMeta(now)
	}
	if ev.Model != "" && c.rec.Model == "" {
		c.rec.Model = ev.Model
		c.touchMeta(now)
	}
	if run := &c.rec.Runs[len(c.rec.Runs)-1]; ev.Containment != nil && run.Containment == nil {
		run.Containment = ev.Containment // what the runtime's containment applied (read only)
		c.touchMeta(now)
	}
}

//go:noinline
func (c *Core) toolUse(turn int, ev *messages.Event) {
	c.actions = append(c.actions, messages.Action{ToolUseID: ev.ToolUseID, ToolName: ev.ToolName, Input: ev.Input})
	c.diet.Add(messages.HistoryEntry{Turn: turn, Kind: messages.HistAction, Text: ev.ToolName + " " + compactJSON(ev.Input)})
}

//go:noinline
func (c *Core) toolResult(turn int, ev *messages.Event) {
	// any tool may have changed the work tree (a shell as well as an edit)
	if c.noCapture == nil {
		c.out.Diff = append(c.out.Diff, DPrepare{Turn: turn})
	}
	for i := len(c.actions) - 1; i >= 0; i-- {
		if c.actions[i].ToolUseID == ev.ToolUseID {
			c.actions[i].Result = cutText(ev.Output, DietMaxEntryText)
			c.actions[i].IsError = ev.IsError
			// an edit counts for the tool-event diff fallback only once it ran
			if !ev.IsError && c.isEditTool(c.actions[i].ToolName) {
				if p := editPath(c.actions[i].Input); p != "" {
					c.editPaths = appendUnique(c.editPaths, p)
				}
			}
			break
		}
	}
}

// clarification queues the backend's question (event seq) for the reader.
//
//go:noinline
func (c *Core) clarification(now time.Time, ev *messages.Event, seq uint64) {
	c.pending = append(c.pending, messages.Clarification{ID: ev.ClarificationID, ToolName: ev.ToolName, Input: ev.Input})
	c.syncWaiting(now)
	c.enqueue(messages.TurnResult{Kind: messages.KindClarification, ClarificationID: ev.ClarificationID,
		ToolName: ev.ToolName, Input: ev.Input}, seq)
}

// agentTurnEnd closes the running turn on the backend's turn_end, its end,
// or a fatal error.
//
//go:noinline
func (c *Core) agentTurnEnd(now time.Time, ev *messages.Event) {
	switch ev.Type {
	case messages.EvTurnEnd:
		state := ev.State
		if !state.Valid() {
			state = messages.TurnCompleted
		}
		text := ev.Text
		if text == "" {
			text = string(c.turnText)
		}
		e := turnEnd{kind: messages.KindTurnComplete, state: state, text: text, num: ev.NumTurns, cost: c.costDelta(ev)}
		if state == messages.TurnErrored {
			e.kind, e.message = messages.KindError, firstNonEmpty(ev.Text, "the turn failed")
		}
		c.finishTurn(now, e)
	case messages.EvEnded:
		c.agentEnded = true
		c.finishTurn(now, turnEnd{kind: messages.KindEnded, state: messages.TurnEnded, text: firstNonEmpty(ev.Text, string(c.turnText))})
	case messages.EvError:
		if ev.Fatal {
			c.finishTurn(now, turnEnd{kind: messages.KindError, state: messages.TurnErrored, message: firstNonEmpty(ev.Text, "the backend exited"), code: messages.CodeInternal})
		}
	}
}

func (c *Core) costDelta(ev *messages.Event) float64 {
	if ev.TotalCostUSD > 0 {
		d := ev.TotalCostUSD - c.lastTotal
		c.lastTotal = ev.TotalCostUSD
		if d < 0 {
			d = 0
		}
		// totals are cumulative floats: keep deltas free of subtraction noise
		return math.Round(d*1e9) / 1e9
	}
	return ev.CostUSD
}

// finishTurn closes the running turn: the terminal result waits for the diff.
func (c *Core) finishTurn(now time.Time, e turnEnd) {
	if c.phase != PhaseRunning {
		return
	}
	c.dropPending()
	c.syncWaiting(now)
	c.end = e
	c.phase = PhaseDiffing
	if c.noCapture != nil {
		d := *c.noCapture
		d.Files = []messages.FileChange{}
		c.DiffReady(now, c.turn, &d)
		return
	}
	c.out.Diff = append(c.out.Diff, DFinish{Turn: c.turn, EditPaths: append([]string(nil), c.editPaths...)})
}

// TransportFailed ends the running turn with an error: the transport could
// not carry out a command for turn, or its host failed and is restarting
// (turn 0 means whatever turn is running).
func (c *Core) TransportFailed(now time.Time, turn int, msg string) {
	if !c.live() || (turn != 0 && turn != c.turn) {
		return
	}
	if c.phase == PhaseRunning || c.phase == PhaseBaselining {
		defer c.emit(now, c.turn, messages.Event{Type: messages.EvError, Text: msg})
	}
	switch c.phase {
	case PhaseRunning:
		c.finishTurn(now, turnEnd{kind: messages.KindError, state: messages.TurnErrored, message: msg, code: messages.CodeInternal})
	case PhaseBaselining:
		// the turn never reached the backend; fail it the same way
		c.phase = PhaseRunning
		c.emit(now, c.turn, messages.Event{Type: messages.EvTurnStarted, Text: c.pendingInput})
		c.pendingInput = ""
		c.finishTurn(now, turnEnd{kind: messages.KindError, state: messages.TurnErrored, message: msg, code: messages.CodeInternal})
	}
	c.deliver()
}

// DiffLost ends a diff-capture stage of turn that will never be answered
// (diff capture restarted under it, or its deadline passed): a turn waiting
// for its baseline runs without one, a turn waiting for its diff ends with
// fallback, the diff the shell made of the turn's edit-tool events
// (EditPaths); why goes into a warning either way. A turn never hangs on
// diff capture.
func (c *Core) DiffLost(now time.Time, turn int, why string, fallback messages.TurnDiff) {
	if turn != c.turn {
		return
	}
	switch c.phase {
	case PhaseBaselining:
		c.emit(now, c.turn, messages.Event{Type: messages.EvWarning, Text: "diff capture: " + why + "; the turn runs without a baseline"})
		c.BaselineReady(now, turn)
	case PhaseDiffing:
		fallback.Warning = why
		c.DiffReady(now, turn, &fallback)
	}
}

// EditPaths returns the files the current turn's edit tools wrote, as
// DFinish carries them: what a fallback diff is made of.
func (c *Core) EditPaths() []string { return append([]string(nil), c.editPaths...) }

// DiffReady is diff capture's answer to DFinish: the terminal result is
// built, persisted and queued for the reader; queued guidance starts the
// next turn.
func (c *Core) DiffReady(now time.Time, turn int, diff *messages.TurnDiff) {
	if c.phase != PhaseDiffing || turn != c.turn {
		return
	}
	if diff == nil {
		diff = &messages.TurnDiff{Source: messages.DiffNone, Files: []messages.FileChange{}, Summary: "no diff captured"}
	}
	c.emitDiff(now, diff)
	if diff.Warning != "" {
		// a capture problem is loud, never fatal: the turn's result goes on
		c.emitNote(now, messages.EvWarning, "diff capture: "+diff.Warning)
	}
	c.queueTurnResult(diff)
	c.phase = PhaseIdle
	if c.agentEnded {
		c.rec.Status = messages.StatusEnded
	} else {
		c.rec.Status = messages.StatusIdle
	}
	c.touchMeta(now)
	if len(c.guidance) > 0 {
		c.guidanceAfterTurn(now)
	}
	c.deliver()
}

// emitNote emits an event of type typ that says text, in the current
// turn. The event is built in this call's frame, not its caller's: see
// emit.
//
//go:noinline
func (c *Core) emitNote(now time.Time, typ messages.EventType, text string) {
	c.emit(now, c.turn, messages.Event{Type: typ, Text: text})
}

// emitDiff emits the current turn's turn_diff (see emitNote).
//
//go:noinline
func (c *Core) emitDiff(now time.Time, diff *messages.TurnDiff) {
	c.emit(now, c.turn, messages.Event{Type: messages.EvTurnDiff, Diff: diff})
}

// guidanceAfterTurn starts the next turn with the guidance queued during
// the one that ended, or says why it cannot.
//
//go:noinline
func (c *Core) guidanceAfterTurn(now time.Time) {
	if err := c.canStartTurn(); err == nil {
		c.beginTurn(now, c.nextInput(""))
	} else {
		c.emitNote(now, messages.EvWarning,
			fmt.Sprintf("%d queued guidance message(s) not delivered: %s", len(c.guidance), messages.AsError("guide", err).Message))
		c.guidance = nil
	}
}

// queueTurnResult builds the ended turn's result from its end and diff,
// counts the round, and queues the result for the reader.
//
//go:noinline
func (c *Core) queueTurnResult(diff *messages.TurnDiff) {
	e := c.end
	c.rec.CostUSD += e.cost
	c.rec.RoundsElapsed++
	atCap := c.spec.MaxRounds > 0 && c.rec.RoundsElapsed >= c.spec.MaxRounds
	// the budget is checked where the turn's cost lands; a backend that
	// reports no cost never stops on it
	overBudget := c.spec.MaxCostUSD > 0 && c.rec.CostUSD >= c.spec.MaxCostUSD
	c.capped = c.capped || atCap
	c.overBudget = c.overBudget || overBudget
	r := messages.TurnResult{Kind: e.kind, SessionID: c.spec.SessionID, Turn: c.turn, TurnDiff: diff}
	switch e.kind {
	case messages.KindTurnComplete:
		r.Text, r.Actions, r.NumTurns, r.CostUSD, r.State = e.text, c.actions, e.num, e.cost, e.state
		if atCap {
			r = messages.TurnResult{Kind: messages.KindMaxRounds, SessionID: c.spec.SessionID, Turn: c.turn, OK: true,
				Text: e.text, Rounds: c.rec.RoundsElapsed, State: e.state, TurnDiff: diff}
		}
		if overBudget {
			r = messages.TurnResult{Kind: messages.KindMaxBudget, SessionID: c.spec.SessionID, Turn: c.turn, OK: true,
				Text: e.text, Rounds: c.rec.RoundsElapsed, CostUSD: c.rec.CostUSD, State: e.state, TurnDiff: diff}
		}
	case messages.KindEnded:
		r.OK, r.Text = true, e.text
	case messages.KindError:
		r.Message, r.Code = e.message, e.code
	}
	c.diet.Add(messages.HistoryEntry{Turn: c.turn, Kind: messages.HistTurn, Text: turnSummary(r)})
	if r.Kind == messages.KindTurnComplete {
		r.RoundHistory = c.diet.Snapshot()
	}
	c.lastKind, c.lastState = r.Kind, e.state
	if r.Kind != messages.KindError && e.state != messages.TurnInterrupted {
		c.completedTurns++
	}
	c.enqueue(r, c.seq)
}

func (c *Core) canStartTurn() error {
	switch {
	case !c.live():
		return messages.Errorf(messages.CodeNotLive, messages.OpGuide, "the session has been released")
	case c.agentEnded:
		return messages.Errorf(messages.CodeNotLive, messages.OpGuide, "the agent ended the session")
	case c.capped:
		return messages.Errorf(messages.CodeConflict, messages.OpGuide, "the session reached its maxRounds (%d)", c.spec.MaxRounds)
	case c.overBudget:
		return messages.Errorf(messages.CodeConflict, messages.OpGuide, "the session reached its maxCostUsd (%g USD; it cost %g)", c.spec.MaxCostUSD, c.rec.CostUSD)
	}
	return nil
}

// nextInput joins carried deny reasons, queued guidance and text.
func (c *Core) nextInput(text string) string {
	parts := append(append([]string(nil), c.carry...), c.guidance...)
	if text != "" {
		parts = append(parts, text)
	}
	c.carry, c.guidance = nil, nil
	return strings.Join(parts, "\n\n")
}

// enqueue queues r for the reader once seq is durable (never inlined: see
// emit).
//
//go:noinline
func (c *Core) enqueue(r messages.TurnResult, seq uint64) {
	if r.SessionID == "" {
		r.SessionID = c.spec.SessionID
	}
	if r.Turn == 0 {
		r.Turn = c.turn
	}
	c.queue = append(c.queue, queuedResult{result: r, seq: seq})
}

// deliver hands the oldest durable result to a waiting reader. Most calls
// (one per event) have nothing to deliver: the check is inlined, the
// delivery a call of its own (see emit).
func (c *Core) deliver() {
	if c.reader == nil || len(c.queue) == 0 || c.queue[0].seq > c.durableSeq {
		return
	}
	c.deliverHead()
}

//go:noinline
func (c *Core) deliverHead() {
	// through pointers: a result is some 250 bytes, and each copy of it
	// held in this frame is stack a wake-up may have to grow (see emit)
	d := &deliveredResult{token: c.reader.token, q: c.queue[0]}
	c.queue = c.queue[1:]
	c.delivered = d
	c.out.Replies = append(c.out.Replies, Reply{})
	r := &c.out.Replies[len(c.out.Replies)-1]
	r.Token, r.Result = d.token, d.q.result
	if !c.reader.includeDiff {
		r.Result.TurnDiff = r.Result.TurnDiff.WithoutUnified()
	}
	c.reader = nil
}

// Persisted records that the store holds every event up to seq (the
// store's own LastSeq, never a hope) and, with err, that the last write
// failed: the events after seq stay held and are written again; the session
// says so once per streak of failures, and while the streak lasts ops answer
// unavailable.
func (c *Core) Persisted(now time.Time, seq uint64, err error) {
	if seq > c.seq {
		seq = c.seq
	}
	if seq > c.durableSeq {
		for {
			acked := c.held.takeFront(seq)
			if len(acked) == 0 {
				break
			}
			// the ones acknowledged before Drain saw them (seqs ascend:
			// a slice append, not one per element, which would copy each
			// 430-byte event to a temporary in this frame first)
			i := 0
			for i < len(acked) && acked[i].Seq <= c.drained {
				i++
			}
			c.out.Events = append(c.out.Events, acked[i:]...)
			if len(c.out.Durable) == 0 {
				c.out.Durable = acked
			} else {
				c.out.Durable = append(c.out.Durable, acked...)
			}
		}
		c.durableSeq = seq
		if c.phase == PhaseIdle {
			c.held.release() // between turns: nothing is held for a while
		}
	}
	if err != nil {
		c.persistFailed(now, err)
	} else {
		c.persistWarns, c.storeFails, c.storeErr = 0, 0, nil
	}
	c.deliver()
	c.releasedDurable()
}

// persistFailed counts a failed write, and says so once per streak.
//
//go:noinline
func (c *Core) persistFailed(now time.Time, err error) {
	c.persistWarns++
	c.storeFails++
	c.storeErr = err
	if c.persistWarns == 1 && c.live() {
		c.emitNote(now, messages.EvError, "persisting events failed: "+messages.AsError("persist", err).Message)
	}
}

// ReadTurn registers a reader. It returns an error at once when the read
// cannot be served; otherwise the answer comes as a Reply (maybe in this
// same step).
func (c *Core) ReadTurn(token uint64, includeDiff bool) error {
	if err := c.storeUnavailable(messages.OpReadTurn); err != nil && (len(c.queue) == 0 || c.queue[0].seq > c.durableSeq) {
		return err
	}
	if c.reader != nil {
		return messages.Errorf(messages.CodeConflict, messages.OpReadTurn, "another read-turn is already waiting on this session")
	}
	if !c.live() && len(c.queue) == 0 {
		return messages.Errorf(messages.CodeNotLive, messages.OpReadTurn, "the session has been released")
	}
	if len(c.queue) == 0 && !c.phase.TurnOpen() && c.phase != PhaseStarting && (c.agentEnded || c.capped || c.overBudget) {
		return messages.Errorf(messages.CodeNotLive, messages.OpReadTurn, "the session has no more turns: stop it")
	}
	c.reader = &reader{token: token, includeDiff: includeDiff}
	c.deliver()
	return nil
}

// Unread puts the result delivered to reader token back at the head of the
// queue, for the next read: that reader's caller was gone (its context ended,
// its connection closed) by the time the result reached it. A result is
// consumed only when delivered. It reports false when token did not get the
// last delivered result (nothing to put back).
func (c *Core) Unread(token uint64) bool {
	d := c.delivered
	if d == nil || d.token != token {
		return false
	}
	c.delivered = nil
	c.queue = append([]queuedResult{d.q}, c.queue...)
	c.deliver()
	return true
}

// CancelRead withdraws a waiting reader. It reports false when the reader
// was already answered (the answer is then on its way and must be used).
func (c *Core) CancelRead(token uint64) bool {
	if c.reader != nil && c.reader.token == token {
		c.reader = nil
		return true
	}
	return false
}

// Answer resolves the pending clarification.
func (c *Core) Answer(now time.Time, a messages.Answer) (messages.AnswerResult, error) {
	if !c.live() {
		return messages.AnswerResult{}, messages.Errorf(messages.CodeNotLive, messages.OpAnswer, "the session has been released")
	}
	if err := c.storeUnavailable(messages.OpAnswer); err != nil {
		return messages.AnswerResult{}, err
	}
	if len(c.pending) == 0 {
		return messages.AnswerResult{}, messages.Errorf(messages.CodeConflict, messages.OpAnswer, "no clarification is pending")
	}
	idx := -1
	for i, p := range c.pending {
		if p.ID == a.ClarificationID {
			idx = i
		}
	}
	if idx < 0 {
		return messages.AnswerResult{}, messages.Errorf(messages.CodeNotFound, messages.OpAnswer, "unknown clarification %q", a.ClarificationID)
	}
	cl := c.pending[idx]
	cl.Decision, cl.Reason = a.Decision, a.Reason
	c.pending = append(c.pending[:idx], c.pending[idx+1:]...)
	c.syncWaiting(now)
	// drop the clarification from the unread queue if the driver answered
	// without reading it (it is answered; reading it now would mislead)
	for i, q := range c.queue {
		if q.result.Kind == messages.KindClarification && q.result.ClarificationID == cl.ID {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			break
		}
	}
	c.emit(now, c.turn, messages.Event{Type: messages.EvClarification, ClarificationID: cl.ID, ToolName: cl.ToolName,
		Decision: a.Decision, Reason: a.Reason, Note: a.Note})
	kind, text := messages.HistClarification, fmt.Sprintf("%s: %s", cl.ToolName, a.Decision)
	if a.Decision == messages.DecisionDeny {
		kind = messages.HistDeny
		reason := firstNonEmpty(a.Reason, "no reason given")
		text = fmt.Sprintf("%s denied: %s", cl.ToolName, reason)
		c.carry = append(c.carry, fmt.Sprintf("Note: your request to use %s was denied: %s", cl.ToolName, reason))
	}
	c.diet.Add(messages.HistoryEntry{Turn: c.turn, Kind: kind, Text: text, Pinned: true})
	c.out.Transport = append(c.out.Transport, TAnswer{ClarificationID: cl.ID, Decision: a.Decision, Reason: a.Reason})
	return messages.AnswerResult{OK: true, Clarification: cl}, nil
}

// Guide sends guidance according to its mode.
func (c *Core) Guide(now time.Time, g messages.Guide) error {
	const op = messages.OpGuide
	if err := c.canStartTurn(); err != nil {
		return err
	}
	if err := c.storeUnavailable(op); err != nil {
		return err
	}
	mode := g.EffectiveMode()
	if err := c.guideModel(now, mode, &g); err != nil {
		return err
	}
	source := g.Source
	if source == "" {
		source = messages.SourceDriver
	}
	startsTurn := c.phase == PhaseIdle
	if startsTurn {
		c.beginTurn(now, c.nextInput(g.Text)) // the guidance belongs to the turn it starts
	}
	c.emitGuidance(now, source, mode, &g)
	if source == messages.SourceUser {
		c.diet.Add(messages.HistoryEntry{Turn: c.turn, Kind: messages.HistGuidance, Text: "user: " + g.Text, Pinned: true})
	}
	switch {
	case startsTurn:
	case mode == messages.GuideSteer && c.phase == PhaseRunning:
		c.out.Transport = append(c.out.Transport, TSteer{Text: g.Text})
	case mode == messages.GuideInterrupt && c.phase == PhaseRunning:
		c.emit(now, c.turn, messages.Event{Type: messages.EvInterrupt})
		c.out.Transport = append(c.out.Transport, TInterrupt{})
		c.guidance = append(c.guidance, g.Text)
	default: // queue, or a turn that is being set up or diffed
		c.guidance = append(c.guidance, g.Text)
	}
	return nil
}

// guideModel checks that the backend takes guidance in mode and the model
// or effort g switches to (g.Model resolved), and switches them. A method
// of its own, as the other steps below: see emit.
//
//go:noinline
func (c *Core) guideModel(now time.Time, mode messages.GuideMode, g *messages.Guide) error {
	const op = messages.OpGuide
	d := &c.spec.Descriptor
	if !d.SupportsGuideMode(mode) {
		return messages.Errorf(messages.CodeUnsupported, op, "backend %s does not support %s guidance", d.ID, mode)
	}
	if err := routing.CheckSwitch(op, *d, g.Model, g.Effort); err != nil {
		return err
	}
	g.Model = routing.ResolveModel(*d, g.Model)
	if g.Model != "" || g.Effort != "" {
		c.out.Transport = append(c.out.Transport, TSetModel{Model: g.Model, Effort: g.Effort})
		if g.Model != "" {
			c.rec.Model = g.Model
		}
		if g.Effort != "" {
			c.rec.Effort = g.Effort
		}
		c.touchMeta(now)
	}
	return nil
}

//go:noinline
func (c *Core) emitGuidance(now time.Time, source messages.GuidanceSource, mode messages.GuideMode, g *messages.Guide) {
	c.emit(now, c.turn, messages.Event{Type: messages.EvGuidance, Source: source, Mode: mode, Text: g.Text, Model: g.Model})
}

// SetPosture changes the posture, never above the session's ceiling.
func (c *Core) SetPosture(now time.Time, p messages.Posture) (messages.SetPostureResult, error) {
	const op = messages.OpSetPosture
	if !c.live() {
		return messages.SetPostureResult{}, messages.Errorf(messages.CodeNotLive, op, "the session has been released")
	}
	if p.Above(c.spec.MaxPosture) {
		return messages.SetPostureResult{}, &messages.Error{Code: messages.CodeCeilingExceeded, Op: op, Field: "posture",
			Message: fmt.Sprintf("posture %s is above the session's maxPosture %s", p, c.spec.MaxPosture)}
	}
	if err := c.storeUnavailable(op); err != nil {
		return messages.SetPostureResult{}, err
	}
	if p == c.rec.Posture {
		return messages.SetPostureResult{OK: true, Posture: p}, nil
	}
	if !c.spec.Descriptor.Live.SetPosture {
		return messages.SetPostureResult{}, messages.Errorf(messages.CodeUnsupported, op, "backend %s cannot change posture live", c.spec.Descriptor.ID)
	}
	c.rec.Posture = p
	c.emit(now, c.turn, messages.Event{Type: messages.EvPosture, Posture: p})
	c.out.Transport = append(c.out.Transport, TSetPosture{Posture: p})
	c.touchMeta(now)
	return messages.SetPostureResult{OK: true, Posture: p}, nil
}

// Interrupt aborts the running turn; with no running turn it does nothing.
func (c *Core) Interrupt(now time.Time) error {
	if !c.live() {
		return messages.Errorf(messages.CodeNotLive, messages.OpInterrupt, "the session has been released")
	}
	if !c.spec.Descriptor.Live.Interrupt {
		return messages.Errorf(messages.CodeUnsupported, messages.OpInterrupt, "backend %s cannot be interrupted", c.spec.Descriptor.ID)
	}
	if err := c.storeUnavailable(messages.OpInterrupt); err != nil {
		return err
	}
	switch c.phase {
	case PhaseRunning:
		c.emit(now, c.turn, messages.Event{Type: messages.EvInterrupt})
		c.out.Transport = append(c.out.Transport, TInterrupt{})
	case PhaseBaselining:
		// the turn has not reached the backend: close it here
		c.emit(now, c.turn, messages.Event{Type: messages.EvInterrupt})
		c.phase = PhaseRunning
		c.emit(now, c.turn, messages.Event{Type: messages.EvTurnStarted, Text: c.pendingInput})
		c.pendingInput = ""
		c.finishTurn(now, turnEnd{kind: messages.KindTurnComplete, state: messages.TurnInterrupted})
	}
	return nil
}

// Supervised records a supervision event (a child restarted).
func (c *Core) Supervised(now time.Time, child, text string) {
	if c.live() {
		c.emit(now, c.turn, messages.Event{Type: messages.EvSupervision, Child: child, Text: text})
	}
}

// ChildAbandoned records that child did not stop in time and was abandoned: a
// supervision event, written during a release too (it precedes `released`);
// once released, there is nothing left to write it to.
func (c *Core) ChildAbandoned(now time.Time, child, text string) {
	if c.phase != PhaseReleased {
		c.emit(now, c.turn, messages.Event{Type: messages.EvSupervision, Child: child, Text: text})
	}
}

// outcomeFacts are what the inferred verdict is decided from. An
// interrupted turn is not a completed one: it counts in CompletedTurns
// neither when the backend closes it interrupted nor when the core closes
// it itself (an interrupt before the turn reached the backend).
func (c *Core) outcomeFacts() learning.Facts {
	f := c.tally.Facts(c.failed, c.capped, learning.ReadOnlyBrief(c.rec.TaskBrief, c.spec.MaxPosture, c.spec.TaskTags))
	f.LastKind, f.LastState, f.TurnRunning, f.CompletedTurns = c.lastKind, c.lastState, c.phase.TurnOpen(), c.completedTurns
	return f
}

// BeginRelease starts releasing the session and returns the verdict: the
// driver's when given, else inferred. A waiting reader is answered. It is
// idempotent: a second call returns the first verdict.
func (c *Core) BeginRelease(now time.Time, reason messages.ReleaseReason, outcome messages.Outcome, note string, why string) messages.Outcome {
	if !c.live() {
		return c.outcome
	}
	c.failed = reason == messages.ReleaseFailed || reason == messages.ReleaseStore
	if outcome == "" {
		outcome = learning.InferOutcome(c.outcomeFacts())
	}
	c.outcome = outcome
	c.rec.Outcome, c.rec.OutcomeNote = outcome, note
	c.releaseReason, c.releaseNote, c.releaseWhy = reason, note, why
	if c.reader != nil {
		if c.failed {
			r := messages.TurnResult{Kind: messages.KindError, SessionID: c.spec.SessionID, Turn: c.turn,
				Message: "the session failed: " + firstNonEmpty(why, "supervision gave up"), Code: messages.CodeInternal}
			c.out.Replies = append(c.out.Replies, Reply{Token: c.reader.token, Result: r})
		} else {
			c.out.Replies = append(c.out.Replies, Reply{Token: c.reader.token,
				Err: messages.Errorf(messages.CodeNotLive, messages.OpReadTurn, "the session was released (%s)", reason)})
		}
		c.reader = nil
	}
	c.dropPending()
	c.phase = PhaseReleasing
	if c.life == LifeRunning {
		c.lifeTo(LifeStoppingChildren, StopWorkers)
	}
	return outcome
}

// FinishRelease persists the released event, always the session's last, and
// the final record. It returns the released event's seq.
func (c *Core) FinishRelease(now time.Time) uint64 {
	if c.phase != PhaseReleasing {
		return c.seq
	}
	switch {
	case c.failed:
		c.rec.Status = messages.StatusFailed
	case c.releaseReason == messages.ReleaseShutdown:
		c.rec.Status = messages.StatusOrphaned
	default:
		c.rec.Status = messages.StatusEnded
	}
	seq := c.emit(now, c.turn, messages.Event{Type: messages.EvReleased, ReleaseReason: c.releaseReason,
		Outcome: c.outcome, Note: c.releaseNote, Text: c.releaseWhy})
	c.touchMeta(now)
	c.phase = PhaseReleased
	return seq
}

// Outcome returns the verdict once release has begun.
func (c *Core) Outcome() messages.Outcome { return c.outcome }

func (c *Core) isEditTool(name string) bool {
	for _, n := range c.spec.Descriptor.EditToolNames {
		if n == name {
			return true
		}
	}
	return false
}

// editPath pulls the file path out of an edit tool's input, whatever the
// backend calls the field.
func editPath(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		return ""
	}
	for _, k := range []string{"file_path", "path", "filePath", "notebook_path"} {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func compactJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return ""
	}
	return cutText(string(b), 200)
}

func turnSummary(r messages.TurnResult) string {
	s := string(r.Kind)
	if r.State == messages.TurnInterrupted {
		s += " (interrupted)"
	}
	if r.TurnDiff != nil && r.TurnDiff.Summary != "" {
		s += "; " + r.TurnDiff.Summary
	}
	if t := firstNonEmpty(r.Message, r.Text); t != "" {
		s += ": " + t
	}
	return s
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
