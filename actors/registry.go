package actors

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/actors/session"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/supervise"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/learning/routing"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
)

// Messages from the Runtime to the registry.
type (
	regStart struct {
		scope string
		op    messages.Start
		reply chan<- session.Result[messages.StartResult]
		// sessionID and worktree are set when the session was isolated
		// before its start (isolate.go): the id names its branch.
		sessionID string
		worktree  *messages.Worktree
		// plan and provision are what capability curation made for the
		// start (provision.go), for planBackend.
		plan        *transports.Provision
		provision   *messages.Provision
		planBackend string
	}
	// regOp routes a session op; the session answers the op's own channel.
	regOp struct {
		scope     string
		sessionID string
		op        session.Op
	}
	regConstraints struct {
		scope string
		cons  *messages.ScopeConstraints // nil clears
		reply chan<- session.Result[int]
	}
	// regRelease releases every live session of scope (all scopes when
	// all is set) and answers once they are all gone.
	regRelease struct {
		scope  string
		all    bool
		reason messages.ReleaseReason
		reply  chan<- session.Result[int]
	}
	regLive struct {
		// inDir, when set, keeps only the sessions working in it or
		// around it (within, either way)
		inDir string
		reply chan<- session.Result[[]string]
	}
	// sessionGone: a session actor has fully stopped.
	sessionGone struct{ sessionID string }
	regResume   struct {
		scope string
		op    messages.Resume
		reply chan<- session.Result[messages.StartResult]
	}
	// regAdopt carries a record read for a resume back to the registry.
	regAdopt struct {
		regResume
		rec     messages.SessionRecord
		lastSeq uint64
		prov    curation.Result // the resumed run's capabilities
		// dangling is the turn the log shows started and never ended
		dangling int
	}
)

type liveEntry struct {
	pid   *actor.PID
	scope string
	cwd   string // the session's working directory, cleaned
	// provisioned: the session may have provisioned files to remove at
	// release (a plan was applied, or it was resumed: an earlier run's
	// plan). A fresh start without a plan has only its manifest there,
	// and reading the directory at every release was 1.7% of the CPU of
	// 10,000 sessions' turns, on the registry's one goroutine.
	provisioned bool
}

type releasedEntry struct {
	scope   string
	outcome messages.Outcome
}

type releaseWaiter struct {
	left  map[string]bool
	count int
	reply chan<- session.Result[int]
}

// registry routes ops to sessions, owns ownership scopes and their
// constraints, and places and releases sessions. Only it spawns sessions.
type registry struct {
	runtimeID string
	log       *slog.Logger
	leaseHeld func(runtimeID string) bool
	cfg       *config.Config
	backends  *transports.Registry
	store     store.Store
	// curate runs capability curation for a resumed run (nil: off); it is
	// called off the registry's goroutine.
	curate  func(ctx context.Context, sid, cwd, backend string) curation.Result
	capture diffcapture.Factory
	policy  supervise.Policy
	hooks   session.Hooks
	metrics *Metrics
	now     func() time.Time
	// onReleased is told each session whose released event is durable (the
	// learning loop records its outcome); it must not block.
	onReleased func(sessionID string)
	maxHeld    int
	giveUp     int

	live     map[string]liveEntry
	stopping map[string]string // released, actor still stopping: sid -> scope
	// waitingResumes are resumes of stopping sessions, retried once gone.
	waitingResumes map[string][]regResume
	released       map[string]releasedEntry
	releasedOrder  []string // released's ids, oldest first, for its bound
	constraints    map[string]messages.ScopeConstraints
	waiters        []*releaseWaiter
	closing        bool
	// crashes are the causes of sessions that panicked, by id, for the ops
	// that reach them afterwards
	crashes map[string]string
	// inject, when set, sees every message first (tests inject panics);
	// injectSession is each session's Options.Inject
	inject        func(msg any)
	injectSession func(sessionID, actor string, msg any)
	diffDeadline  time.Duration                      // session.Options.DiffDeadline; 0: its default
	procs         func(sessionID string) *proc.Group // the backends' process groups; nil: none
}

