package droid

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/gate"
	"github.com/codesession/codesession/transports/subprocess"
)

// Compile-time checks of the abilities a droid session has.
var (
	_ transports.Session       = (*session)(nil)
	_ transports.Interrupter   = (*session)(nil)
	_ transports.PostureSetter = (*session)(nil)
)

// backend is droid as the kit drives it: the decoder, the interrupt
// request, and Close's stop: stdin closed, then SIGTERM after a short
// grace (droid 0.215.0 lingers about 15 s after its stdin closes, but
// exits at once on SIGTERM; it writes its session as it goes, so nothing
// is lost), then SIGKILL.
var backend = cli.Backend[Line]{
	Name:      "droid",
	Decode:    Decode,
	Interrupt: func(id string) []byte { return requestLine(id, methodInterrupt, map[string]any{}) },
	Stop:      []subprocess.Step{{Wait: 500 * time.Millisecond, Signal: syscall.SIGTERM}, {Wait: 2 * time.Second, Signal: syscall.SIGKILL}},
}

// session is one droid session: the kit's shell (process, replies,
// emitter, interrupt, Answer, Close) around core, plus the handshake, the
// settings and the restart that are droid's own.
type session struct {
	*cli.Shell[Line, *core]
	t *Transport
}

func newSession(t *Transport, spec transports.SessionSpec, sink transports.Sink, bin, ext string, ws *gate.Workspace) *session {
	sh := cli.NewShell(backend, &t.Cfg, spec, sink, bin, ext, newSessionCore(t, spec, ws))
	sh.NewID = func() string { return sh.Core.nextID() } // our turn messages and requests share the core's ids
	return &session{Shell: sh, t: t}
}

// newSessionCore is a session's core: the transport's caps, the posture
// and the workspace gate, with request ids of its own.
func newSessionCore(t *Transport, spec transports.SessionSpec, ws *gate.Workspace) *core {
	return newCore(coreConfig{outputCap: t.Cfg.OutputCap, lineCap: t.Cfg.LineCap, ws: ws, posture: spec.Posture,
		idPrefix: "cs-" + transports.RandomHex(4) + "-"})
}

// open starts the first process and runs the handshake.
func (s *session) open(ctx context.Context) error {
	if err := s.start(ctx, s.Spec.ResumeExternalID != "", messages.OpStart); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = s.Close(cctx)
		cancel()
		return err
	}
	s.Begin()
	return nil
}

// start spawns a process and runs the handshake: initialize (or load),
// then the session settings. Its errors are typed.
func (s *session) start(ctx context.Context, resume bool, op string) error {
	hctx, cancel := context.WithTimeout(ctx, s.t.Cfg.StartTimeout)
	defer cancel()
	p, err := s.initialize(hctx, resume, op)
	if err != nil {
		return err
	}
	return s.applySettings(hctx, p, op, nil)
}

// initialize spawns a process and sends droid.initialize_session (or
// droid.load_session when resume), bounded by ctx. Its errors are typed.
func (s *session) initialize(hctx context.Context, resume bool, op string) (*cli.Proc, error) {
	s.Lock()
	p, err := s.Spawn(buildArgs())
	s.Unlock()
	if err != nil {
		return nil, messages.Wrap(messages.CodeInternal, op, err, fmt.Sprintf("cannot start %s: %v", s.Bin, err))
	}
	method := methodInitialize
	params := map[string]any{"sessionId": s.Ext, "machineId": "codesession", "cwd": s.Spec.Cwd}
	if s.Spec.Model != "" {
		params["modelId"] = s.Spec.Model
	}
	if resume {
		method, params = methodLoad, map[string]any{"sessionId": s.Ext}
	}
	if s.Spec.Cwd == "" {
		delete(params, "cwd")
	}
	if _, err := s.call(hctx, op, method, params); err != nil {
		return nil, s.StartErr(p, op, "during "+method, method, err)
	}
	return p, nil
}

// applySettings sends the posture's autonomy level and the effort (and
// extra settings, a pooled process's model) with
// droid.update_session_settings, and warns where droid reports others.
func (s *session) applySettings(hctx context.Context, p *cli.Proc, op string, extra map[string]any) error {
	s.Lock()
	posture := s.Core.posture
	s.Unlock()
	params := s.settings(posture)
	for k, v := range extra {
		params[k] = v
	}
	if _, err := s.call(hctx, op, methodUpdateSettings, params); err != nil {
		return s.StartErr(p, op, "during "+methodUpdateSettings, methodUpdateSettings, err)
	}
	s.checkSettings(posture)
	return nil
}

