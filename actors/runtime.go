package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/actors/session"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/actors/supervise"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/learning/loop"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/codex"
	"github.com/codesession/codesession/transports/copilot"
	"github.com/codesession/codesession/transports/droid"
	"github.com/codesession/codesession/transports/gemini"
	"github.com/codesession/codesession/transports/grok"
	"github.com/codesession/codesession/transports/kilo"
	"github.com/codesession/codesession/transports/native"
	"github.com/codesession/codesession/transports/opencode"
	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/qwen"
	"github.com/codesession/codesession/transports/script"
)

// Option adjusts what New wires in.
type Option func(*options)

type options struct {
	store    store.Store
	backends *transports.Registry
	metrics  prometheus.Registerer
	capture  diffcapture.Factory
	now      func() time.Time
	onEvent  func(sessionID string, ev messages.PersistedEvent)
	logger   *slog.Logger

	learning    *loop.Loop
	learningJob bool
	noLearning  bool
	maxHeld     int
	giveUp      int

	// tests: see every registry (session) message first, and may panic
	injectRegistry func(msg any)
	injectSession  func(sessionID, actor string, msg any)
	diffDeadline   time.Duration // tests: session.Options.DiffDeadline
	driverLoop     *native.Transport
	curator        *curation.Curator
	noCuration     bool
}

// WithPersistLimits sets how many unacknowledged events a session holds
// before it stops reading its backend (maxHeld, session.DefaultMaxHeld when
// 0) and how many failed store writes in a row release it with reason store
// (giveUp, session.DefaultStoreGiveUp when 0).
func WithPersistLimits(maxHeld, giveUp int) Option {
	return func(o *options) { o.maxHeld, o.giveUp = maxHeld, giveUp }
}

// WithStore uses s instead of the file store under the config's home.
func WithStore(s store.Store) Option { return func(o *options) { o.store = s } }

// WithBackends uses r instead of DefaultBackends().
func WithBackends(r *transports.Registry) Option { return func(o *options) { o.backends = r } }

// WithMetrics registers the runtime's metrics into reg.
func WithMetrics(reg prometheus.Registerer) Option { return func(o *options) { o.metrics = reg } }

// WithDiffCapture sets how each session's turns are diffed (default
// diffcapture.GitFactory: git in a work tree, else the edit-tool paths).
func WithDiffCapture(f diffcapture.Factory) Option { return func(o *options) { o.capture = f } }

// WithClock sets the clock that stamps events and records.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithEventListener sees every event of every session once it is durable
// (an event it is handed survives a crash), on the session's goroutine: it
// must not block (the live-event seam).
func WithEventListener(f func(sessionID string, ev messages.PersistedEvent)) Option {
	return func(o *options) { o.onEvent = f }
}

// WithLogger sets the runtime's logger. Without it the runtime logs nothing:
// an embedded library must not write through the process's default logger
// unless asked to (pass slog.Default() for that).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// DefaultBackends returns a registry of every built-in backend.
func DefaultBackends() *transports.Registry {
	return transports.NewRegistry(script.New(), claudecode.New(), native.New(), codex.New(), opencode.New(), copilot.New(), gemini.New(), droid.New(), grok.New(), qwen.New(), kilo.New())
}

// Runtime is the embedded API. Create it with New; Close it when done.
type Runtime struct {
	id       string
	lease    *lease
	cfg      config.Config
	engine   *actor.Engine
	registry *actor.PID
	store    store.Store
	backends *transports.Registry
	metrics  *Metrics
	tokens   atomic.Uint64
	closed   atomic.Bool
	learn    *loop.Loop         // nil when the learning loop could not open
	curator  *curation.Curator  // nil: curation off
	stopJob  context.CancelFunc // the nightly lesson job, when running
	log      *slog.Logger
	kit      *proc.Kit // the backends' processes: cgroups, boot-sweep records
	// registryFailed holds the registry's panic, once it has panicked
	registryFailed *atomic.Pointer[string]

	// delegations (delegate.go); nil delegator when unavailable
	delegator       *driver.Delegator
	driverMetrics   *driver.Metrics
	delegationMu    sync.Mutex
	delegationHooks []func(driver.Record)

	closeOnce sync.Once
	closeDone chan struct{} // closed when the shutdown has finished
	closeErr  error
}

