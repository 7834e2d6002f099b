package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/gate"
	"github.com/codesession/codesession/transports/subprocess"
)

// backend is codex as the kit drives it: the pure decoder of the wire
// (its interrupt is the core's, cli.InterruptAsker) and Close's stop:
// stdin closed, then SIGTERM after 2 s and SIGKILL a second later.
var backend = cli.Backend[*message]{
	Name:   "codex",
	Decode: decodeWire,
	Stop:   []subprocess.Step{{Wait: 2 * time.Second, Signal: syscall.SIGTERM}, {Wait: time.Second, Signal: syscall.SIGKILL}},
}

// Session is one open codex session: the kit's shell (process, replies,
// emitter, interrupt, Answer, Close) around the core, plus the handshake,
// the thread, the per-turn settings and the CODEX_HOME that are codex's
// own. The app-server is started again, resuming the thread, after it
// stopped between turns or was signalled to end an interrupt.
type Session struct {
	*cli.Shell[*message, *core]
	t *Transport

	// Under the shell's mutex:
	// freshHome is the CODEX_HOME Open made; removed at Close when the
	// session never had a thread (see prepareHome). oldHome is the path an
	// adopted process was booted with, a link to the session's CODEX_HOME
	// removed at Close.
	freshHome, oldHome string
	settings           Settings
	model              string // per-turn override for the next turn/start
	effort             string
	posture            messages.Posture
	sendPost           bool // the posture changed since the last turn/start
	seq                int  // the last request id
}

var (
	_ transports.Session       = (*Session)(nil)
	_ transports.Interrupter   = (*Session)(nil)
	_ transports.Steerer       = (*Session)(nil)
	_ transports.ModelSetter   = (*Session)(nil)
	_ transports.PostureSetter = (*Session)(nil)
)

// Settings are the sandbox and approval policy the app-server reported for
// the thread (thread/start or thread/resume), as it spells them.
type Settings struct {
	Sandbox        string
	ApprovalPolicy string
	Model          string
	Effort         string
}

// newSession is a session whose processes get codexHome as CODEX_HOME;
// nothing runs yet.
func newSession(t *Transport, spec transports.SessionSpec, sink transports.Sink, bin, codexHome string, ws *gate.Workspace) *Session {
	s := &Session{t: t, posture: spec.Posture, effort: effortMap[spec.Effort]}
	s.Shell = cli.NewShell(backend, &t.Cfg, spec, sink, bin, "", newSessionCore(t, spec, ws))
	s.HostEnv = []string{"CODEX_HOME=" + codexHome}
	// JSON-RPC ids as numbers, as Codex numbers its own
	s.NewID = func() string { s.seq++; return strconv.Itoa(s.seq) }
	return s
}

func newSessionCore(t *Transport, spec transports.SessionSpec, ws *gate.Workspace) *core {
	return newCore(coreConfig{outputCap: t.Cfg.OutputCap, posture: spec.Posture, ws: ws})
}

// call sends a request of the host and waits for its result, bounded by
// ctx and limit; its errors are typed (cli.Shell.Request).
func (s *Session) call(ctx context.Context, op, method string, params any, limit time.Duration) (json.RawMessage, error) {
	r, err := s.Request(ctx, op, method, limit, func(id string) []byte { return encodeRequest(id, method, params) })
	return r.Result, err
}

// start runs a new app-server and completes initialize and thread/start
// (or thread/resume when the session has a thread already or resumes one),
// both bounded by the start timeout.
func (s *Session) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.t.Cfg.StartTimeout)
	defer cancel()
	p, err := s.boot(ctx)
	if err != nil {
		return err
	}
	return s.openThread(ctx, p)
}

// boot runs a new app-server, contained by the session's process group
// (the kit spawns it through proc), and completes initialize: all a warm
// pool does ahead of a start.
func (s *Session) boot(ctx context.Context) (*cli.Proc, error) {
	s.Lock()
	p, err := s.Spawn([]string{"app-server"})
	s.Unlock()
	if err != nil {
		return nil, messages.Wrap(messages.CodeUnsupported, messages.OpStart, err, fmt.Sprintf("cannot start %s app-server: %v", s.Bin, err))
	}
	if _, err := s.call(ctx, messages.OpStart, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "codesession", "title": "codesession", "version": "1"},
		"capabilities": nil,
	}, s.t.Cfg.StartTimeout); err != nil {
		return nil, s.bootFailed(p, "initialize", err)
	}
	p.Write(encodeNotification("initialized"))
	return p, nil
}