func (r *registry) Receive(c *actor.Context) {
	defer func() {
		if p := recover(); p != nil {
			// the message that panicked is answered too; then the Recover
			// middleware marks the registry failed and every later message
			// goes to failRegistryMessage
			failRegistryMessage(c.Message(), fmt.Sprint(p))
			r.failHeld(fmt.Sprint(p))
			panic(p)
		}
	}()
	if r.inject != nil {
		r.inject(c.Message())
	}
	switch m := c.Message().(type) {
	case actor.Started:
		r.live = map[string]liveEntry{}
		r.stopping = map[string]string{}
		r.waitingResumes = map[string][]regResume{}
		r.released = map[string]releasedEntry{}
		r.constraints = map[string]messages.ScopeConstraints{}
		r.crashes = map[string]string{}
	case regStart:
		r.start(c, m)
	case regResume:
		r.resume(c, m)
	case regAdopt:
		r.adopt(c, m)
	case regOp:
		r.route(c, m)
	case regConstraints:
		if m.cons == nil {
			delete(r.constraints, m.scope)
		} else {
			r.constraints[m.scope] = *m.cons
		}
		m.reply <- session.Result[int]{}
	case regRelease:
		r.release(c, m)
	case regLive:
		ids := make([]string, 0, len(r.live))
		dir := filepath.Clean(m.inDir)
		for id, e := range r.live {
			if m.inDir != "" && (e.cwd == "" || !sharesDir(e.cwd, dir)) {
				continue
			}
			ids = append(ids, id)
		}
		m.reply <- session.Result[[]string]{Val: ids}
	case session.Created:
		r.metrics.live.Inc()
	case session.Done:
		r.done(c, m)
	case sessionGone:
		delete(r.stopping, m.sessionID)
		delete(r.crashes, m.sessionID)
		r.forget(m.sessionID)
		for _, res := range r.waitingResumes[m.sessionID] {
			r.resume(c, res)
		}
		delete(r.waitingResumes, m.sessionID)
	case supervise.ChildFailed:
		r.sessionCrashed(c, m)
	case supervise.Undelivered:
		// an op that reached a session after it crashed: the session is
		// named after its id, and its cause was kept by sessionCrashed
		if op, ok := m.Message.(session.Op); ok {
			cause := r.crashes[m.Name]
			if cause == "" {
				cause = "it crashed"
			}
			op.Fail(session.FailedError("route", cause))
		}
	}
}

// failHeld answers every caller the registry holds (release waiters,
// resumes waiting for a stopping session) when it fails.
func (r *registry) failHeld(cause string) {
	for _, w := range r.waiters {
		failRegistryMessage(regRelease{reply: w.reply}, cause)
	}
	r.waiters = nil
	for _, rs := range r.waitingResumes {
		for _, m := range rs {
			failRegistryMessage(m, cause)
		}
	}
	r.waitingResumes = map[string][]regResume{}
}

// failRegistryMessage answers the caller of a message the registry will
// never handle (it panicked on it, or on an earlier one): every op fails fast
// with a typed error instead of waiting for its context. Notifications that
// have no caller are dropped.
func failRegistryMessage(msg any, cause string) {
	err := func(op string) error {
		return messages.Errorf(messages.CodeFailed, op, "the runtime's registry failed (%s); recreate the runtime", cause)
	}
	switch m := msg.(type) {
	case regStart:
		m.reply <- session.Result[messages.StartResult]{Err: err(messages.OpStart)}
	case regResume:
		m.reply <- session.Result[messages.StartResult]{Err: err(messages.OpResume)}
	case regAdopt:
		m.reply <- session.Result[messages.StartResult]{Err: err(messages.OpResume)}
	case regOp:
		m.op.Fail(err("route"))
	case session.Op:
		m.Fail(err("route"))
	case regConstraints:
		m.reply <- session.Result[int]{Err: err("set-scope-constraints")}
	case regRelease:
		m.reply <- session.Result[int]{Err: err("release")}
	case regLive:
		m.reply <- session.Result[[]string]{Err: err("live")}
	}
}

