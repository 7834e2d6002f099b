package droid

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// A fake droid for the shell's own tests (process exits and restarts),
// which the real CLI cannot be made to do on cue: this test binary with
// envFakeDroid set answers the handshake and settings with {}, logs every
// request to envFakeDroidLog, and answers add_user_message by its text:
// "exit now" exits 3 mid-turn, "quit after" completes the turn and exits
// 0, anything else completes with "echo: <text>".
const (
	envFakeDroid    = "CODESESSION_FAKE_DROID"
	envFakeDroidLog = "CODESESSION_FAKE_DROID_LOG"
)

func TestMain(m *testing.M) {
	if os.Getenv(envFakeDroid) == "1" {
		os.Exit(fakeDroid())
	}
	os.Exit(m.Run())
}

func fakeDroid() int {
	out := bufio.NewWriter(os.Stdout)
	send := func(b []byte) { out.Write(b); out.Flush() }
	note := func(n map[string]any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "type": "notification", "method": methodNotification,
			"params": map[string]any{"notification": n}})
		send(append(b, '\n'))
	}
	log, _ := os.OpenFile(os.Getenv(envFakeDroidLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var env envelope
		if json.Unmarshal(sc.Bytes(), &env) != nil || env.Type != "request" {
			continue
		}
		id, _ := rawID(env.ID)
		if log != nil {
			fmt.Fprintf(log, "%s %s\n", env.Method, env.Params)
		}
		send(responseLine(id, map[string]any{}))
		if env.Method == methodUpdateSettings {
			var p Settings
			_ = json.Unmarshal(env.Params, &p)
			note(map[string]any{"type": "settings_updated", "settings": p})
		}
		if env.Method != methodAddUserMessage {
			continue
		}
		var p struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(env.Params, &p)
		if p.Text == "exit now" {
			fmt.Fprintln(os.Stderr, "fake droid: dying mid-turn")
			return 3
		}
		note(map[string]any{"type": "create_message", "message": map[string]any{"id": "m", "role": "assistant",
			"content": []any{map[string]any{"type": "text", "text": "echo: " + p.Text}}}})
		note(map[string]any{"type": "agent_turn_completed", "reason": "completed", "tokenUsage": map[string]any{"inputTokens": 1}})
		if p.Text == "quit after" {
			return 0
		}
	}
	return 0
}

func TestShellRestartsBetweenTurnsAndDiesMidTurn(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	log := t.TempDir() + "/requests.log"
	tr := New(WithBinary(exe), WithEnv(envFakeDroid+"=1", envFakeDroidLog+"="+log))
	rec := newRecorder()
	s, err := tr.Open(ctxFor(t, time.Minute), transports.SessionSpec{Cwd: t.TempDir(), Effort: messages.EffortHigh}, rec.sink)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	ext := rec.wait(t, time.Minute, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted }).ev.ExternalSessionID

	require.NoError(t, s.StartTurn(ctxFor(t, time.Minute), 1, "quit after"))
	assert.Equal(t, "echo: quit after", rec.turnEnd(t, 1).Text)
	rec.wait(t, time.Minute, func(te turnEvent) bool {
		return te.ev.Type == messages.EvWarning && strings.Contains(te.ev.Text, "exited between turns")
	})
	// between turns, with no process: kept for the restart
	require.NoError(t, s.(transports.PostureSetter).SetPosture(ctxFor(t, time.Minute), messages.PostureFull))
	require.NoError(t, s.StartTurn(ctxFor(t, time.Minute), 2, "hello"))
	end := rec.turnEnd(t, 2)
	require.Equal(t, messages.TurnCompleted, end.State, dump(rec.all()))
	assert.Equal(t, "echo: hello", end.Text)

	b, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 6, string(b))
	assert.Equal(t, methodInitialize, strings.Fields(lines[0])[0])
	assert.Contains(t, lines[0], ext)
	assert.Equal(t, methodUpdateSettings+` {"autonomyLevel":"off","reasoningEffort":"high"}`, lines[1])
	assert.Equal(t, methodLoad+` {"sessionId":"`+ext+`"}`, lines[3], "the restart loads the session")
	assert.Equal(t, methodUpdateSettings+` {"autonomyLevel":"high","reasoningEffort":"high"}`, lines[4], "the posture set between turns")

	require.NoError(t, s.StartTurn(ctxFor(t, time.Minute), 3, "exit now"))
	end = rec.turnEnd(t, 3)
	assert.Equal(t, messages.EvError, end.Type)
	assert.True(t, end.Fatal)
	assert.Contains(t, end.Text, "dying mid-turn")
	err = s.StartTurn(ctxFor(t, time.Minute), 4, "again")
	assert.Equal(t, messages.CodeInternal, messages.ErrorCode(err))
}
