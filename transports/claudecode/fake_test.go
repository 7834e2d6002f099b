package claudecode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// envFake makes the test binary act as a fake claude (see fakeClaude).
const envFake = "CODESESSION_FAKE_CLAUDE"

// ignoringSignals is what the stubborn fake says once a "hang" turn
// ignores SIGINT and SIGTERM.
const ignoringSignals = "ignoring SIGINT and SIGTERM"

// TestMain runs the fake claude when asked to, else the tests, failing
// the package if a goroutine outlives them.
func TestMain(m *testing.M) {
	if mode := os.Getenv(envFake); mode != "" {
		os.Exit(fakeClaude(mode, os.Stdin, os.Stdout))
	}
	goleak.VerifyTestMain(m)
}

// fakeClaude speaks just enough of the protocol for the shell's own
// tests, deterministically. Modes: "normal"; "stubborn" (ignores SIGINT
// and SIGTERM while a "hang" turn runs, and then says ignoringSignals); "mute" (never answers control
// requests but initialize); "silent" (never answers anything). User messages: "hang" (no result, ever),
// "hook" (asks the host a hook_callback and reports its answer), anything
// else is echoed in a result.
func fakeClaude(mode string, in io.Reader, out io.Writer) int {
	enc := json.NewEncoder(out)
	sid := ""
	for i, a := range os.Args {
		if (a == "--session-id" || a == "--resume") && i+1 < len(os.Args) {
			sid = os.Args[i+1]
		}
	}
	fmt.Fprintln(os.Stderr, "fake claude: mode", mode)
	total := 0.0
	respond := func(id string, resp map[string]any) {
		_ = enc.Encode(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": id, "response": resp}})
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m struct {
			Type      string `json:"type"`
			RequestID string `json:"request_id"`
			Request   struct {
				Subtype string `json:"subtype"`
				Mode    string `json:"mode"`
			} `json:"request"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			Response struct {
				Subtype string `json:"subtype"`
				Error   string `json:"error"`
			} `json:"response"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch {
		case mode == "silent":
		case m.Type == "control_request" && m.Request.Subtype == "initialize":
			respond(m.RequestID, map[string]any{"claude_code_version": PinnedVersion})
		case m.Type == "control_request" && mode == "mute":
		case m.Type == "control_request" && m.Request.Subtype == "set_permission_mode":
			_ = enc.Encode(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "error", "request_id": m.RequestID,
				"error": "Cannot set permission mode: " + m.Request.Mode, "error_code": "invalid_mode"}})
		case m.Type == "control_request":
			respond(m.RequestID, map[string]any{})
		case m.Type == "control_response":
			total += 0.001
			_ = enc.Encode(map[string]any{"type": "result", "subtype": "success", "num_turns": 1, "total_cost_usd": total,
				"result": "the host said: " + m.Response.Subtype + " " + m.Response.Error, "session_id": sid})
		case m.Type == "user":
			_ = enc.Encode(map[string]any{"type": "system", "subtype": "init", "session_id": sid, "model": "fake"})
			switch m.Message.Content {
			case "hang":
				if mode == "stubborn" {
					signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
					// said once the signals are ignored: the test waits for
					// it rather than for a pause it hopes is long enough
					_ = enc.Encode(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": ignoringSignals}}}})
				}
			case "hook":
				_ = enc.Encode(map[string]any{"type": "control_request", "request_id": "hook-1", "request": map[string]any{"subtype": "hook_callback"}})
			default:
				total += 0.001
				_ = enc.Encode(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": "echo: " + m.Message.Content}}}})
				_ = enc.Encode(map[string]any{"type": "result", "subtype": "success", "num_turns": 1, "total_cost_usd": total,
					"result": "echo: " + m.Message.Content, "session_id": sid})
			}
		}
	}
	return 0
}

// fakeLive opens a session on the fake claude.
func fakeLive(t *testing.T, mode string, opts ...Option) *live {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	l := &live{t: t, rec: newRecorder()}
	l.tr = New(append([]Option{WithBinary(exe)}, opts...)...)
	l.spec = transports.SessionSpec{SessionID: "cs_fake", Cwd: t.TempDir(), Home: t.TempDir(), Env: []string{envFake + "=" + mode}}
	l.open()
	return l
}

func TestFakeInterruptEscalates(t *testing.T) {
	// the control timeout only stops a hang: one that expired while a loaded
	// machine was slow to ack (or to see the SIGKILLed fake exit) added a
	// fourth warning, "did not acknowledge the interrupt in time"
	l := fakeLive(t, "stubborn", WithControlTimeout(time.Minute),
		WithInterruptDeadlines(InterruptDeadlines{Grace: 100 * time.Millisecond, AfterINT: 100 * time.Millisecond, AfterTERM: 100 * time.Millisecond}))
	ctx := ctxFor(t, 2*time.Minute)
	require.NoError(t, l.sess.StartTurn(ctx, 1, "hang"))
	// the escalation's 100 ms steps start with the Interrupt: the fake must
	// be ignoring its signals by then, or SIGINT ends the turn at the first
	// step (a sleep of 200 ms here was that hope, missed on a loaded machine)
	l.rec.wait(t, time.Minute, 0, func(te turnEvent) bool {
		return te.turn == 1 && te.ev.Type == messages.EvText && te.ev.Text == ignoringSignals
	})
	require.NoError(t, l.sess.(*session).Interrupt(ctx), "acknowledged, though the turn goes on")
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.EvTurnEnd, end.Type, dump(l.rec.all()))
	assert.Equal(t, messages.TurnInterrupted, end.State)
	assert.Contains(t, end.Text, "signal: killed")
	var warned []string
	for _, w := range l.rec.ofType(1, messages.EvWarning) {
		warned = append(warned, w.Text)
	}
	require.Len(t, warned, 3, dump(l.rec.all()))
	assert.Contains(t, warned[0], "sent SIGINT")
	assert.Contains(t, warned[1], "sent SIGTERM")
	assert.Contains(t, warned[2], "sent SIGKILL")

	// the next turn starts the process again (the fake left no transcript)
	require.NoError(t, l.sess.StartTurn(ctx, 2, "hello"))
	end2 := l.rec.turnEnd(t, 2)
	assert.Equal(t, messages.TurnCompleted, end2.State, dump(l.rec.all()))
	assert.Equal(t, "echo: hello", end2.Text)
	w := l.rec.ofType(2, messages.EvWarning)
	require.NotEmpty(t, w)
	assert.Contains(t, w[0].Text, "claude was started again with --session-id")
}

func TestFakeControlRequests(t *testing.T) {
	l := fakeLive(t, "normal")
	ctx := ctxFor(t, 30*time.Second)
	s := l.sess.(*session)
	// an error response is a typed error with the CLI's words
	err := s.SetPosture(ctx, messages.PosturePlan)
	require.Error(t, err)
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), "claude refused set_permission_mode: Cannot set permission mode: plan")
	require.NoError(t, s.SetModel(ctx, "other-model", ""))
	require.NoError(t, s.SetModel(ctx, "", ""), "nothing to switch")
	err = s.SetModel(ctx, "m", messages.EffortHigh)
	assert.Equal(t, messages.CodeUnsupported, messages.ErrorCode(err), "effort is fixed at start")
	err = s.SetModel(ctx, "m", messages.Effort("extreme"))
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))

	// a control request of the CLI we do not serve is refused, not left hanging
	require.NoError(t, s.StartTurn(ctx, 1, "hook"))
	end := l.rec.turnEnd(t, 1)
	assert.Equal(t, "the host said: error codesession does not handle hook_callback requests", end.Text)
	assert.NotEmpty(t, l.rec.ofType(1, messages.EvWarning))

	// closed: every op is refused
	l.close()
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(s.StartTurn(ctx, 2, "x")))
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(s.SetPosture(ctx, messages.PostureDefault)))
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(s.Answer(ctx, "x", messages.DecisionDeny, "")))
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(s.Steer(ctx, "x")))
	assert.NoError(t, s.Interrupt(ctx))
	assert.NoError(t, s.Close(ctx), "Close is idempotent")
}