func (r *registry) start(c *actor.Context, m regStart) {
	if r.closing {
		m.reply <- session.Result[messages.StartResult]{Err: messages.Errorf(messages.CodeNotLive, messages.OpStart, "the runtime is shutting down")}
		return
	}
	if cons := r.constraints[m.scope]; cons.AdoptRecordID != "" {
		// a resumed delegation's first start adopts its record (one-shot)
		sid := cons.AdoptRecordID
		cons.AdoptRecordID = ""
		r.constraints[m.scope] = cons
		r.resume(c, regResume{scope: m.scope, reply: m.reply,
			op: messages.Resume{SessionID: sid, Brief: m.op.Brief, MaxPosture: m.op.MaxPosture, Takeover: true}})
		return
	}
	spec, t, err := resolveStart(m.op, r.constraints[m.scope], r.cfg, r.backends)
	if err != nil {
		r.metrics.startRejected.Inc()
		m.reply <- session.Result[messages.StartResult]{Err: err}
		return
	}
	spec.SessionID = cmp.Or(m.sessionID, messages.NewSessionID())
	spec.Worktree = m.worktree
	spec.Provision, spec.ProvisionMeta = m.plan, m.provision.Clone()
	if spec.ProvisionMeta != nil && spec.Descriptor.ID != m.planBackend {
		// the scope pinned another backend than the one provisioned for
		pm := spec.ProvisionMeta
		pm.Notes = append(pm.Notes, "provisioned for "+m.planBackend+", but the scope runs "+spec.Descriptor.ID+": nothing applied")
		pm.Ignored, pm.Applied, pm.TokenScopeNotes = append(pm.Ignored, pm.Applied...), nil, nil
		spec.Provision = nil
		releaseProvision(r.cfg.Home, spec.SessionID)
	}
	spec.OwnerScope = m.scope
	spec.Runtime = r.runtimeID
	r.spawn(c, spec, t, m.reply, nil, 0)
}

// spawn starts a session actor as a child of the registry.
func (r *registry) spawn(c *actor.Context, spec session.Spec, t transports.Transport, reply chan<- session.Result[messages.StartResult], adopt *messages.SessionRecord, lastSeq uint64) {
	var capt diffcapture.Capturer = diffcapture.Noop{}
	if r.capture != nil {
		capt = r.capture(spec.Cwd, spec.Descriptor)
	}
	if u, ok := capt.(interface{ UseScratchDirs(diffcapture.ScratchDirs) }); ok && r.procs != nil {
		// recorded with the session's processes: the next boot removes
		// the folders of a daemon that died (proc.Sweep)
		u.UseScratchDirs(r.procs(spec.SessionID).TempDir)
	}
	opts := session.Options{
		Spec: spec, Transport: t, Env: r.cfg.EnvList(), Store: r.store, Capturer: capt, Policy: r.policy,
		ShutdownTimeout: r.cfg.Supervision.ShutdownTimeout.D(), Lifetime: r.cfg.SessionLifetime.D(), StallAfter: r.cfg.StallAfter.D(),
		Registry: c.PID(), StartReply: reply, Now: r.now, Hooks: r.hooks, Logger: r.log,
		Adopt: adopt, LastSeq: lastSeq, MaxHeld: r.maxHeld, StoreGiveUp: r.giveUp, DiffDeadline: r.diffDeadline,
	}
	if procs, sid := r.procs, spec.SessionID; procs != nil {
		opts.Procs = func() *proc.Group { return procs(sid) }
	}
	if inj, sid := r.injectSession, spec.SessionID; inj != nil {
		opts.Inject = func(who string, msg any) { inj(sid, who, msg) }
	}
	pid := session.Spawn(c, opts)
	r.live[spec.SessionID] = liveEntry{pid: pid, scope: spec.OwnerScope, cwd: cleanCwd(spec.Cwd),
		provisioned: spec.Provision != nil || adopt != nil}
	delete(r.released, spec.SessionID)
	r.metrics.started.WithLabelValues(spec.Descriptor.ID).Inc()
}

