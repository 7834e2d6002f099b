package acp

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/warmpool"
)

// The warm pool keeps agent processes that have finished initialize and
// session/new (node boot, the agent's setup and its session: what a start
// otherwise waits for) ready for the next start with the same key.
//
// session/new is done ahead because everything it takes is in the key:
// the cwd, and MCP servers (always none). The model is in the key too:
// each agent takes it at launch (opencode's config, copilot's --model,
// gemini's -m), so two processes of different models are not
// interchangeable, and nothing is restarted to change it. What is applied
// at adoption through the protocol is the posture: the agent's mode
// (session/set_mode or the "mode" config option) when it differs from the
// one the process was booted with, and the client's own permission
// policy. The session id is the agent's own, from the pooled session/new.
// A resume (ResumeExternalID) never uses the pool: session/load names the
// session to load.
//
// The key is what makes two processes not interchangeable: the runtime's
// process kit (a pooled process is drained with its runtime), the binary,
// the cwd, HOME, the model, the effort, the appended prompt, the passed
// variables, the allowed tools (copilot's --available-tools; none given
// and an empty list differ) and a hash of the built environment (the
// caller's, the transport's and the session's). Launch's own files go into the
// process's private scratch directory, made when the pooled process boots
// and handed to the session that adopts it, so a pooled process never
// shares one with a live session.
//
// Pooled processes are contained like sessions: each starts through proc
// under a group of its own in the runtime's kit (watchdog, cgroup,
// boot-sweep record), is killed when discarded or drained (DrainWarm, when
// the runtime closes), and once adopted ends with its session. A pooled
// process that died while idle is never adopted (the start boots its
// own).

var _ transports.WarmPooler = (*Transport)(nil)

// warmKey is what a pooled process must share with the start that adopts it.
type warmKey struct {
	kit                   *prockit.Kit
	bin, cwd, home        string
	model                 string
	effort                messages.Effort
	appendPrompt, passEnv string
	tools                 string // the allowed tools ("\x00" for none given): copilot takes them at launch
	env                   string // a hash of the built environment
}

// warmProc is a booted session waiting for a start.
type warmProc struct {
	s     *session
	group *prockit.Group
}

// WithWarmPool keeps n booted agent processes per key ready for the next
// start (0, the default of New, disables the pool). The runtime sets it
// from its config (warmPool).
func WithWarmPool(n int) Option { return func(t *Transport) { t.SetWarmPool(n) } }

func newWarmSlot() *warmpool.Slot[warmKey, *warmProc] {
	return warmpool.NewSlot((*warmProc).alive, (*warmProc).discard, func(k warmKey) *prockit.Kit { return k.kit })
}

// WarmIdle is how many pooled processes are ready for a start like spec
// (spec.Cwd as Open would default it).
func (t *Transport) WarmIdle(spec transports.SessionSpec) int {
	p := t.Current()
	if p == nil {
		return 0
	}
	bin, err := t.Binary(spec.Env)
	if err != nil {
		return 0
	}
	return p.Idle(t.warmKey(spec, bin))
}

func (t *Transport) warmKey(spec transports.SessionSpec, bin string) warmKey {
	tools := "\x00"
	if spec.AllowedTools != nil {
		tools = strings.Join(spec.AllowedTools, "\x00")
	}
	return warmKey{kit: spec.Procs.Kit(), bin: bin, cwd: spec.Cwd, home: spec.Home, model: spec.Model, effort: spec.Effort, tools: tools,
		appendPrompt: spec.AppendSystemPrompt, passEnv: strings.Join(spec.PassEnv, "\x00"), env: warmpool.EnvKey(t.buildEnv(os.Environ(), spec, t.env))}
}

// adoptWarm hands the start a pooled session when one fits; refill boots
// the key's replacement (the caller runs it once the session's first turn
// is over; nil when there is no pool). ok is false when the start must
// boot its own.
func (t *Transport) adoptWarm(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, bin string) (s *session, refill func(), ok bool) {
	p := t.Current()
	if p == nil || p.Size() == 0 || spec.ResumeExternalID != "" || !spec.Provision.Empty() {
		return nil, nil, false
	}
	key := t.warmKey(spec, bin)
	refill = func() {
		tmpl := spec
		tmpl.SessionID, tmpl.Procs = "", nil
		p.Refill(key, func(ctx context.Context) (*warmProc, error) { return t.bootWarm(ctx, key.kit, tmpl, bin) })
	}
	for {
		w, found := p.Take(key)
		if !found && spec.Model != "" {
			// a process booted for another model that the agent can
			// switch to this one over ACP (adopt selects it)
			_, w, found = p.TakeMatching(func(k warmKey, w *warmProc) bool {
				k.model = key.model
				return k == key && w.s.offersModel(spec.Model)
			})
		}
		if !found {
			return nil, refill, false
		}
		if err := w.adopt(ctx, spec, sink); err == nil {
			return w.s, refill, true
		}
		w.discard() // a process that could not take the settings: try the next, else boot
	}
}

// refillAfterFirstTurn refills the pool once s's first turn has ended (or
// s died or closed, or warmpool.RefillDelay passed).
func refillAfterFirstTurn(s *session, refill func()) { warmpool.RefillAfter(s.firstEnd, nil, refill) }

// bootWarm starts a session for the pool under a group of its own in kit:
// the process, initialize, session/new and the posture's mode.
func (t *Transport) bootWarm(ctx context.Context, kit *prockit.Kit, spec transports.SessionSpec, bin string) (*warmProc, error) {
	var g *prockit.Group
	if kit != nil {
		g = kit.Group("warm-" + transports.RandomHex(6))
	}
	spec.Procs = g
	s, err := newSession(t, spec, func(int, messages.Event) {}, bin)
	if err != nil {
		g.Close()
		return nil, err
	}
	s.ownGroup = g
	if err := s.boot(ctx); err != nil {
		g.Close()
		return nil, err
	}
	return &warmProc{s: s, group: g}, nil
}

// alive: the process has not exited, and nobody closed it.
func (w *warmProc) alive() bool {
	select {
	case <-w.s.exited:
		return false
	default:
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return !w.s.closed && !w.s.dead
}

// discard kills the idle process at once (an unadopted session has nothing
// to save) and frees what it holds.
func (w *warmProc) discard() {
	s := w.s
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.endedFirst()
	s.kill()
	s.wait()
	_ = os.RemoveAll(s.scratch)
	w.group.Close()
}

// adopt makes the pooled session the session of spec: its sink, spec and
// posture, the model over ACP where the boot's was another (a process
// taken from another model's key), the agent's mode for that posture
// where it differs from the boot's, then EvStarted. On error the process
// is left for the caller to discard.
func (w *warmProc) adopt(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) error {
	if !w.alive() {
		return fmt.Errorf("the warm %s process ended", w.s.t.agent.Descriptor.ID)
	}
	s := w.s
	s.mu.Lock()
	booted := s.spec.Model
	s.spec, s.sink, s.posture = spec, sink, spec.Posture
	mode := s.mode
	s.mu.Unlock()
	if spec.Model != booted {
		if err := s.selectModel(ctx, spec.Model); err != nil {
			return err
		}
	}
	if id, ok := s.t.agent.Modes[spec.Posture]; ok && id != "" && id != mode {
		if err := s.selectMode(ctx, spec.Posture); err != nil {
			return err
		}
	}
	// the session's record says what the adopted process may write (its
	// rules were built in the pool's group, with its scratch folder)
	spec.Procs.NoteWritable(w.group.Writable())
	s.begin()
	return nil
}
