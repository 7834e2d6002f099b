// Package runtimetest is the live-test rig for a backend driven through
// the whole runtime (actors.Runtime) against a real CLI: a modelmock with
// the reference rules and a slow rule, a runtime whose only backend is the
// one under test, and the steps every backend's runtime test takes (a gated
// call allowed or denied, acceptEdits, a slow turn interrupted, stop and
// resume of the record). It is imported by tests only; it lives under
// actors, not beside transporttest, because it drives the runtime, which
// imports every backend, and transports never import actors.
package runtimetest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/proctest"
)

// Slow is the prompt of the slow rule: a reply streamed one chunk a second.
const Slow = "TAKE YOUR TIME"

// Config is what differs between backends.
type Config struct {
	// Backend is the transport under test.
	Backend transports.Transport
	// Env is the runtime's environment pointing the CLI at mock (HOME is
	// a fresh directory unless Env sets it).
	Env func(mock *modelmock.Server) map[string]string
	// SlowChunks is how many seconds the slow reply streams.
	SlowChunks int
	// Timeout bounds the whole test (a hang, not a speed verdict).
	Timeout time.Duration
	// Options are more runtime options (an event listener).
	Options []actors.Option
	// Scenario, when set, scripts the mock in place of the reference
	// rules and the slow rule.
	Scenario *modelmock.Scenario
	// Prepare, when set, edits the runtime's config before the runtime
	// starts: a longer supervision timeout, files under cfg.Home.
	Prepare func(cfg *config.Config)
}

// Rig is one runtime of one backend, closed at the test's end (or by
// Close before it).
type Rig struct {
	T     *testing.T
	RT    *actors.Runtime
	Mock  *modelmock.Server
	Work  string
	Ctx   context.Context
	Scope string
	// Home is the runtime's home (config.Home): its process records are
	// under KitDir.
	Home   string
	closed bool
}

// New starts the mock and the runtime of c.
func New(t *testing.T, scope string, c Config) *Rig {
	sc := c.Scenario
	if sc == nil {
		sc = modelmock.Reference()
		if c.SlowChunks > 0 {
			sc.Rules = append(sc.Rules, modelmock.Rule{
				Match: modelmock.Match{Text: Slow},
				Steps: []modelmock.Step{{Text: strings.Repeat("slow ", c.SlowChunks), Chunks: c.SlowChunks, ChunkDelay: modelmock.Duration(time.Second)}},
			})
		}
	}
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = c.Backend.Descriptor().ID
	cfg.Supervision.ShutdownTimeout = config.Duration(10 * time.Second)
	cfg.Env = map[string]string{"HOME": t.TempDir()} // never the real one
	for k, v := range c.Env(mock) {
		cfg.Env[k] = v
	}
	if c.Prepare != nil {
		c.Prepare(&cfg)
	}
	rt, err := actors.New(cfg, append([]actors.Option{actors.WithBackends(transports.NewRegistry(c.Backend))}, c.Options...)...)
	require.NoError(t, err)
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	r := &Rig{T: t, RT: rt, Mock: mock, Work: t.TempDir(), Ctx: ctx, Scope: scope, Home: cfg.Home}
	t.Cleanup(func() {
		cancel()
		if !r.closed {
			r.Close()
		}
	})
	return r
}

// Start starts a session in Work with brief on model.
func (r *Rig) Start(brief, model string) string {
	return r.StartWith(messages.Start{Brief: brief, Model: model})
}

// StartWith starts the session st says, in Work unless it names a Cwd.
func (r *Rig) StartWith(st messages.Start) string {
	if st.Cwd == "" {
		st.Cwd = r.Work
	}
	res, err := r.RT.Start(r.Ctx, r.Scope, st)
	require.NoError(r.T, err)
	return res.SessionID
}

// Turn starts a session of brief on model and requires its first turn to
// complete, returning the session and the turn.
func (r *Rig) Turn(brief, model string) (string, messages.TurnResult) {
	sid := r.Start(brief, model)
	return sid, r.Read(sid, messages.KindTurnComplete, false)
}

// KitDir is where the runtime's process kit records its process groups.
func (r *Rig) KitDir() string { return filepath.Join(r.Home, "run", "procs") }

// Close closes the runtime now, requiring no error (the deadline only
// stops a hang); the test's cleanup then closes nothing.
func (r *Rig) Close() {
	r.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(r.T, r.RT.Close(ctx))
}

// CloseLeavesNothing closes the runtime and requires every process
// group recorded under its kit before the close (want of them: the
// sessions' and the pool's) gone after it, and no record left.
func (r *Rig) CloseLeavesNothing(want int) {
	groups := proctest.ByPgid(r.T, r.KitDir())
	require.Len(r.T, groups, want, "the recorded process groups before the close: %v", groups)
	r.Close()
	for p, rec := range groups {
		assert.Eventually(r.T, func() bool { return !proctest.GroupAlive(p) }, time.Minute, 20*time.Millisecond,
			"process group %d (%s) outlived Runtime.Close", p, rec.SessionID)
	}
	assert.Empty(r.T, proctest.ByPgid(r.T, r.KitDir()), "no process record is left")
}

// Read reads sid's turn and requires kind.
func (r *Rig) Read(sid string, kind messages.TurnKind, diff bool) messages.TurnResult {
	res, err := r.RT.ReadTurn(r.Ctx, r.Scope, messages.ReadTurn{SessionID: sid, IncludeDiff: diff})
	require.NoError(r.T, err)
	require.Equal(r.T, kind, res.Kind, "%+v", res)
	return res
}