// New validates cfg, opens the store, marks orphaned records and starts the
// registry.
func New(cfg config.Config, opts ...Option) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{now: time.Now, logger: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	log := o.logger
	if o.backends == nil {
		o.backends = DefaultBackends()
		sizeWarmPools(o.backends, cfg.WarmPool)
	}
	if o.capture == nil {
		o.capture = diffcapture.GitFactory
	}
	if o.store == nil {
		fs, err := filestore.Open(cfg.Home, filestore.WithLogger(log))
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		o.store = fs
	}
	id := newRuntimeID()
	ls, err := takeLease(cfg.Home, id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alive := func(rid string) bool { return rid == id || leaseHeld(cfg.Home, rid) }
	// the sessions the sweep releases (a dead driver's) get their outcome
	// recorded once the learning loop is up, whoever opened it
	var swept []string
	if n, err := sweepOrphans(ctx, o.store, cfg.Home, o.now(), alive, log, func(sid string) { swept = append(swept, sid) }); err != nil {
		log.Warn("orphan sweep failed", "err", err)
	} else if n > 0 {
		log.Info("marked orphaned sessions", "count", n)
	}
	loop := o.driverLoop
	if loop == nil {
		loop = driverLoopOf(o.backends)
	}
	var kit *proc.Kit
	o.backends, kit = containBackends(cfg, id, o.backends, alive, log)
	for _, rp := range o.store.Repairs() {
		log.Warn("store repaired a torn event log", "session", rp.SessionID, "offset", rp.Offset, "bytes", rp.Bytes)
	}
	engine, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		ls.release()
		return nil, err
	}
	m := newMetrics(o.metrics)
	if o.metrics != nil {
		o.metrics.MustRegister(warmPoolCollector{backends: o.backends})
	}
	rt := &Runtime{id: id, lease: ls, cfg: cfg, engine: engine, store: o.store, backends: o.backends, metrics: m, log: log, kit: kit}
	rt.driverMetrics = driver.NewMetrics(o.metrics)
	rt.learn = o.learning
	if !o.noCuration && cfg.Home != "" {
		rt.curator = cmp.Or(o.curator, curation.NewCurator(cfg.Home, log, cfg.Capabilities.Fetch, cfg.Capabilities.GitHubAPI))
	}
	if rt.learn == nil && !o.noLearning {
		rt.learn = openLearning(cfg, o.store, o.backends, o.metrics, log)
	}
	if rt.learn != nil {
		for _, sid := range swept {
			rt.learn.Released(sid)
		}
	}
	if rt.learn != nil && o.learningJob {
		rt.stopJob = startLearningJob(rt.learn)
	}
	onEvent := o.onEvent
	hooks := session.Hooks{
		Event: func(sessionID string, ev messages.PersistedEvent) {
			if ev.Event.Type == messages.EvTurnDiff && ev.Event.Diff != nil && ev.Event.Diff.Warning != "" {
				m.diffFailures.Inc()
			}
			decisionLog(log, sessionID, &ev)
			if onEvent != nil {
				onEvent(sessionID, ev)
			}
		},
		Result: func(r messages.TurnResult) {
			m.readTurn.WithLabelValues(string(r.Kind)).Inc()
			log.Info("code_session_read_turn", "session", r.SessionID, "turn", r.Turn, "kind", r.Kind)
		},
		Supervision: func(ev supervise.Event) {
			switch ev.Kind {
			case supervise.EventRestarted:
				m.restarts.WithLabelValues(ev.Child).Inc()
			case supervise.EventAbandoned:
				m.abandoned.WithLabelValues(ev.Child).Inc()
			}
		},
		Append: func(d time.Duration, err error) {
			m.appendLatency.Observe(d.Seconds())
			if err != nil {
				m.persistErrors.Inc()
			}
		},
		Released: func(rec messages.SessionRecord, _ messages.ReleaseReason) {
			m.rounds.Observe(float64(rec.RoundsElapsed))
			m.duration.Observe(float64(rec.UpdatedAt.Sub(rec.CreatedAt).Milliseconds()))
		},
	}
	reg := &registry{runtimeID: id, log: log, leaseHeld: func(rid string) bool { return rid != id && leaseHeld(cfg.Home, rid) }, cfg: &rt.cfg, backends: o.backends, store: o.store, capture: o.capture,
		policy: policyFrom(cfg.Supervision), hooks: hooks, metrics: m, now: o.now, maxHeld: o.maxHeld, giveUp: o.giveUp}
	if rt.learn != nil {
		reg.onReleased = rt.learn.Released
	}
	if rt.curator != nil {
		reg.curate = rt.curateResume
	}
	reg.inject, reg.injectSession, reg.diffDeadline = o.injectRegistry, o.injectSession, o.diffDeadline
	if kit != nil {
		reg.procs = kit.Group
	}
	// A failed registry is not restarted: its routing table (which scope owns
	// which session, who waits for which release) is not recoverable from
	// the sessions, so every op fails fast with a typed error instead, and
	// Close still stops the sessions and orphans their records.
	var failure atomic.Pointer[string]
	rt.registryFailed = &failure
	rt.registry = supervise.Spawn(engine, func() actor.Receiver { return reg }, "registry",
		supervise.RecoverOptions{Name: "registry", OnFailure: func(f supervise.ChildFailed) {
			failure.Store(&f.Reason)
			log.Error("registry panicked; every op fails until the runtime is recreated", "reason", f.Reason)
		}, OnUndelivered: func(u supervise.Undelivered) {
			cause := "an earlier panic"
			if p := failure.Load(); p != nil {
				cause = *p
			}
			failRegistryMessage(u.Message, cause)
		}}, actor.WithID("registry"))
	rt.openDelegator(loop)
	return rt, nil
}