// resume checks a resume request against the live sessions, then reads the
// record off the registry's goroutine and comes back with regAdopt.
func (r *registry) resume(c *actor.Context, m regResume) {
	const op = messages.OpResume
	fail := func(err error) { m.reply <- session.Result[messages.StartResult]{Err: err} }
	if r.closing {
		fail(messages.Errorf(messages.CodeNotLive, op, "the runtime is shutting down"))
		return
	}
	sid := m.op.SessionID
	if e, ok := r.live[sid]; ok {
		if e.scope != m.scope && !m.op.Takeover {
			fail(messages.Errorf(messages.CodeNotFound, op, "no session %s in this scope", sid))
			return
		}
		fail(messages.Errorf(messages.CodeAlreadyLive, op, "session %s is still live: stop it first", sid))
		return
	}
	if _, ok := r.stopping[sid]; ok {
		// released, actor still stopping: resume once it is gone
		r.waitingResumes[sid] = append(r.waitingResumes[sid], m)
		return
	}
	engine, self, st := c.Engine(), c.PID(), r.store
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rec, err := st.GetMeta(ctx, sid)
		if messages.IsCode(err, messages.CodeNotFound) {
			fail(messages.Errorf(messages.CodeNotFound, op, "no session %s", sid))
			return
		}
		if err != nil {
			fail(messages.AsError(op, err)) // corrupt, unavailable: said as such
			return
		}
		run := rec.LatestRun()
		if !m.op.Takeover && (run == nil || run.OwnerScopeID != m.scope) {
			fail(messages.Errorf(messages.CodeNotFound, op, "no session %s in this scope", sid))
			return
		}
		if rec.Status.Live() && run != nil && r.leaseHeld(run.Runtime) {
			fail(messages.Errorf(messages.CodeAlreadyLive, op, "session %s is live in another runtime (%s)", sid, run.Runtime))
			return
		}
		last, err := st.LastSeq(ctx, sid)
		if err != nil {
			fail(messages.AsError(op, err))
			return
		}
		dangling, err := danglingTurn(ctx, st, sid, rec, last)
		if err != nil {
			fail(messages.AsError(op, err))
			return
		}
		var prov curation.Result
		if r.curate != nil { // the run gets the project's capabilities as of now
			prov = r.curate(ctx, sid, rec.Cwd, rec.BackendID)
		}
		engine.Send(self, regAdopt{regResume: m, rec: rec, lastSeq: last, prov: prov, dangling: dangling})
	}()
}

// danglingTailEvents is how far back from a log's end danglingTurn looks:
// past the few events a crash and a boot sweep add after a turn's last.
const danglingTailEvents = 256

// danglingTurn is the turn rec's log shows started and never ended, 0 for
// none: the highest turn among the last events when it is past the rounds
// the record counts and has no turn_end (a turn's end is its last event,
// so it is in the tail whenever any event of the turn is).
func danglingTurn(ctx context.Context, st store.Store, sid string, rec messages.SessionRecord, last uint64) (int, error) {
	from := uint64(0)
	if last > danglingTailEvents {
		from = last - danglingTailEvents
	}
	evs, err := st.ReadEvents(ctx, sid, from, 0)
	if err != nil {
		return 0, err
	}
	top, ended := 0, false
	for _, e := range evs {
		if e.Turn > top {
			top, ended = e.Turn, false
		}
		if e.Turn == top && e.Event.Type == messages.EvTurnEnd {
			ended = true
		}
	}
	if top <= rec.RoundsElapsed || ended {
		return 0, nil
	}
	return top, nil
}

