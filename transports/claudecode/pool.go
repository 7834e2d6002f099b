package claudecode

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/gate"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/warmpool"
)

// The warm pool keeps claude processes that have finished their initialize
// handshake (the ~1 s of node boot and setup a first turn otherwise waits
// for) ready for the next start with the same key.
//
// What cannot change after boot is the key: the binary, cwd, the built
// environment (HOME and every extra variable, hashed), effort (--effort
// only), allowedTools (--allowedTools/--tools only), the appended system
// prompt (verified: a second initialize with appendSystemPrompt is
// acknowledged but the model never sees it), whether a model is named at
// all, and the runtime's process kit (a pooled process is drained with its
// runtime). What is applied at adoption through the control protocol is
// the model (set_model) and the posture (set_permission_mode), each only
// when it differs from what the process was booted with; the session id is
// the fresh UUID the warm process was started with (--session-id), which
// Claude Code uses as its own from the first turn. A resume
// (ResumeExternalID) never uses the pool: --resume is argv only.
//
// A pooled process is ready (WarmReady) once it has also settled: after
// its initialize answer the CLI still spends about 150 ms of CPU on its
// own, in two bursts over about 2 s, and a first turn that meets them is
// slower (warmpool.Settling watches its CPU time). A start takes a
// settled process first, else one still settling.
//
// Pooled processes are contained like sessions (see transports/cli).

// warmKey is what a pooled process must share with the start that adopts it.
type warmKey struct {
	kit          *prockit.Kit
	bin, cwd     string
	env          string // a hash of the process environment
	effort       messages.Effort
	tools        string // allowedTools, or "\x00" for none given
	appendPrompt string
	namedModel   bool
}

// warmProc is a booted, initialized claude process waiting for a start.
type warmProc struct {
	s       *session
	group   *prockit.Group
	model   string
	posture messages.Posture
	version string
	// settling watches the CPU the process spends on its own after
	// initialize (about 150 ms, for 2 s): a first turn beside it is slower
	settling *warmpool.Settling
}

func newWarmSlot() *warmpool.Slot[warmKey, *warmProc] {
	return warmpool.NewSlot((*warmProc).alive, (*warmProc).discard, func(k warmKey) *prockit.Kit { return k.kit }).
		WithSettled((*warmProc).settled)
}

// WarmIdle is how many pooled processes are ready for a start like spec
// (for tests and the benchmark).
func (t *Transport) WarmIdle(spec transports.SessionSpec) int {
	bin, err := t.Binary(spec.Env)
	return cli.Idle(t.Slot, t.warmKey(spec, bin), err)
}

func (t *Transport) warmKey(spec transports.SessionSpec, bin string) warmKey {
	tools := "\x00"
	if spec.AllowedTools != nil {
		tools = strings.Join(spec.AllowedTools, "\x00")
	}
	return warmKey{kit: spec.Procs.Kit(), bin: bin, cwd: spec.Cwd, env: warmpool.EnvKey(t.Cfg.Environ(os.Environ(), spec)), effort: spec.Effort,
		tools: tools, appendPrompt: spec.AppendSystemPrompt, namedModel: spec.Model != ""}
}

// adoptWarm hands the start a pooled process when one fits (cli.Adopt);
// ok is false when the start must boot its own.
func (t *Transport) adoptWarm(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, bin string, ws gate.Workspace) (s *session, refill func(), ok bool) {
	boot := func(ctx context.Context, kit *prockit.Kit, tmpl transports.SessionSpec) (*warmProc, error) {
		return t.bootWarm(ctx, kit, tmpl, bin)
	}
	adopt := func(w *warmProc) error { return w.adopt(ctx, spec, sink, ws) }
	w, refill, ok := cli.Adopt(t.Slot, t.warmKey(spec, bin), spec, boot, adopt, (*warmProc).discard)
	if !ok {
		return nil, refill, false
	}
	return w.s, refill, true
}

// RefillDelay bounds how long the pool waits for a session's first turn to
// end before it boots the session's replacement anyway.
const RefillDelay = warmpool.RefillDelay

// bootWarm starts and initializes a process for the pool, under a group of
// its own in kit.
func (t *Transport) bootWarm(ctx context.Context, kit *prockit.Kit, spec transports.SessionSpec, bin string) (*warmProc, error) {
	g := cli.WarmGroup(kit)
	spec.Procs = g
	ws, err := gate.NewWorkspace(firstNonEmpty(spec.Cwd, "."))
	if err != nil {
		return nil, err
	}
	s := newSession(t, spec, func(int, messages.Event) {}, bin, transports.NewUUID(), ws)
	s.OwnGroup = g
	version, err := s.boot(ctx, false)
	if err != nil {
		g.Close()
		return nil, err
	}
	s.Lock()
	pid := s.Proc.Pid()
	s.Unlock()
	return &warmProc{s: s, model: spec.Model, posture: spec.Posture, version: version, settling: warmpool.WatchSettling(pid)}, nil
}

// settled: the process has stopped working on its own since initialize.
func (w *warmProc) settled() bool { return w.settling.Settled() }

// alive: the process has not exited and nobody closed it.
func (w *warmProc) alive() bool { return w.s.Alive() }

// discard kills the process and its group.
func (w *warmProc) discard() {
	w.settling.Stop()
	w.s.Discard()
}

// adopt makes the pooled process the session of spec: the session's sink,
// spec and a fresh core (its posture, tools and gate), then the model and
// permission mode through control requests where they differ from the
// boot's, then EvStarted. On error the process is left for the caller to
// discard.
func (w *warmProc) adopt(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, ws gate.Workspace) error {
	w.settling.Stop()
	s := w.s
	s.Lock()
	if s.Closed() || s.Proc == nil || s.Proc.Status != "" {
		s.Unlock()
		return fmt.Errorf("the warm claude process ended")
	}
	s.Adopted(spec, sink, newSessionCore(s.t, spec, s.Ext, ws, false))
	s.Unlock()
	if spec.Model != w.model {
		if _, err := s.control(ctx, messages.OpStart, map[string]any{"subtype": "set_model", "model": spec.Model}); err != nil {
			return err
		}
	}
	if mode := PermissionMode(spec.Posture); mode != PermissionMode(w.posture) {
		if _, err := s.control(ctx, messages.OpStart, map[string]any{"subtype": "set_permission_mode", "mode": mode}); err != nil {
			return err
		}
	}
	s.Begin(versionNote(w.version))
	return nil
}