func policyFrom(s config.Supervision) supervise.Policy {
	p := supervise.DefaultPolicy()
	p.Intensity = s.MaxRestarts
	p.Window = s.Window.D()
	p.Backoff.InitialInterval = s.BackoffInitial.D()
	p.Backoff.MaxInterval = s.BackoffMax.D()
	if s.Strategy == "rest-for-one" {
		p.Strategy = supervise.RestForOne
	}
	return p
}

// Store returns the runtime's store (read it for records and events).
func (r *Runtime) Store() store.Store { return r.store }

// Backends returns the runtime's backend registry.
func (r *Runtime) Backends() *transports.Registry { return r.backends }

// BackendEnv is a copy of the environment the configuration gives every
// backend (config.Config.Env).
func (r *Runtime) BackendEnv() map[string]string { return maps.Clone(r.cfg.Env) }

func (r *Runtime) check(op string) error {
	if r.closed.Load() {
		return messages.Errorf(messages.CodeNotLive, op, "the runtime is closed")
	}
	return nil
}

// await waits for an op's reply; ctx ending first is a timeout.
func await[T any](ctx context.Context, op string, ch <-chan session.Result[T]) (T, error) {
	select {
	case res := <-ch:
		return res.Val, res.Err
	case <-ctx.Done():
		var zero T
		return zero, ctxError(ctx, op)
	}
}

// ctxError is the typed error for a context that ended: a deadline or a
// cancellation, said as such.
func ctxError(ctx context.Context, op string) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return messages.Wrap(messages.CodeTimeout, op, ctx.Err(), "cancelled before the session answered")
	}
	return messages.Wrap(messages.CodeTimeout, op, ctx.Err(), "the deadline passed before the session answered")
}