// adopt spawns the session that continues a record: same id, seq after the
// last persisted one, rounds continuing, a new run owned by the resumer.
func (r *registry) adopt(c *actor.Context, m regAdopt) {
	const op = messages.OpResume
	sid := m.op.SessionID
	if _, ok := r.live[sid]; ok {
		m.reply <- session.Result[messages.StartResult]{Err: messages.Errorf(messages.CodeAlreadyLive, op, "session %s is already live", sid)}
		return
	}
	t, err := r.backends.Get(m.rec.BackendID)
	if err != nil {
		m.reply <- session.Result[messages.StartResult]{Err: err}
		return
	}
	rec := m.rec
	brief := m.op.Brief
	if brief == "" {
		brief = "You are resuming an earlier session on this task. Check the current state of the workspace, then continue.\n\nThe task: " + rec.TaskBrief
	}
	resumeID := ""
	if run := rec.LatestRun(); run != nil && t.Descriptor().Resume != messages.ResumeNone {
		resumeID = run.ExternalSessionID
	}
	// the resuming scope's constraints, exactly as a start gets them
	lim, err := resolveResume(rec, m.op.MaxPosture, r.constraints[m.scope], r.cfg, t.Descriptor())
	if err != nil {
		r.metrics.startRejected.Inc()
		m.reply <- session.Result[messages.StartResult]{Err: err}
		return
	}
	spec := session.Spec{SessionID: sid, Descriptor: t.Descriptor(), Cwd: rec.Cwd, Model: routing.ResolveModel(t.Descriptor(), rec.Model), Effort: rec.Effort,
		MaxPosture: lim.maxPosture, Posture: lim.posture, MaxRounds: lim.maxRounds, MaxCostUSD: lim.maxCost, AllowedTools: lim.tools,
		Brief: brief, TaskTags: rec.TaskTags, OwnerScope: m.scope, ResumeExternalID: resumeID, Runtime: r.runtimeID,
		AdoptWarnings: lim.warnings, DanglingTurn: m.dangling, Provision: m.prov.Plan, ProvisionMeta: m.prov.Meta, Network: resumeNetwork(rec, r.cfg, t.Descriptor().ID)}
	r.spawn(c, spec, t, m.reply, &rec, m.lastSeq)
}

func (r *registry) route(c *actor.Context, m regOp) {
	if e, ok := r.live[m.sessionID]; ok && e.scope == m.scope {
		if rel, isRel := m.op.(session.OpRelease); isRel && rel.Reason == "" {
			rel.Reason = messages.ReleaseExplicit
			m.op = rel
		}
		c.Send(e.pid, m.op)
		return
	}
	if rel, ok := r.released[m.sessionID]; ok && rel.scope == m.scope {
		r.notLiveRecord(m, rel.outcome)
		return
	}
	if cancel, ok := m.op.(session.OpCancelRead); ok {
		// the session is gone; its reader was answered when it released
		cancel.Reply <- session.Result[bool]{Val: false}
		return
	}
	// Not in memory: ask the store, off the registry's goroutine. A record
	// owned by another scope is reported exactly like a missing one.
	st, op, scope, sid := r.store, m, m.scope, m.sessionID
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rec, err := st.GetMeta(ctx, sid)
		if err != nil || rec.LatestRun() == nil || rec.LatestRun().OwnerScopeID != scope {
			op.op.Fail(messages.Errorf(messages.CodeNotFound, "route", "no session %s in this scope", sid))
			return
		}
		if rec.Status.Live() && r.leaseHeld(rec.LatestRun().Runtime) {
			op.op.Fail(messages.Errorf(messages.CodeConflict, "route",
				"session %s is live in another runtime (%s): drive it there", sid, rec.LatestRun().Runtime))
			return
		}
		r.notLiveRecord(op, rec.Outcome)
	}()
}

// notLiveRecord answers an op aimed at a released session: stop is
// idempotent, everything else is not_live.
func (r *registry) notLiveRecord(m regOp, outcome messages.Outcome) {
	if rel, ok := m.op.(session.OpRelease); ok && rel.Reply != nil {
		rel.Reply <- session.Result[messages.StopResult]{Val: messages.StopResult{OK: true, AlreadyStopped: true, Outcome: outcome}}
		return
	}
	m.op.Fail(messages.Errorf(messages.CodeNotLive, "route", "session %s is not live", m.sessionID))
}