// bootFailed kills p unless it exited and says why the handshake failed,
// with the end of its stderr.
func (s *Session) bootFailed(p *cli.Proc, what string, err error) error {
	if !errors.Is(err, cli.ErrExited) {
		p.Kill()
	}
	return s.StartErr(p, messages.OpStart, "during "+what, what, err)
}

// openThread starts the session's thread on the initialized process p
// (thread/resume when the session has a thread or resumes one): the cwd,
// model, sandbox and approval policy go as its parameters, and Codex reads
// the CODEX_HOME's config.toml again for it (verified on 0.169.0), so a
// pooled process takes the adopting session's settings here.
func (s *Session) openThread(ctx context.Context, p *cli.Proc) error {
	s.Lock()
	thread := s.Ext
	if thread == "" {
		thread = s.Spec.ResumeExternalID
	}
	params := s.threadParams()
	s.Unlock()
	method := "thread/start"
	if thread != "" {
		method = "thread/resume"
		params["threadId"] = thread
		params["excludeTurns"] = true // the history stays in Codex; we need none of it
	}
	res, err := s.call(ctx, messages.OpStart, method, params, s.t.Cfg.StartTimeout)
	if err != nil {
		return s.bootFailed(p, method, err)
	}
	var r struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		Model           string          `json:"model"`
		ReasoningEffort string          `json:"reasoningEffort"`
		ApprovalPolicy  json.RawMessage `json:"approvalPolicy"`
		Sandbox         json.RawMessage `json:"sandbox"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Thread.ID == "" {
		return s.bootFailed(p, method, fmt.Errorf("no thread id in %s", clip(res, 200)))
	}
	s.Lock()
	s.Ext, s.Core.thread, s.Model = r.Thread.ID, r.Thread.ID, r.Model
	s.settings = Settings{Sandbox: sandboxType(r.Sandbox), ApprovalPolicy: unquote(r.ApprovalPolicy), Model: r.Model, Effort: r.ReasoningEffort}
	s.sendPost = false
	s.Unlock()
	return nil
}

// threadParams are thread/start's (and thread/resume's) settings; with
// the mutex held.
func (s *Session) threadParams() map[string]any {
	pc, _ := PostureOf(s.posture)
	p := map[string]any{"approvalPolicy": pc.ApprovalPolicy, "sandbox": pc.Sandbox}
	if s.Spec.Cwd != "" {
		p["cwd"] = s.Spec.Cwd
	}
	if m := firstNonEmpty(s.model, s.Spec.Model); m != "" {
		p["model"] = m
	}
	if s.Spec.AppendSystemPrompt != "" {
		p["developerInstructions"] = s.Spec.AppendSystemPrompt
	}
	return p
}

// sandboxType reads the sandbox of a thread response: {"type": "..."} or
// a bare mode string.
func sandboxType(raw json.RawMessage) string {
	var obj struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Type != "" {
		return obj.Type
	}
	return unquote(raw)
}

func unquote(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// StartTurn sends input as turn n (turn/start, with the model, effort and
// posture changed since the last turn), starting the app-server again
// first, on the thread, when it is not running.
func (s *Session) StartTurn(ctx context.Context, n int, input string) error {
	s.Lock()
	if err := s.LiveErr(messages.OpStart); err != nil {
		s.Unlock()
		return err
	}
	c := s.Core
	switch {
	case c.Fatal:
		s.Unlock()
		return messages.Errorf(messages.CodeNotLive, messages.OpStart, "the codex app-server died mid-turn; resume the session")
	case c.Running:
		s.Unlock()
		return messages.Errorf(messages.CodeConflict, messages.OpStart, "turn %d is still running", c.Number)
	}
	dead := c.Dead || s.Proc == nil
	s.Unlock()
	if dead {
		if err := s.start(ctx); err != nil {
			return err
		}
	}
	s.Lock()
	if err := s.LiveErr(messages.OpStart); err != nil || s.Core.Dead {
		s.Unlock()
		return messages.Errorf(messages.CodeNotLive, messages.OpStart, "the codex app-server is gone")
	}
	params := map[string]any{"threadId": s.Ext, "input": textInput(input)}
	if s.model != "" {
		params["model"] = s.model
	}
	if s.effort != "" {
		params["effort"] = s.effort
	}
	if s.sendPost {
		pc, _ := PostureOf(s.posture)
		params["approvalPolicy"] = pc.ApprovalPolicy
		params["sandboxPolicy"] = map[string]any{"type": pc.SandboxPolicy}
		s.sendPost = false
	}
	c = s.Core
	c.beginTurn(n)
	s.OpenTurn(n, cli.Effects{})
	s.Unlock()

	res, err := s.call(ctx, messages.OpStart, "turn/start", params, s.t.Cfg.ControlTimeout)
	s.Lock()
	defer s.Unlock()
	if err != nil {
		if c.Running && c.Number == n && c.codexTurn == "" {
			var fx cli.Effects
			c.End(&fx) // the turn never started: nothing to report
			s.Apply(fx, time.Time{})
		}
		return err
	}
	var r struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	_ = json.Unmarshal(res, &r)
	if c.Number == n {
		c.turnStarted(r.Turn.ID)
	}
	return nil
}

// Steer sends text into the running turn (turn/steer).
func (s *Session) Steer(ctx context.Context, text string) error {
	s.Lock()
	c := s.Core
	running, known, encode := c.Running && !c.Dead, c.codexTurn != "", c.steerRequest(text)
	s.Unlock()
	if !running {
		return messages.Errorf(messages.CodeConflict, messages.OpGuide, "no turn is running to steer")
	}
	if !known {
		return messages.Errorf(messages.CodeConflict, messages.OpGuide, "the running turn has not started in codex yet")
	}
	_, err := s.Request(ctx, messages.OpGuide, "turn/steer", s.t.Cfg.ControlTimeout, encode)
	return err
}

// SetModel sets the model and effort of the following turns (turn/start's
// per-turn overrides).
func (s *Session) SetModel(ctx context.Context, model string, effort messages.Effort) error {
	if effort != "" && !effort.Valid() {
		return messages.FieldError(messages.OpGuide, "effort", "unknown effort %q", effort)
	}
	s.Lock()
	defer s.Unlock()
	if model != "" {
		s.model = model
	}
	if e, ok := effortMap[effort]; ok {
		s.effort = e
	}
	return nil
}

// SetPosture changes the sandbox and approval policy from the next
// turn/start on, and the transport's own auto-acceptance at once.
func (s *Session) SetPosture(ctx context.Context, p messages.Posture) error {
	if _, ok := PostureOf(p); !ok {
		return messages.FieldError(messages.OpSetPosture, "posture", "unknown posture %q", p)
	}
	s.Lock()
	defer s.Unlock()
	if s.posture != p {
		s.posture, s.sendPost = p, true
		s.Core.cfg.posture = p
	}
	return nil
}

// Settings returns what the app-server reported for the thread when the
// current process started it (or resumed it).
func (s *Session) Settings() Settings {
	s.Lock()
	defer s.Unlock()
	return s.settings
}

// ThreadID is Codex's thread id, the session's external id.
func (s *Session) ThreadID() string {
	s.Lock()
	defer s.Unlock()
	return s.Ext
}

// Close stops the app-server (cli.Shell.Close), then removes the link an
// adoption left and a CODEX_HOME Open made for a session that never got a
// thread; idempotent.
func (s *Session) Close(ctx context.Context) error {
	if err := s.Shell.Close(ctx); err != nil {
		return err
	}
	s.Lock()
	thread, oldHome, freshHome := s.Ext, s.oldHome, s.freshHome
	s.Unlock()
	if oldHome != "" {
		_ = os.Remove(oldHome)
	}
	if thread == "" {
		_ = removeFresh(freshHome)
	}
	return nil
}

// Discard closes the session within 10 s (a failed open, a pooled process
// nobody adopts), its CODEX_HOME cleanup included.
func (s *Session) Discard() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Close(ctx)
}