// resolveCwd makes a session's working directory absolute and checks that
// it is a directory; empty means the process's working directory.
func resolveCwd(cwd string) (string, error) {
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot read the working directory")
		}
		return wd, nil
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", messages.FieldError(messages.OpStart, "cwd", "not a usable path")
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return "", messages.FieldError(messages.OpStart, "cwd", "%s is not a directory", abs)
	}
	return abs, nil
}

func (r *Runtime) count(op string, err error) {
	outcome := "ok"
	switch messages.ErrorCode(err) {
	case "":
	case messages.CodeInternal, messages.CodeTimeout:
		outcome = "error"
	default:
		outcome = "rejected"
	}
	r.metrics.ops.WithLabelValues(op, outcome).Inc()
}

// Start opens a session owned by scope. It returns once the session's record
// is durable; the first turn is then running.
func (r *Runtime) Start(ctx context.Context, scope string, op messages.Start) (res messages.StartResult, err error) {
	defer func() {
		r.count(messages.OpStart, err)
		logRejection(r.log, messages.OpStart, err)
		if err == nil && r.learn != nil {
			r.learn.Started(res.SessionID)
		}
	}()
	if err := r.check(messages.OpStart); err != nil {
		return res, err
	}
	if err := op.Validate(); err != nil {
		return res, err
	}
	cwd, err := resolveCwd(op.Cwd)
	if err != nil {
		return res, err
	}
	op.Cwd = cwd
	iso, err := r.prepareStart(ctx, &op) // isolate.go
	if err != nil {
		return res, err
	}
	sid := cmp.Or(iso.sessionID, messages.NewSessionID())
	prov := r.curate(ctx, sid, op) // provision.go: before the registry, off its goroutine
	ch := make(chan session.Result[messages.StartResult], 1)
	r.engine.Send(r.registry, regStart{scope: scope, op: op, reply: ch, sessionID: sid, worktree: iso.worktree,
		plan: prov.Plan, provision: prov.Meta, planBackend: cmp.Or(op.Backend, r.cfg.DefaultBackend)})
	res, err = await(ctx, messages.OpStart, ch)
	if err != nil && !messages.IsCode(err, messages.CodeTimeout) {
		iso.undo() // refused: no session will use it
		r.unprovision(context.WithoutCancel(ctx), sid, prov)
	}
	if err == nil {
		res.Worktree, res.Warnings = iso.worktree, iso.warnings
		r.writeManifest(ctx, sid, op, prov)
	}
	return res, err
}

// sessionOp is the one path of the ops a session answers (answer, guide,
// set-posture, interrupt, stop): the runtime must be open and op valid; the
// session op that mk builds around a fresh reply channel is routed, and its
// one answer awaited (ctx ending first is a timeout).
func sessionOp[T any](ctx context.Context, r *Runtime, name, scope, sid string, op interface{ Validate() error }, mk func(chan<- session.Result[T]) session.Op) (T, error) {
	var zero T
	if err := r.check(name); err != nil {
		return zero, err
	}
	if err := op.Validate(); err != nil {
		return zero, err
	}
	ch := make(chan session.Result[T], 1)
	r.route(scope, sid, mk(ch))
	return await(ctx, name, ch)
}

func (r *Runtime) route(scope, sid string, op session.Op) {
	r.engine.Send(r.registry, regOp{scope: scope, sessionID: sid, op: op})
}

// ReadTurn blocks until the session's next result: one of turn_complete,
// clarification, ended, error, max_rounds. When ctx ends first the read is
// withdrawn (timeout); a result that reaches a caller whose ctx has ended
// (the client hung up as it arrived) is given back to the session, at the
// head of its queue, for the next read: it is consumed only when delivered.
func (r *Runtime) ReadTurn(ctx context.Context, scope string, op messages.ReadTurn) (messages.TurnResult, error) {
	return r.readTurn(ctx, scope, op, nil)
}

