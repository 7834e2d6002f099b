package droid

import (
	"context"
	"fmt"
	"os"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
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
// Pooled processes are contained like sessions (see transports/cli).

// A droid transport is a warm pooler.
var _ transports.WarmPooler = (*Transport)(nil)

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

func newWarmSlot() *warmpool.Slot[warmKey, *warmProc] {
	return warmpool.NewSlot((*warmProc).alive, (*warmProc).discard, func(k warmKey) *prockit.Kit { return k.kit })
}

// WarmIdle is how many pooled processes are ready for a start like spec
// (for tests and the benchmark).
func (t *Transport) WarmIdle(spec transports.SessionSpec) int {
	bin, err := t.Binary(spec.Env)
	return cli.Idle(t.Slot, t.warmKey(spec, bin), err)
}

func (t *Transport) warmKey(spec transports.SessionSpec, bin string) warmKey {
	return warmKey{kit: spec.Procs.Kit(), bin: bin, cwd: spec.Cwd, env: warmpool.EnvKey(t.Cfg.Environ(os.Environ(), spec)), namedModel: spec.Model != ""}
}

// adoptWarm hands the start a pooled process when one fits (cli.Adopt);
// ok is false when the start must boot its own. The refill waits for the
// adopting session's first turn: a boot is seconds of CPU, which on two
// cores would slow the very turn the pool just sped up.
func (t *Transport) adoptWarm(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, bin string, ws *gate.Workspace) (*warmProc, func(), bool) {
	return cli.Adopt(t.Slot, t.warmKey(spec, bin), spec,
		func(ctx context.Context, kit *prockit.Kit, tmpl transports.SessionSpec) (*warmProc, error) {
			return t.bootWarm(ctx, kit, tmpl, bin)
		},
		func(w *warmProc) error { return w.adopt(ctx, spec, sink, ws) }, (*warmProc).discard)
}

// bootWarm starts and initializes a process for the pool, under a group of
// its own in kit. Its session emits nothing until a start adopts it.
func (t *Transport) bootWarm(ctx context.Context, kit *prockit.Kit, spec transports.SessionSpec, bin string) (*warmProc, error) {
	g := cli.WarmGroup(kit)
	spec.Procs = g
	s := newSession(t, spec, func(int, messages.Event) {}, bin, transports.NewUUID(), nil)
	s.OwnGroup = g
	hctx, cancel := context.WithTimeout(ctx, t.Cfg.StartTimeout)
	defer cancel()
	if _, err := s.initialize(hctx, false, messages.OpStart); err != nil {
		s.Discard()
		return nil, err
	}
	return &warmProc{s: s, model: spec.Model}, nil
}

// alive: the process has not exited and nobody closed it.
func (w *warmProc) alive() bool { return w.s.Alive() }

// discard kills the process and its group.
func (w *warmProc) discard() { w.s.Discard() }

// adopt makes the pooled process the session of spec: the session's sink,
// spec and a fresh core (its posture and gate), then autonomy, effort and
// (when it differs from the boot's) the model in one
// droid.update_session_settings, then EvStarted. On error the process is
// left for the caller to discard.
func (w *warmProc) adopt(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, ws *gate.Workspace) error {
	s := w.s
	s.Lock()
	if s.Closed() || s.Proc == nil || s.Proc.Status != "" || s.Core.Dead {
		s.Unlock()
		return fmt.Errorf("the warm droid process ended")
	}
	p := s.Proc
	settings := s.Core.settings
	// the session's record says what the adopted process may write (its
	// rules were built in the pool's group)
	spec.Procs.NoteWritable(s.Spec.Procs.Writable())
	c := newSessionCore(s.t, spec, ws)
	c.settings = settings
	s.Adopted(spec, sink, c)
	s.Unlock()
	var extra map[string]any
	if spec.Model != w.model {
		extra = map[string]any{"modelId": spec.Model}
	}
	hctx, cancel := context.WithTimeout(ctx, s.t.Cfg.StartTimeout)
	defer cancel()
	if err := s.applySettings(hctx, p, messages.OpStart, extra); err != nil {
		return err
	}
	s.Begin()
	return nil
}