// Guide sends sid guidance text.
func (r *Rig) Guide(sid, text string, mode messages.GuideMode) {
	_, err := r.RT.Guide(r.Ctx, r.Scope, messages.Guide{SessionID: sid, Text: text, Mode: mode})
	require.NoError(r.T, err)
}

// Answer answers sid's clarification id.
func (r *Rig) Answer(sid, id string, d messages.Decision, reason string) {
	_, err := r.RT.Answer(r.Ctx, r.Scope, messages.Answer{SessionID: sid, ClarificationID: id, Decision: d, Reason: reason})
	require.NoError(r.T, err)
}

// Allowed reads a clarification of tool, requires path (the file it
// writes) not there yet, allows it, and returns the completed turn with
// its diff.
func (r *Rig) Allowed(sid, tool, path string) messages.TurnResult {
	c := r.Read(sid, messages.KindClarification, false)
	assert.Equal(r.T, tool, c.ToolName)
	assert.NoFileExists(r.T, path, "written before it was allowed")
	r.Answer(sid, c.ClarificationID, messages.DecisionAllowOnce, "")
	return r.Read(sid, messages.KindTurnComplete, true)
}

// DiffNames asserts the turn's diff names file.
func DiffNames(t *testing.T, res messages.TurnResult, file string) {
	require.NotNil(t, res.TurnDiff)
	var files []string
	for _, f := range res.TurnDiff.Files {
		files = append(files, f.Path)
	}
	assert.Contains(t, strings.Join(files, " "), file, "the runtime's diff names the written file: %+v", res.TurnDiff)
}

// Denied sends text, whose call of tool asks; denies it with a reason
// and requires the turn to complete with the model shown the reason.
func (r *Rig) Denied(sid, text, tool string) messages.TurnResult {
	r.Guide(sid, text, "")
	c := r.Read(sid, messages.KindClarification, false)
	assert.Equal(r.T, tool, c.ToolName)
	r.Answer(sid, c.ClarificationID, messages.DecisionDeny, "no shell in this repo")
	res := r.Read(sid, messages.KindTurnComplete, false)
	assert.True(r.T, r.Mock.Saw("no shell in this repo"), "the model received the deny reason")
	return res
}

// AcceptEdits sets acceptEdits and sends text, whose edit runs without
// asking.
func (r *Rig) AcceptEdits(sid, text string) {
	_, err := r.RT.SetPosture(r.Ctx, r.Scope, messages.SetPosture{SessionID: sid, Posture: messages.PostureAcceptEdits})
	require.NoError(r.T, err)
	r.Guide(sid, text, "")
	r.Read(sid, messages.KindTurnComplete, false)
}

// SlowInterrupted starts a slow turn, waits until the model is asked,
// steers it with steer (when not empty), interrupts it and requires it
// interrupted.
func (r *Rig) SlowInterrupted(sid, steer string) {
	// Count the model's requests before the guidance goes: the agent may
	// send the slow turn's request before Guide returns (CI saw it once),
	// and counting after would wait for a request that never comes.
	n := len(r.Mock.MainRequests())
	r.Guide(sid, Slow, "")
	require.Eventually(r.T, func() bool { return len(r.Mock.MainRequests()) > n }, time.Minute, 20*time.Millisecond)
	if steer != "" {
		r.Guide(sid, steer, messages.GuideSteer)
	}
	_, err := r.RT.Interrupt(r.Ctx, r.Scope, messages.Interrupt{SessionID: sid})
	require.NoError(r.T, err)
	assert.Equal(r.T, messages.TurnInterrupted, r.Read(sid, messages.KindTurnComplete, false).State)
}

// StopResumed stops sid with a verdict, resumes the record ("what did I
// ask first?"), requires the reply pong and the model's last request to
// carry history (what turn 1 said), stops it again, and requires both runs
// of the record on the same agent session id, which it returns.
func (r *Rig) StopResumed(sid, pong, history string) string {
	stop, err := r.RT.Stop(r.Ctx, r.Scope, messages.Stop{SessionID: sid, Outcome: messages.OutcomeSuccess})
	require.NoError(r.T, err)
	assert.Equal(r.T, messages.OutcomeSuccess, stop.Outcome)
	rec, err := r.RT.Store().GetMeta(r.Ctx, sid)
	require.NoError(r.T, err)
	require.Len(r.T, rec.Runs, 1)
	ext := rec.Runs[0].ExternalSessionID
	require.NotEmpty(r.T, ext)
	_, err = r.RT.Resume(r.Ctx, r.Scope, messages.Resume{SessionID: sid, Brief: "what did I ask first?"})
	require.NoError(r.T, err)
	assert.Equal(r.T, pong, r.Read(sid, messages.KindTurnComplete, false).Text)
	r.LastRequestHas(history, "the history came back with the resume")
	_, err = r.RT.Stop(r.Ctx, r.Scope, messages.Stop{SessionID: sid})
	require.NoError(r.T, err)
	rec, err = r.RT.Store().GetMeta(r.Ctx, sid)
	require.NoError(r.T, err)
	require.Len(r.T, rec.Runs, 2)
	assert.Equal(r.T, ext, rec.Runs[1].ExternalSessionID)
	return ext
}

// LastRequestHas asserts the model's last request carries s.
func (r *Rig) LastRequestHas(s, why string) {
	last := r.Mock.MainRequests()
	require.NotEmpty(r.T, last)
	assert.Contains(r.T, string(last[len(last)-1].Body), s, why)
}
