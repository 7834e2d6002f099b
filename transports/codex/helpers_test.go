package codex

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// liveTimeout bounds each wait of a live test: generous, for a loaded
// 2-core machine under -race; it only stops hangs.
const liveTimeout = 2 * time.Minute

// codexBinary finds the real CLI: $CODESESSION_CODEX_BIN, else codex on
// PATH; a skip without it, a failure under CI=true.
func codexBinary(t testing.TB) string {
	t.Helper()
	return subprocesstest.Find(t, EnvBinary, "npm install @openai/codex@"+PinnedVersion, "codex")
}

// mockModel is the model every live test asks for: a known slug, so Codex
// offers its apply_patch tool.
const mockModel = "gpt-5.5"

// startMock serves sc on loopback for t.
func startMock(t *testing.T, sc *modelmock.Scenario) *modelmock.Server {
	t.Helper()
	m, err := modelmock.Start(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mockEnv points a session at m.
func mockEnv(m *modelmock.Server) []string {
	return []string{EnvBaseURL + "=" + m.URL() + "/v1", EnvAPIKey + "=sk-mock"}
}

// turnEvent is one recorded event and its turn.
type turnEvent struct {
	turn int
	ev   messages.Event
}

// recorder collects a session's events for a test.
type recorder struct {
	mu   sync.Mutex
	evs  []turnEvent
	wake chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) sink(turn int, ev messages.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, turnEvent{turn, ev})
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []turnEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]turnEvent(nil), r.evs...)
}

// wait returns the first event of turn n that pred accepts, failing the
// test after liveTimeout.
func (r *recorder) wait(t testing.TB, n int, what string, pred func(messages.Event) bool) messages.Event {
	t.Helper()
	deadline := time.After(liveTimeout)
	for {
		closed := false
		for _, e := range r.all() {
			if e.turn == n && pred(e.ev) {
				return e.ev
			}
			closed = closed || (e.turn == n && (e.ev.Type == messages.EvTurnEnd || (e.ev.Type == messages.EvError && e.ev.Fatal)))
		}
		if closed {
			t.Fatalf("turn %d closed without a %s\nevents:\n%s", n, what, r.dump())
		}
		select {
		case <-r.wake:
		case <-deadline:
			t.Fatalf("turn %d: no %s within %s\nevents:\n%s", n, what, liveTimeout, r.dump())
		}
	}
}

// turnEnd waits for turn n's close.
func (r *recorder) turnEnd(t testing.TB, n int) messages.Event {
	t.Helper()
	return r.wait(t, n, "turn end", func(ev messages.Event) bool {
		return ev.Type == messages.EvTurnEnd || (ev.Type == messages.EvError && ev.Fatal)
	})
}

func (r *recorder) turnEvents(n int) []messages.Event {
	var out []messages.Event
	for _, e := range r.all() {
		if e.turn == n {
			out = append(out, e.ev)
		}
	}
	return out
}

func (r *recorder) text(n int) string {
	var b strings.Builder
	for _, ev := range r.turnEvents(n) {
		if ev.Type == messages.EvText {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func (r *recorder) dump() string {
	var b strings.Builder
	for _, e := range r.all() {
		j, _ := json.Marshal(e.ev)
		b.WriteString(strings.Repeat(" ", 2))
		b.WriteString(strings.TrimSpace(string(j)))
		b.WriteString("  [turn ")
		b.WriteString(itoa(e.turn))
		b.WriteString("]\n")
	}
	return b.String()
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// openLive opens a codex session against m in a fresh workspace.
func openLive(t *testing.T, m *modelmock.Server, posture messages.Posture, opts ...Option) (*Session, *recorder, string) {
	t.Helper()
	bin := codexBinary(t)
	ws := t.TempDir()
	rec := newRecorder()
	tr := New(append([]Option{WithBinary(bin)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	s, err := tr.Open(ctx, transports.SessionSpec{SessionID: "t", Cwd: ws, Model: mockModel, Posture: posture,
		Home: t.TempDir(), Env: mockEnv(m)}, rec.sink)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*Session), rec, ws
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	t.Cleanup(cancel)
	return ctx
}

// patchStep calls apply_patch adding path (relative to the workspace)
// with content.
func patchStep(path, content string) modelmock.Step {
	return patchRaw("*** Begin Patch\n*** Add File: " + path + "\n+" + content + "\n*** End Patch\n")
}

// patchRaw calls apply_patch with a whole patch.
func patchRaw(patch string) modelmock.Step {
	in, _ := json.Marshal(map[string]string{"input": patch})
	return modelmock.Step{Tool: &modelmock.ToolCall{Name: "apply_patch", Input: in}}
}

// shellStep calls exec_command with cmd; escalated asks to leave the
// sandbox, which makes Codex ask for approval under on-request.
func shellStep(cmd string, escalated bool) modelmock.Step {
	// the tool answers once the command has exited (codex yields a
	// still-running command after yield_time_ms, 10 s by default, which a
	// login shell under a loaded machine can outlast), without the login
	// shell's profile
	args := map[string]any{"cmd": cmd, "yield_time_ms": 30000, "login": false}
	if escalated {
		args["sandbox_permissions"] = "require_escalated"
		args["justification"] = "the test wants it"
	}
	in, _ := json.Marshal(args)
	return modelmock.Step{Tool: &modelmock.ToolCall{Name: "exec_command", Input: in}}
}

func asError(err error, target **messages.Error) bool { return errors.As(err, target) }