// ReadTurnTo is ReadTurn for a caller that passes the result on and can
// tell when that failed (the control plane, whose client may be gone
// before the answer is written): deliver gets the result, and when it
// returns an error the result is given back to the session, at the head
// of its queue, for the next read, and ReadTurnTo returns that error.
// deliver is called only with a result; an error of the read itself is
// returned without it.
func (r *Runtime) ReadTurnTo(ctx context.Context, scope string, op messages.ReadTurn, deliver func(messages.TurnResult) error) error {
	_, err := r.readTurn(ctx, scope, op, deliver)
	return err
}

func (r *Runtime) readTurn(ctx context.Context, scope string, op messages.ReadTurn, deliver func(messages.TurnResult) error) (res messages.TurnResult, err error) {
	defer func() { r.count(messages.OpReadTurn, err) }()
	if err := r.check(messages.OpReadTurn); err != nil {
		return res, err
	}
	if err := op.Validate(); err != nil {
		return res, err
	}
	token := r.tokens.Add(1)
	ch := make(chan session.Result[messages.TurnResult], 1)
	r.route(scope, op.SessionID, session.OpReadTurn{Token: token, Op: op, Reply: ch})
	// delivered hands over a result, unless the caller is gone by now or
	// deliver says it could not pass it on
	delivered := func(out session.Result[messages.TurnResult]) (messages.TurnResult, error) {
		if out.Err != nil {
			return res, out.Err
		}
		if ctx.Err() != nil {
			r.route(scope, op.SessionID, session.OpUnread{Token: token})
			return res, ctxError(ctx, messages.OpReadTurn)
		}
		if deliver != nil {
			if err := deliver(out.Val); err != nil {
				r.route(scope, op.SessionID, session.OpUnread{Token: token})
				return res, err
			}
		}
		return out.Val, nil
	}
	select {
	case out := <-ch:
		return delivered(out)
	case <-ctx.Done():
	}
	cancelCh := make(chan session.Result[bool], 1)
	r.route(scope, op.SessionID, session.OpCancelRead{Token: token, Reply: cancelCh})
	wait := time.NewTimer(r.cfg.Supervision.ShutdownTimeout.D())
	defer wait.Stop()
	select {
	case c := <-cancelCh:
		if c.Err == nil && c.Val {
			return res, ctxError(ctx, messages.OpReadTurn)
		}
	case out := <-ch:
		return delivered(out)
	case <-wait.C:
		return res, ctxError(ctx, messages.OpReadTurn)
	}
	// the session answered before it saw the cancel: the answer is coming,
	// and goes back to the session
	select {
	case out := <-ch:
		return delivered(out)
	case <-wait.C:
		return res, ctxError(ctx, messages.OpReadTurn)
	}
}

// Answer resolves the session's pending clarification.
func (r *Runtime) Answer(ctx context.Context, scope string, op messages.Answer) (res messages.AnswerResult, err error) {
	defer func() {
		r.count(messages.OpAnswer, err)
		if err == nil {
			r.metrics.answers.WithLabelValues(fmt.Sprint(op.Decision.Allows())).Inc()
		}
	}()
	return sessionOp(ctx, r, messages.OpAnswer, scope, op.SessionID, &op, func(ch chan<- session.Result[messages.AnswerResult]) session.Op {
		return session.OpAnswer{Op: op, Reply: ch}
	})
}

// Guide sends guidance (steer, queue or interrupt).
func (r *Runtime) Guide(ctx context.Context, scope string, op messages.Guide) (res messages.OKResult, err error) {
	defer func() { r.count(messages.OpGuide, err) }()
	return sessionOp(ctx, r, messages.OpGuide, scope, op.SessionID, &op, func(ch chan<- session.Result[messages.OKResult]) session.Op {
		return session.OpGuide{Op: op, Reply: ch}
	})
}