func (r *registry) release(c *actor.Context, m regRelease) {
	if m.all {
		r.closing = true
	} else {
		delete(r.constraints, m.scope)
	}
	w := &releaseWaiter{left: map[string]bool{}, reply: m.reply}
	for id, e := range r.live {
		if m.all || e.scope == m.scope {
			w.left[id] = true
			c.Send(e.pid, session.OpRelease{Reason: m.reason})
		}
	}
	// sessions already released but still stopping count too: the caller
	// (Close above all) must not go on while their actors run
	for id, scope := range r.stopping {
		if m.all || scope == m.scope {
			w.left[id] = true
		}
	}
	w.count = len(w.left)
	if w.count == 0 {
		m.reply <- session.Result[int]{}
		return
	}
	r.waiters = append(r.waiters, w)
}

func (r *registry) done(c *actor.Context, m session.Done) {
	e, ok := r.live[m.SessionID]
	if !ok {
		return
	}
	delete(r.live, m.SessionID)
	r.stopping[m.SessionID] = e.scope
	if e.provisioned {
		releaseProvision(r.cfg.Home, m.SessionID) // every release path of one ends here
	}
	if m.Abandoned {
		r.log.Warn("session abandoned at shutdown before its release was durable; the boot sweep will mark it orphaned", "session", m.SessionID)
		r.metrics.live.Dec()
	} else if m.Err == nil {
		r.remember(m.SessionID, releasedEntry{scope: e.scope, outcome: m.Outcome})
		r.metrics.live.Dec()
		r.metrics.released.WithLabelValues(string(m.Reason)).Inc()
		if r.onReleased != nil {
			r.onReleased(m.SessionID)
		}
	}
	r.stopSession(c, m.SessionID, e.pid, nil)
}

// stopSession poisons a session actor (the registry is the only one that
// does) and reports sessionGone once it has stopped; then runs after, if any.
func (r *registry) stopSession(c *actor.Context, sid string, pid *actor.PID, after func()) {
	poisoned := c.Engine().Poison(pid)
	engine, self := c.Engine(), c.PID()
	go func() {
		<-poisoned.Done()
		if after != nil {
			after()
		}
		engine.Send(self, sessionGone{sessionID: sid})
	}()
}

// maxRemembered bounds the in-memory answers for released sessions; older
// ones are answered from the store (slower, same answer), so a long-lived
// daemon does not grow without bound.
const maxRemembered = 10000

// remember keeps a released session's owner and verdict for quick answers.
func (r *registry) remember(sid string, e releasedEntry) {
	if _, ok := r.released[sid]; !ok {
		r.releasedOrder = append(r.releasedOrder, sid)
	}
	r.released[sid] = e
	for len(r.releasedOrder) > maxRemembered {
		delete(r.released, r.releasedOrder[0])
		r.releasedOrder = r.releasedOrder[1:]
	}
}

// forget removes a gone session from the release waiters, answering those
// whose sessions are all gone.
func (r *registry) forget(sid string) {
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		delete(w.left, sid)
		if len(w.left) == 0 {
			w.reply <- session.Result[int]{Val: w.count}
			continue
		}
		kept = append(kept, w)
	}
	r.waiters = kept
}

// sessionCrashed handles a session actor that panicked: its state cannot be
// trusted, so it is stopped and its record marked failed with a released
// event appended after the last persisted one.
func (r *registry) sessionCrashed(c *actor.Context, m supervise.ChildFailed) {
	sid := m.Name
	r.log.Error("session actor panicked", "session", sid, "reason", m.Reason)
	e, ok := r.live[sid]
	if !ok || !e.pid.Equals(m.PID) {
		return
	}
	r.crashes[sid] = m.Reason
	delete(r.live, sid)
	r.stopping[sid] = e.scope
	r.remember(sid, releasedEntry{scope: e.scope, outcome: messages.OutcomeFailed})
	r.metrics.live.Dec()
	r.metrics.released.WithLabelValues(string(messages.ReleaseFailed)).Inc()
	st, now := r.store, r.now
	r.stopSession(c, sid, e.pid, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := markFailed(ctx, st, sid, now(), "the session actor crashed: "+m.Reason); err != nil {
			r.log.Error("marking a crashed session failed", "session", sid, "err", err)
		} else if r.onReleased != nil {
			r.onReleased(sid)
		}
	})
}