func TestFakeControlTimeout(t *testing.T) {
	l := fakeLive(t, "mute", WithControlTimeout(200*time.Millisecond))
	err := l.sess.(*session).SetPosture(ctxFor(t, 10*time.Second), messages.PostureAcceptEdits)
	require.Error(t, err)
	assert.Equal(t, messages.CodeTimeout, messages.ErrorCode(err))
	var me *messages.Error
	require.ErrorAs(t, err, &me)
	assert.True(t, me.Retryable)
	// the caller's deadline counts too
	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	assert.Equal(t, messages.CodeTimeout, messages.ErrorCode(l.sess.(*session).SetModel(short, "m", "")))
}

func TestOpenFailures(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	sink := newRecorder().sink
	// no binary
	tr := New(WithBinary("/nonexistent/claude"))
	_, err := tr.Open(ctx, transports.SessionSpec{Cwd: t.TempDir()}, sink)
	assert.Equal(t, messages.CodeInternal, messages.ErrorCode(err))
	a := tr.Probe(ctx)
	assert.False(t, a.Available)
	assert.Contains(t, a.Reason, "/nonexistent/claude --version failed")
	// a process that never answers initialize
	exe, _ := os.Executable()
	tr = New(WithBinary(exe), WithStartTimeout(300*time.Millisecond))
	_, err = tr.Open(ctx, transports.SessionSpec{Cwd: t.TempDir(), Home: t.TempDir(), Env: []string{envFake + "=silent"}}, sink)
	assert.Equal(t, messages.CodeTimeout, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), "fake claude: mode silent", "the stderr rides along")
	// a process that exits at once
	script := filepath.Join(t.TempDir(), "claude")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho 'cannot be used with root/sudo privileges' >&2\nexit 1\n"), 0o755))
	_, err = New(WithBinary(script)).Open(ctx, transports.SessionSpec{Cwd: t.TempDir()}, sink)
	assert.Equal(t, messages.CodeInternal, messages.ErrorCode(err))
	assert.Equal(t, "start: internal: claude exited at start (exit status 1): cannot be used with root/sudo privileges", err.Error())
	// bad specs
	for _, spec := range []transports.SessionSpec{{Posture: "bogus"}, {Effort: "huge"}, {Cwd: "/nonexistent/dir"}} {
		_, err := New(WithBinary(exe)).Open(ctx, spec, sink)
		assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err), "%+v", spec)
	}
	_, err = New(WithBinary(exe)).Open(ctx, transports.SessionSpec{}, nil)
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
}

