package claudecode

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/gate"
)

// Compile-time checks of the abilities a claude-code session has.
var (
	_ transports.Session       = (*session)(nil)
	_ transports.Interrupter   = (*session)(nil)
	_ transports.Steerer       = (*session)(nil)
	_ transports.ModelSetter   = (*session)(nil)
	_ transports.PostureSetter = (*session)(nil)
)

// session is one claude-code session: the kit's shell (process, replies,
// emitter, interrupt, Answer, Close) around core, plus the ops that are
// claude-code's own.
type session struct {
	*cli.Shell[Line, *core]
	t *Transport
}

func newSession(t *Transport, spec transports.SessionSpec, sink transports.Sink, bin, ext string, ws gate.Workspace) *session {
	c := newSessionCore(t, spec, ext, ws, spec.ResumeExternalID != "")
	return &session{Shell: cli.NewShell(backend, &t.Cfg, spec, sink, bin, ext, c), t: t}
}

// newSessionCore is a session's core: the transport's caps, the spec's
// tools and posture, and the workspace gate.
func newSessionCore(t *Transport, spec transports.SessionSpec, ext string, ws gate.Workspace, resumed bool) *core {
	return newCore(coreConfig{outputCap: t.Cfg.OutputCap, lineCap: t.Cfg.LineCap, allowed: spec.AllowedTools,
		resumed: resumed, externalID: ext, posture: spec.Posture,
		gate: func(tool string, input json.RawMessage) error { return gateCheck(ws, tool, input) }})
}

// open starts the first process and completes the initialize handshake.
func (s *session) open(ctx context.Context) error {
	resume, note := s.Spec.ResumeExternalID != "", ""
	if resume {
		if exists, known := transcriptExists(s.Env(), s.Ext); known && !exists {
			resume = false
			note = fmt.Sprintf("Claude Code keeps no transcript of session %s under this HOME: a new conversation starts with the same id, and the agent does not remember earlier turns", s.Ext)
		}
	}
	version, err := s.boot(ctx, resume)
	if err != nil {
		return err
	}
	s.Begin(note, versionNote(version))
	return nil
}

// versionNote warns when the CLI is not the pinned version.
func versionNote(version string) string {
	if version == "" || version == PinnedVersion {
		return ""
	}
	return fmt.Sprintf("claude %s is running; this transport was verified with %s", version, PinnedVersion)
}