// markFailed appends `released{failed}` after the last persisted event and
// sets the record's status, for a session whose actor is gone.
func markFailed(ctx context.Context, st store.Store, sid string, now time.Time, why string) error {
	rec, err := st.GetMeta(ctx, sid)
	if err != nil {
		return err
	}
	last, err := st.LastSeq(ctx, sid)
	if err != nil {
		return err
	}
	ev := messages.PersistedEvent{Seq: last + 1, At: now, Event: messages.Event{Type: messages.EvReleased,
		ReleaseReason: messages.ReleaseFailed, Outcome: messages.OutcomeFailed, Text: why}}
	if err := st.Append(ctx, sid, []messages.PersistedEvent{ev}); err != nil {
		return err
	}
	rec.Status, rec.Outcome, rec.UpdatedAt = messages.StatusFailed, messages.OutcomeFailed, now
	return st.PutMeta(ctx, rec)
}

// sweepOrphans marks every record still running or idle as orphaned, with
// an event: their owning process died before releasing them. A session a
// driver opened (its run's owner is a delegation's scope) is released
// instead (released{sweep}, outcome aborted, its provisioned files
// removed): its driver died with the process, and no driven agent outlives
// its driver, not even as a resumable orphan; released is told each such
// session once its release is durable (its outcome is then recorded: no
// event listener runs at boot). Failures are logged and never block boot.
func sweepOrphans(ctx context.Context, st store.Store, home string, now time.Time, alive func(runtimeID string) bool, log *slog.Logger, released func(sessionID string)) (int, error) {
	recs, err := st.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		if !rec.Status.Live() {
			continue
		}
		run := rec.LatestRun()
		if run != nil && alive(run.Runtime) {
			continue // another live process drives it
		}
		last, err := st.LastSeq(ctx, rec.SessionID)
		if err != nil {
			log.Warn("orphan sweep: cannot read log", "session", rec.SessionID, "err", err)
			continue
		}
		ev := messages.PersistedEvent{Seq: last + 1, At: now, Event: messages.Event{Type: messages.EvOrphaned,
			Text: fmt.Sprintf("the process that owned this session (status %s) ended without releasing it", rec.Status)}}
		status := messages.StatusOrphaned
		dl, driven := "", false
		if run != nil {
			dl, driven = driver.IDOfScope(run.OwnerScopeID)
		}
		if driven {
			ev.Event = messages.Event{Type: messages.EvReleased, ReleaseReason: messages.ReleaseSweep, Outcome: messages.OutcomeAborted,
				Text: fmt.Sprintf("released at the next start: its driver (delegation %s) died with its process while this session was %s; no driven agent outlives its driver", dl, rec.Status)}
			status = messages.StatusEnded
		}
		if err := st.Append(ctx, rec.SessionID, []messages.PersistedEvent{ev}); err != nil {
			log.Warn("orphan sweep: cannot append", "session", rec.SessionID, "err", err)
			continue
		}
		rec.Status, rec.UpdatedAt = status, now
		if driven {
			rec.Outcome = messages.OutcomeAborted
		}
		if err := st.PutMeta(ctx, rec); err != nil {
			log.Warn("orphan sweep: cannot write record", "session", rec.SessionID, "err", err)
			continue
		}
		if driven {
			releaseProvision(home, rec.SessionID)
			log.Info("released a dead driver's session", "session", rec.SessionID, "delegation", dl)
			if released != nil {
				released(rec.SessionID)
			}
		}
		n++
	}
	return n, nil
}
