package droid

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/gate"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/warmpool"
)

// The warm pool keeps droid processes that have booted and answered
// droid.initialize_session ready for the next start with the same key.
// Measured against modelmock on this 2-core machine (bench/README.md): the
// boot is seconds (droid answers its first request 2-12 s after the
// spawn), initialize on a booted process about 250 ms, update_session_settings
// about 10 ms.
//
// What initialize fixes and the protocol cannot change afterwards is the
// key: the binary, cwd (initialize's cwd and the process's), the built
// environment (HOME, so droid's own ~/.factory, and every extra variable,
// hashed), whether a model is named at all (droid's default cannot be
// asked for again once another is set), and the runtime's process kit (a
// pooled process is drained with its runtime). The session id is the fresh
// UUID the pooled process was initialized with; droid keeps its session
// under $HOME/.factory/sessions by that id, so no two sessions share it.
// What is applied at adoption is what a cold start applies after
// initialize anyway, in the same one droid.update_session_settings: the
// autonomy level of the posture, the effort, and the model when it differs
// from the boot's (verified with 0.215.0: a session initialized on a Chat
// Completions model and switched this way sends its next turn to the
// switched-to model, even on another provider, with the same tools and
// the same instructions as a session initialized on that model). A resume
// (ResumeExternalID) never uses the pool: it is droid.load_session on a
// process of its own.
//
// Pooled processes are contained like sessions: each starts through proc
// under its own group of the runtime's kit (watchdog, cgroup, boot-sweep
// record), is killed when discarded, drained when the runtime closes
// (DrainWarm), and once adopted its group is closed with the session.

// warmKey is what a pooled process must share with the start that adopts it.
type warmKey struct {
	kit        *prockit.Kit
	bin, cwd   string
	env        string // a hash of the process environment
	namedModel bool
}

// warmProc is a booted, initialized droid process waiting for a start.
type warmProc struct {
	s     *session
	model string
}

// WithWarmPool keeps n initialized droid processes per key ready for the
// next start (0, the default of New, disables the pool). The runtime sets
// it from its config (warmPool).
func WithWarmPool(n int) Option { return func(t *Transport) { t.SetWarmPool(n) } }

func newWarmSlot() *warmpool.Slot[warmKey, *warmProc] {
	return warmpool.NewSlot((*warmProc).alive, (*warmProc).discard, func(k warmKey) *prockit.Kit { return k.kit })
}

// WarmIdle is how many pooled processes are ready for a start like spec
// (for tests and the benchmark).
func (t *Transport) WarmIdle(spec transports.SessionSpec) int {
	pool := t.Current()
	if pool == nil {
		return 0
	}
	bin, err := t.Binary(spec.Env)
	if err != nil {
		return 0
	}
	return pool.Idle(t.warmKey(spec, bin))
}

func (t *Transport) warmKey(spec transports.SessionSpec, bin string) warmKey {
	return warmKey{kit: spec.Procs.Kit(), bin: bin, cwd: spec.Cwd, env: warmpool.EnvKey(buildEnv(os.Environ(), spec, t.env)), namedModel: spec.Model != ""}
}

// adoptWarm hands the start a pooled process when one fits; refill boots
// the key's replacement (the caller runs it once the session's first turn
// is over). ok is false when the start must boot its own.
func (t *Transport) adoptWarm(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, bin string, ws *gate.Workspace) (s *session, refill func(), ok bool) {
	pool := t.Current() // a pool replaced by SetWarmPool meanwhile is closed: it refuses the refill
	if pool == nil || pool.Size() == 0 || spec.ResumeExternalID != "" || !spec.Provision.Empty() {
		return nil, func() {}, false
	}
	key := t.warmKey(spec, bin)
	refill = func() {
		tmpl := spec
		tmpl.SessionID, tmpl.Procs = "", nil
		pool.Refill(key, func(ctx context.Context) (*warmProc, error) { return t.bootWarm(ctx, key.kit, tmpl, bin) })
	}
	for {
		w, found := pool.Take(key)
		if !found {
			return nil, refill, false
		}
		s, err := w.adopt(ctx, spec, sink, ws)
		if err == nil {
			return s, refill, true
		}
		w.discard() // a process that could not take the settings: try the next, else boot
	}
}

// RefillDelay bounds how long the pool waits for a session's first turn to
// end before it boots the session's replacement anyway.
const RefillDelay = warmpool.RefillDelay

// refillAfterFirstTurn refills the pool once s's first turn has ended (or
// s closed, or RefillDelay passed): a boot is seconds of CPU, which on two
// cores would slow the very turn the pool just sped up.
func refillAfterFirstTurn(s *session, refill func()) {
	warmpool.RefillAfter(s.firstEnd, s.stop, refill)
}

// bootWarm starts and initializes a process for the pool, under a group of
// its own in kit. Its session emits nothing until a start adopts it.
func (t *Transport) bootWarm(ctx context.Context, kit *prockit.Kit, spec transports.SessionSpec, bin string) (*warmProc, error) {
	var g *prockit.Group
	if kit != nil {
		g = kit.Group("warm-" + transports.RandomHex(6))
	}
	spec.Procs = g
	s := newSession(t, spec, func(int, messages.Event) {}, bin, transports.NewUUID(), nil)
	s.ownGroup = g
	hctx, cancel := context.WithTimeout(ctx, t.startTimeout)
	defer cancel()
	if _, err := s.initialize(hctx, false, messages.OpStart); err != nil {
		w := &warmProc{s: s}
		w.discard()
		return nil, err
	}
	return &warmProc{s: s, model: spec.Model}, nil
}

// alive: the process has not exited and nobody closed it.
func (w *warmProc) alive() bool {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return !w.s.closed.Load() && w.s.proc != nil && w.s.proc.status == "" && !w.s.core.dead
}

// discard kills the process and its group.
func (w *warmProc) discard() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.s.Close(ctx)
}

// adopt makes the pooled process the session of spec: the session's sink,
// spec and a fresh core (its posture and gate), then autonomy, effort and
// (when it differs from the boot's) the model in one
// droid.update_session_settings, then EvStarted. On error the process is
// left for the caller to discard.
func (w *warmProc) adopt(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, ws *gate.Workspace) (*session, error) {
	s := w.s
	s.mu.Lock()
	if s.closed.Load() || s.proc == nil || s.proc.status != "" || s.core.dead {
		s.mu.Unlock()
		return nil, fmt.Errorf("the warm droid process ended")
	}
	p := s.proc
	settings := s.core.settings
	// the session's record says what the adopted process may write (its
	// rules were built in the pool's group)
	spec.Procs.NoteWritable(s.spec.Procs.Writable())
	s.spec, s.sink = spec, sink
	s.core = newCore(coreConfig{outputCap: s.t.outputCap, lineCap: s.t.lineCap, ws: ws, posture: spec.Posture,
		idPrefix: "cs-" + transports.RandomHex(4) + "-"})
	s.core.settings = settings
	s.early = nil // lines of the idle wait belong to nobody's session
	s.mu.Unlock()
	var extra map[string]any
	if spec.Model != w.model {
		extra = map[string]any{"modelId": spec.Model}
	}
	hctx, cancel := context.WithTimeout(ctx, s.t.startTimeout)
	defer cancel()
	if err := s.applySettings(hctx, p, messages.OpStart, extra); err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go s.emitLoop()
	s.begin()
	return s, nil
}