// SetPosture changes the session's posture; above its ceiling is
// ceiling_exceeded.
func (r *Runtime) SetPosture(ctx context.Context, scope string, op messages.SetPosture) (res messages.SetPostureResult, err error) {
	defer func() {
		r.count(messages.OpSetPosture, err)
		if err == nil {
			r.metrics.postureChanges.WithLabelValues("ok").Inc()
		} else if messages.IsCode(err, messages.CodeCeilingExceeded) {
			r.metrics.postureChanges.WithLabelValues("rejected").Inc()
			logRejection(r.log, messages.OpSetPosture, err)
		}
	}()
	return sessionOp(ctx, r, messages.OpSetPosture, scope, op.SessionID, &op, func(ch chan<- session.Result[messages.SetPostureResult]) session.Op {
		return session.OpSetPosture{Op: op, Reply: ch}
	})
}

// Interrupt aborts the running turn; it ends `interrupted`.
func (r *Runtime) Interrupt(ctx context.Context, scope string, op messages.Interrupt) (res messages.OKResult, err error) {
	defer func() { r.count(messages.OpInterrupt, err) }()
	return sessionOp(ctx, r, messages.OpInterrupt, scope, op.SessionID, &op, func(ch chan<- session.Result[messages.OKResult]) session.Op {
		return session.OpInterrupt{Reply: ch}
	})
}

// Stop releases the session with an optional verdict. It is idempotent:
// stopping a released session of this scope returns alreadyStopped.
func (r *Runtime) Stop(ctx context.Context, scope string, op messages.Stop) (res messages.StopResult, err error) {
	defer func() { r.count(messages.OpStop, err) }()
	return sessionOp(ctx, r, messages.OpStop, scope, op.SessionID, &op, func(ch chan<- session.Result[messages.StopResult]) session.Op {
		return session.OpRelease{Reason: messages.ReleaseExplicit, Outcome: op.Outcome, Note: op.Note, Reply: ch}
	})
}

// Resume revives an ended, failed or orphaned session under its own id
// (seed 000 §5): the record gets a new run owned by scope, the event log
// continues gaplessly after its last persisted seq (even across a restart),
// rounds continue, and the backend resumes its own session where it can.
// not_found when there is no such record (in this scope, unless Takeover);
// already_live when it is still live.
func (r *Runtime) Resume(ctx context.Context, scope string, op messages.Resume) (res messages.StartResult, err error) {
	defer func() {
		r.count(messages.OpResume, err)
		if err == nil && r.learn != nil {
			r.learn.Started(res.SessionID)
		}
	}()
	if err := r.check(messages.OpResume); err != nil {
		return res, err
	}
	if err := op.Validate(); err != nil {
		return res, err
	}
	ch := make(chan session.Result[messages.StartResult], 1)
	r.engine.Send(r.registry, regResume{scope: scope, op: op, reply: ch})
	return await(ctx, messages.OpResume, ch)
}

// ListBackends returns every backend's descriptor and a live probe.
func (r *Runtime) ListBackends(ctx context.Context, scope string) (res messages.ListBackendsResult, err error) {
	defer func() { r.count(messages.OpListBackends, err) }()
	ids := r.backends.IDs()
	res.Backends = make([]messages.BackendListing, len(ids))
	done := make(chan struct{}, len(ids))
	for i, id := range ids {
		t, gerr := r.backends.Get(id)
		if gerr != nil {
			return res, gerr
		}
		res.Backends[i].Descriptor = t.Descriptor()
		r.annotateListing(&res.Backends[i])
		go func() {
			// a probe that panics degrades to probe-failed, never fails the op
			defer func() {
				if p := recover(); p != nil {
					res.Backends[i].Availability = messages.Availability{Reason: fmt.Sprintf("probe failed: %v", p), CheckedAt: time.Now()}
				}
				done <- struct{}{}
			}()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			res.Backends[i].Availability = t.Probe(pctx)
		}()
	}
	for range ids {
		<-done
	}
	return res, nil
}

