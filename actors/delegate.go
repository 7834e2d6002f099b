package actors

import (
	"context"
	"time"

	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/native"
)

// The driver seam (seed 000 §2, package driver): the runtime dispatches
// personas as native loops whose only tool is the op tool, under scopes of
// their own, and settles them (their sessions released, their record and
// metrics written).

// WithDriverLoop runs drivers on t (default: the backends' native
// transport, else native.New()).
func WithDriverLoop(t *native.Transport) Option { return func(o *options) { o.driverLoop = t } }

// driverLoopOf picks the loop drivers run on from the (uncontained)
// backends.
func driverLoopOf(backends *transports.Registry) *native.Transport {
	if t, err := backends.Get(native.ID); err == nil {
		if n, ok := t.(*native.Transport); ok {
			return n
		}
	}
	return native.New()
}

func (r *Runtime) openDelegator(loop *native.Transport) {
	recs, err := driver.OpenRecords(r.cfg.Home)
	if err != nil {
		r.log.Warn("delegations unavailable: cannot open their records", "err", err)
		return
	}
	alive := func(rid string) bool { return rid == r.id || leaseHeld(r.cfg.Home, rid) }
	if n, err := recs.MarkKilled(alive, time.Now()); err != nil {
		r.log.Warn("delegation sweep failed", "err", err)
	} else if n > 0 {
		r.log.Info("marked the delegations of dead processes killed", "count", n)
	}
	d, err := driver.New(driver.Options{Runtime: r, Records: recs, Loop: loop, Env: r.cfg.EnvList(), Home: r.cfg.Home,
		Ceiling: r.cfg.DefaultMaxPosture, RuntimeID: r.id, Metrics: r.driverMetrics, Logger: r.log,
		Meta: r.store.GetMeta, OnChange: r.delegationChanged})
	if err != nil {
		r.log.Warn("delegations unavailable", "err", err)
		return
	}
	r.delegator = d
}

// OnDelegationChange registers f to see every delegation record change
// (the live feed); it must not block. Call it before the first Delegate.
func (r *Runtime) OnDelegationChange(f func(driver.Record)) {
	r.delegationMu.Lock()
	r.delegationHooks = append(r.delegationHooks, f)
	r.delegationMu.Unlock()
}

func (r *Runtime) delegationChanged(rec driver.Record) {
	r.delegationMu.Lock()
	hooks := append([]func(driver.Record){}, r.delegationHooks...)
	r.delegationMu.Unlock()
	for _, f := range hooks {
		f(rec)
	}
}

func (r *Runtime) delegations(op string) (*driver.Delegator, error) {
	if err := r.check(op); err != nil {
		return nil, err
	}
	if r.delegator == nil {
		return nil, messages.Errorf(messages.CodeUnsupported, op, "delegations are unavailable in this runtime (see its log)")
	}
	return r.delegator, nil
}

// Delegate dispatches a driver persona (driver.Request; default agent
// code-specialist) and returns its record once it runs.
func (r *Runtime) Delegate(ctx context.Context, req driver.Request) (driver.Record, error) {
	d, err := r.delegations("delegate")
	if err != nil {
		return driver.Record{}, err
	}
	return d.Delegate(ctx, req)
}

// WaitDelegation blocks until delegation id settles.
func (r *Runtime) WaitDelegation(ctx context.Context, id string) (driver.Record, error) {
	d, err := r.delegations("delegation")
	if err != nil {
		return driver.Record{}, err
	}
	return d.Wait(ctx, id)
}

// CancelDelegation ends a running delegation (its sessions released).
func (r *Runtime) CancelDelegation(ctx context.Context, id string) (driver.Record, error) {
	d, err := r.delegations("delegation")
	if err != nil {
		return driver.Record{}, err
	}
	return d.Cancel(ctx, id)
}

// Delegation reads one delegation's record.
func (r *Runtime) Delegation(id string) (driver.Record, error) {
	d, err := r.delegations("delegation")
	if err != nil {
		return driver.Record{}, err
	}
	return d.Get(id)
}

// AnswerDelegated answers a driven session's clarification that its
// delegation handed to the human; handled is false when none waits on it
// (then it is an ordinary answer).
func (r *Runtime) AnswerDelegated(ctx context.Context, op messages.Answer) (messages.AnswerResult, bool, error) {
	if r.delegator == nil {
		return messages.AnswerResult{}, false, nil
	}
	if err := op.Validate(); err != nil {
		return messages.AnswerResult{}, false, err
	}
	return r.delegator.Answer(ctx, op)
}

// Delegations lists every delegation, newest first.
func (r *Runtime) Delegations() ([]driver.Record, error) {
	d, err := r.delegations("delegations")
	if err != nil {
		return nil, err
	}
	return d.List()
}

// ResumeDelegated resumes a session a driver drove by dispatching a fresh
// supervised driver that adopts its record (seed 000 §5): the backend is
// pinned to the record's, the one-shot adopt pin set. A session no
// delegation drove is resumed plainly (Resume).
func (r *Runtime) ResumeDelegated(ctx context.Context, sid, brief string) (driver.Record, error) {
	const op = messages.OpResume
	d, err := r.delegations(op)
	if err != nil {
		return driver.Record{}, err
	}
	rec, err := r.store.GetMeta(ctx, sid)
	if err != nil {
		return driver.Record{}, messages.AsError(op, err)
	}
	if rec.Status.Live() {
		return driver.Record{}, messages.Errorf(messages.CodeAlreadyLive, op, "session %s is still live: stop it first", sid)
	}
	if brief == "" {
		brief = "Resume this coding task and carry it to an honest verdict. The task: " + rec.TaskBrief
	}
	// the fresh driver is its first one's dispatcher's (a scoped token's
	// resumed delegation stays in its scope)
	owner := ""
	if dl, ok := DrivenBy(rec); ok {
		if prev, err := d.Get(dl); err == nil {
			owner = prev.Owner
		}
	}
	// the record's ceiling is clamped to the driver's scope by the adopt
	// (with a warning event), never raised
	return d.Delegate(ctx, driver.Request{Brief: brief, Cwd: rec.Cwd, ResumeOf: sid, Owner: owner,
		Overrides: driver.Overrides{Backend: rec.BackendID, Supervised: rec.BackendID == native.ID}})
}

// DrivenBy says which delegation drove session sid's latest run, if any.
func DrivenBy(rec messages.SessionRecord) (string, bool) {
	run := rec.LatestRun()
	if run == nil {
		return "", false
	}
	return driver.IDOfScope(run.OwnerScopeID)
}