// boot starts the first process and completes the initialize handshake,
// returning the CLI's version. Nothing reaches the sink yet: the session
// starts with Begin (at once for Open, at adoption for a warm one). On
// failure the session is closed.
func (s *session) boot(ctx context.Context, resume bool) (version string, err error) {
	// a boot slot (bounded by the caller's context), held until the
	// handshake is over; the start timeout bounds only the handshake
	release, err := s.t.Cfg.Boot(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	s.Lock()
	p, err := s.Spawn(buildArgs(s.Spec, s.Ext, resume))
	s.Unlock()
	if err != nil {
		return "", messages.Wrap(messages.CodeInternal, messages.OpStart, err, fmt.Sprintf("cannot start %s: %v", s.Bin, err))
	}
	limit := s.t.Cfg.StartTimeout
	hctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// The handshake is bounded by the start timeout alone: on a loaded
	// machine the CLI's boot takes longer than any control request should.
	resp, err := s.controlWithin(hctx, messages.OpStart, map[string]any{"subtype": "initialize", "hooks": nil}, limit)
	if err != nil {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = s.Close(cctx)
		ccancel()
		return "", s.StartErr(p, messages.OpStart, "at start", "the initialize request", err)
	}
	var info struct {
		Version string `json:"claude_code_version"`
	}
	_ = json.Unmarshal(resp.Result, &info)
	return info.Version, nil
}

// StartTurn writes input as a user message. A process that ended between
// turns (or was stopped by an interrupt) is started again with --resume.
func (s *session) StartTurn(ctx context.Context, turn int, input string) error {
	s.Lock()
	defer s.Unlock()
	if err := s.LiveErr(messages.OpStart); err != nil {
		return err
	}
	c := s.Core
	if c.Fatal {
		return messages.Errorf(messages.CodeInternal, messages.OpStart,
			"backend exited: claude died during a turn (%s); open the session again to resume it", firstNonEmpty(s.Proc.Status, "unknown"))
	}
	if c.Dead && !c.Running {
		prev := ""
		if s.Proc != nil {
			prev = s.Proc.Status
		}
		// a process killed early in its first turn may not have written
		// its transcript yet: then the same id starts afresh
		resume, how := true, "--resume "+s.Ext
		if exists, known := transcriptExists(s.Env(), s.Ext); known && !exists {
			resume, how = false, "--session-id "+s.Ext+" (no transcript was written, so the agent does not remember earlier turns)"
		}
		if _, err := s.Spawn(buildArgs(s.Spec, s.Ext, resume)); err != nil {
			return messages.Wrap(messages.CodeInternal, messages.OpStart, err, fmt.Sprintf("cannot restart %s: %v", s.Bin, err))
		}
		c.respawned(resume)
		s.Emit(turn, messages.Event{Type: messages.EvWarning,
			Text: fmt.Sprintf("claude was started again with %s; the previous process ended: %s", how, firstNonEmpty(prev, "unknown"))})
	}
	eff, err := c.startTurn(turn, input)
	if err != nil {
		return err
	}
	s.OpenTurn(turn, eff)
	return nil
}

// Steer writes text as a user message while the turn runs.
func (s *session) Steer(ctx context.Context, text string) error {
	s.Lock()
	defer s.Unlock()
	if err := s.LiveErr(messages.OpGuide); err != nil {
		return err
	}
	eff, err := s.Core.steer(text)
	if err != nil {
		return err
	}
	s.Apply(eff, time.Time{})
	return nil
}

// SetPosture switches the permission mode (set_permission_mode).
func (s *session) SetPosture(ctx context.Context, p messages.Posture) error {
	mode := PermissionMode(p)
	if mode == "" {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	resp, err := s.control(ctx, messages.OpSetPosture, map[string]any{"subtype": "set_permission_mode", "mode": mode})
	if err != nil {
		return err
	}
	var got struct {
		Mode string `json:"mode"`
	}
	if json.Unmarshal(resp.Result, &got) == nil && got.Mode != "" && got.Mode != mode {
		return messages.Errorf(messages.CodeInternal, messages.OpSetPosture, "claude switched to %q, not %q", got.Mode, mode)
	}
	s.Lock()
	s.Core.setPosture(p)
	s.Unlock()
	return nil
}

// SetModel switches the model for the next turn (set_model). Effort is
// fixed at start: a different effort is rejected as unsupported.
func (s *session) SetModel(ctx context.Context, model string, effort messages.Effort) error {
	if effort != "" {
		if !effort.Valid() {
			return messages.FieldError(messages.OpGuide, "effort", "unknown effort %q", effort)
		}
		if effort != s.Spec.Effort {
			return messages.Errorf(messages.CodeUnsupported, messages.OpGuide,
				"claude-code sets effort at start only (this session: %q); start a new session for effort %q", s.Spec.Effort, effort)
		}
	}
	if model == "" {
		return nil
	}
	_, err := s.control(ctx, messages.OpGuide, map[string]any{"subtype": "set_model", "model": model})
	return err
}

// control sends a control request and waits for its response, bounded by
// ctx and the control timeout. An error response is a typed error.
func (s *session) control(ctx context.Context, op string, req map[string]any) (cli.Reply, error) {
	return s.controlWithin(ctx, op, req, s.t.Cfg.ControlTimeout)
}

// controlWithin is control bounded by limit instead of the control timeout.
func (s *session) controlWithin(ctx context.Context, op string, req map[string]any, limit time.Duration) (cli.Reply, error) {
	subtype, _ := req["subtype"].(string)
	return s.Request(ctx, op, subtype, limit, func(id string) []byte { return controlRequestLine(id, req) })
}