// SetScopeConstraints registers constraints for the sessions scope starts
// from now on.
func (r *Runtime) SetScopeConstraints(ctx context.Context, scope string, c messages.ScopeConstraints) error {
	if err := c.Validate(); err != nil {
		return err
	}
	ch := make(chan session.Result[int], 1)
	r.engine.Send(r.registry, regConstraints{scope: scope, cons: &c, reply: ch})
	_, err := await(ctx, "set-scope-constraints", ch)
	return err
}

// ReleaseScope releases every session scope owns (reason sweep), clears its
// constraints and returns how many sessions it released once they are gone.
func (r *Runtime) ReleaseScope(ctx context.Context, scope string) (int, error) {
	ch := make(chan session.Result[int], 1)
	r.engine.Send(r.registry, regRelease{scope: scope, reason: messages.ReleaseSweep, reply: ch})
	return await(ctx, "release-scope", ch)
}

// LiveSessions lists the ids of live sessions (any scope), for operators.
func (r *Runtime) LiveSessions(ctx context.Context) ([]string, error) {
	ch := make(chan session.Result[[]string], 1)
	r.engine.Send(r.registry, regLive{reply: ch})
	return await(ctx, "live", ch)
}

// Close releases every live session (reason shutdown: their records become
// orphaned, resumable later), stops the registry and closes the store. The
// store and the lease are closed only once every session is gone, never
// under a running one: when ctx ends first, Close returns a timeout and the
// shutdown finishes in the background (a session whose release is not
// durable by its shutdown deadline is abandoned to the boot sweep). Every
// Close, concurrent or later, waits for the one shutdown and returns its
// result.
func (r *Runtime) Close(ctx context.Context) error {
	r.closed.Store(true)
	r.closeOnce.Do(func() {
		r.closeDone = make(chan struct{})
		go r.shutdown()
	})
	select {
	case <-r.closeDone:
		return r.closeErr
	case <-ctx.Done():
		return messages.Wrap(messages.CodeTimeout, "close", ctx.Err(),
			"sessions are still stopping; the store and the lease close once they are gone")
	}
}

func (r *Runtime) shutdown() {
	defer close(r.closeDone)
	if r.delegator != nil {
		// drivers settle first: their sessions are released (sweep) and
		// their records written while the registry still runs
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Supervision.ShutdownTimeout.D()+time.Minute)
		if err := r.delegator.Close(ctx); err != nil {
			r.log.Warn("drivers still settling at shutdown", "err", err)
		}
		cancel()
	}
	ch := make(chan session.Result[int], 1)
	r.engine.Send(r.registry, regRelease{all: true, reason: messages.ReleaseShutdown, reply: ch})
	res := <-ch
	err := res.Err
	<-r.engine.Poison(r.registry).Done()
	if r.registryFailed.Load() != nil {
		// the registry could not release its sessions: stopping it stopped
		// them, so their records (still live) are orphaned now, as the next
		// boot would do
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		alive := func(rid string) bool { return rid != r.id && leaseHeld(r.cfg.Home, rid) }
		var released func(string)
		if r.learn != nil {
			released = r.learn.Released // recorded before the loop closes below
		}
		if _, serr := sweepOrphans(ctx, r.store, r.cfg.Home, time.Now(), alive, r.log, released); serr != nil {
			r.log.Warn("orphaning the sessions of a failed registry", "err", serr)
		}
		cancel()
	}
	if r.stopJob != nil {
		r.stopJob()
	}
	if r.learn != nil {
		r.learn.Close() // pending outcome records read the store
	}
	if cerr := r.store.Close(); err == nil {
		err = cerr
	}
	drainWarmPools(r.backends, r.kit)
	r.kit.Close()
	r.lease.release()
	r.closeErr = err
}