// settings are the droid.update_session_settings params for a posture and
// the session's effort.
func (s *session) settings(p messages.Posture) map[string]any {
	m := map[string]any{"autonomyLevel": AutonomyLevel(p)}
	if e := ReasoningEffort(s.Spec.Effort); e != "" {
		m["reasoningEffort"] = e
	}
	return m
}

// checkSettings warns when droid reports settings other than those asked
// for (a model without reasoning efforts reports "none").
func (s *session) checkSettings(p messages.Posture) {
	s.Lock()
	defer s.Unlock()
	got, turn := s.Core.settings, s.Core.EvTurn()
	if want := AutonomyLevel(p); got.AutonomyLevel != "" && got.AutonomyLevel != want {
		s.Emit(turn, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("droid reports autonomy level %q, not the %q asked for posture %s", got.AutonomyLevel, want, p)})
	}
	if want := ReasoningEffort(s.Spec.Effort); want != "" && got.ReasoningEffort != "" && got.ReasoningEffort != want {
		s.Emit(turn, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("droid applies reasoning effort %q for model %s, not the %q asked for", got.ReasoningEffort, firstNonEmpty(got.ModelID, s.Spec.Model), want)})
	}
}

// StartTurn sends input with droid.add_user_message. A process that ended
// between turns (or was killed by an interrupt) is started again with
// droid.load_session.
func (s *session) StartTurn(ctx context.Context, turn int, input string) error {
	s.Lock()
	if err := s.LiveErr(messages.OpStart); err != nil {
		s.Unlock()
		return err
	}
	c := s.Core
	if c.Fatal {
		status := s.Proc.Status
		s.Unlock()
		return messages.Errorf(messages.CodeInternal, messages.OpStart,
			"backend exited: droid died during a turn (%s); open the session again to resume it", firstNonEmpty(status, "unknown"))
	}
	if c.Running {
		s.Unlock()
		return messages.Errorf(messages.CodeConflict, messages.OpStart, "turn %d is still running", c.Number)
	}
	dead, prev := c.Dead, ""
	if s.Proc != nil {
		prev = s.Proc.Status
	}
	s.Unlock()
	if dead {
		if err := s.start(ctx, true, messages.OpStart); err != nil {
			return err
		}
		s.Warn(fmt.Sprintf("droid was started again with droid.load_session %s; the previous process ended: %s", s.Ext, firstNonEmpty(prev, "unknown")))
	}
	s.Lock()
	defer s.Unlock()
	eff, err := s.Core.startTurn(turn, input)
	if err != nil {
		return err
	}
	s.OpenTurn(turn, eff)
	return nil
}

// SetPosture changes droid's autonomy level with
// droid.update_session_settings; it applies to droid's next permission
// decision. Between turns with no process running it is kept for the
// restart.
func (s *session) SetPosture(ctx context.Context, p messages.Posture) error {
	if AutonomyLevel(p) == "" {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	s.Lock()
	c := s.Core
	between := !s.Closed() && c.Dead && !c.Running && !c.Fatal
	if between {
		// no process runs: the restart with the next turn applies it
		c.setPosture(p)
	}
	s.Unlock()
	if between {
		return nil
	}
	if _, err := s.call(ctx, messages.OpSetPosture, methodUpdateSettings, map[string]any{"autonomyLevel": AutonomyLevel(p)}); err != nil {
		return err
	}
	s.Lock()
	s.Core.setPosture(p)
	s.Unlock()
	s.checkSettings(p)
	return nil
}

// call sends a request of the host and waits for droid's response,
// bounded by ctx and the control timeout (the start timeout for the
// handshake). An error response is a typed error.
func (s *session) call(ctx context.Context, op, method string, params any) (cli.Reply, error) {
	limit := s.t.Cfg.ControlTimeout
	if method == methodInitialize || method == methodLoad {
		limit = s.t.Cfg.StartTimeout
	}
	return s.Request(ctx, op, method, limit, func(id string) []byte { return requestLine(id, method, params) })
}