// TestBootQueue: with one boot slot, a second Open waits while the first CLI
// is in its handshake and fails only on its own caller's deadline, never on
// a control timeout; once the slot frees, an Open goes through. On main
// before the slot, twenty concurrent starts on two cores failed their
// handshakes under the 15 s control timeout.
func TestBootQueue(t *testing.T) {
	exe, _ := os.Executable()
	sink := newRecorder().sink
	tr := New(WithBinary(exe), WithMaxBooting(1), WithControlTimeout(time.Millisecond), WithStartTimeout(time.Minute))
	spec := func(mode string) transports.SessionSpec {
		return transports.SessionSpec{Cwd: t.TempDir(), Home: t.TempDir(), Env: []string{envFake + "=" + mode}}
	}
	// a CLI that never answers holds the one slot until its Open's context ends
	holdCtx, release := context.WithCancel(context.Background())
	held := make(chan error, 1)
	go func() {
		_, err := tr.Open(holdCtx, spec("silent"), sink)
		held <- err
	}()
	require.Eventually(t, func() bool { return len(tr.Cfg.Booting) == 1 }, time.Minute, 5*time.Millisecond)
	short, stop := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer stop()
	_, err := tr.Open(short, spec("normal"), sink)
	require.Error(t, err)
	assert.Equal(t, messages.CodeTimeout, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), "still starting", "it waited in the queue, it did not spawn")
	release()
	require.Error(t, <-held)
	// the slot is free again, and the handshake is bounded by the start
	// timeout, not the (1 ms) control timeout
	s, err := tr.Open(ctxFor(t, 2*time.Minute), spec("normal"), sink)
	require.NoError(t, err)
	require.NoError(t, s.Close(ctxFor(t, time.Minute)))
	assert.Empty(t, tr.Cfg.Booting)
}
