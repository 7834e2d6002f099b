package grok

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

type rec struct {
	mu  sync.Mutex
	evs []struct {
		turn int
		ev   messages.Event
	}
}

func (r *rec) sink(turn int, ev messages.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, struct {
		turn int
		ev   messages.Event
	}{turn, ev})
}

// end waits for the event closing turn.
func (r *rec) end(t *testing.T, turn int) messages.Event {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, e := range r.evs {
			if e.turn == turn && (e.ev.Type == messages.EvTurnEnd || (e.ev.Type == messages.EvError && e.ev.Fatal)) {
				r.mu.Unlock()
				return e.ev
			}
		}
		r.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("turn %d did not end", turn)
	return messages.Event{}
}

func (r *rec) of(turn int, typ messages.EventType) []messages.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []messages.Event
	for _, e := range r.evs {
		if e.turn == turn && e.ev.Type == typ {
			out = append(out, e.ev)
		}
	}
	return out
}

func open(t *testing.T, tr *Transport, spec transports.SessionSpec) (transports.Session, *rec) {
	t.Helper()
	r := &rec{}
	if spec.Cwd == "" {
		spec.Cwd = t.TempDir()
	}
	if spec.Home == "" {
		spec.Home = t.TempDir()
	}
	s, err := tr.Open(context.Background(), spec, r.sink)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s, r
}

// TestPostureAndEffortAsGrokReceivedThem checks every posture's and
// effort's flag in the argv the (fake) CLI received, the session pinned by
// -s on turn 1 and --resume after, and --tools never passed.
func TestPostureAndEffortAsGrokReceivedThem(t *testing.T) {
	tr, log := fakeGrokTransport(t, nil)
	s, r := open(t, tr, transports.SessionSpec{Posture: messages.PosturePlan, Effort: messages.EffortMax, Model: "grok-4.5"})
	started := r.of(0, messages.EvStarted)
	require.Len(t, started, 1)
	ext := started[0].ExternalSessionID
	want := map[messages.Posture]string{messages.PosturePlan: "plan", messages.PostureDefault: "default",
		messages.PostureAcceptEdits: "auto", messages.PostureFull: "bypassPermissions"}
	turn := 0
	for _, p := range messages.Postures() {
		require.NoError(t, s.(transports.PostureSetter).SetPosture(context.Background(), p))
		turn++
		require.NoError(t, s.StartTurn(context.Background(), turn, "hello "+string(p)))
		end := r.end(t, turn)
		require.Equal(t, messages.TurnCompleted, end.State, end.Text)
		assert.Equal(t, "PONG: hello "+string(p), end.Text)
	}
	argvs := argvLog(t, log)
	require.Len(t, argvs, 4)
	for i, p := range messages.Postures() {
		a := argvs[i]
		got, _ := flagValue(a, "--permission-mode")
		assert.Equal(t, want[p], got, "posture %s", p)
		e, _ := flagValue(a, "--reasoning-effort")
		assert.Equal(t, "max", e)
		m, _ := flagValue(a, "-m")
		assert.Equal(t, "grok-4.5", m)
		of, _ := flagValue(a, "--output-format")
		assert.Equal(t, "json", of)
		assert.NotContains(t, a, "--tools")
		if i == 0 {
			v, ok := flagValue(a, "-s")
			assert.True(t, ok)
			assert.Equal(t, ext, v)
			assert.NotContains(t, a, "--resume")
		} else {
			v, ok := flagValue(a, "--resume")
			assert.True(t, ok)
			assert.Equal(t, ext, v)
			assert.NotContains(t, a, "-s")
		}
	}
}

// TestAcceptEditsIsAutoNotTheTrap: grok's own acceptEdits cancels a write
// headless; the acceptEdits posture must run grok's auto, which writes.
func TestAcceptEditsIsAutoNotTheTrap(t *testing.T) {
	ws := t.TempDir()
	target := filepath.Join(ws, "f.txt")
	w := &struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}{target, "written\n"}
	tr, _ := fakeGrokTransport(t, []fakeRule{{Match: "write", Write: w, Reply: "done"}})

	s, r := open(t, tr, transports.SessionSpec{Cwd: ws, Posture: messages.PostureDefault})
	require.NoError(t, s.StartTurn(context.Background(), 1, "write f.txt"))
	end := r.end(t, 1)
	assert.Equal(t, messages.TurnCompleted, end.State)
	assert.NoFileExists(t, target, "default posture: grok cancels the gated write")
	warns := r.of(1, messages.EvWarning)
	require.NotEmpty(t, warns)
	assert.Contains(t, warns[0].Text, "cancelled")

	require.NoError(t, s.(transports.PostureSetter).SetPosture(context.Background(), messages.PostureAcceptEdits))
	require.NoError(t, s.StartTurn(context.Background(), 2, "write f.txt again"))
	end = r.end(t, 2)
	assert.Equal(t, messages.TurnCompleted, end.State)
	assert.Equal(t, "done", end.Text)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "written\n", string(b))
}

func TestErrorEnvelopeErrsTheTurn(t *testing.T) {
	tr, _ := fakeGrokTransport(t, []fakeRule{{Match: "bad key", Error: "Internal error: API error (status 400 Bad Request): invalid-argument: Incorrect API key provided"}})
	s, r := open(t, tr, transports.SessionSpec{})
	require.NoError(t, s.StartTurn(context.Background(), 1, "hello"))
	require.Equal(t, messages.TurnCompleted, r.end(t, 1).State)
	require.NoError(t, s.StartTurn(context.Background(), 2, "bad key"))
	end := r.end(t, 2)
	assert.Equal(t, messages.TurnErrored, end.State)
	assert.Contains(t, end.Text, "Incorrect API key")
	// the session goes on
	require.NoError(t, s.StartTurn(context.Background(), 3, "hello again"))
	assert.Equal(t, messages.TurnCompleted, r.end(t, 3).State)
}

func TestAllowedToolsRejected(t *testing.T) {
	tr, _ := fakeGrokTransport(t, nil)
	_, err := tr.Open(context.Background(), transports.SessionSpec{Cwd: t.TempDir(), AllowedTools: []string{"bash"}}, func(int, messages.Event) {})
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), "--tools")
}

func TestInterrupt(t *testing.T) {
	tr, _ := fakeGrokTransport(t, []fakeRule{{Match: "slow", Sleep: 600, Reply: "never"}})
	s, r := open(t, tr, transports.SessionSpec{})
	require.NoError(t, s.StartTurn(context.Background(), 1, "slow job"))
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, s.(transports.Interrupter).Interrupt(context.Background()))
	end := r.end(t, 1)
	assert.Equal(t, messages.TurnInterrupted, end.State)
	require.NoError(t, s.StartTurn(context.Background(), 2, "hello"))
	end2 := r.end(t, 2)
	assert.Equal(t, messages.TurnCompleted, end2.State, end2.Text)
}

func TestProbeReadsTheVersion(t *testing.T) {
	tr, _ := fakeGrokTransport(t, nil)
	a := tr.Probe(context.Background())
	require.True(t, a.Available, a.Reason)
	assert.Equal(t, "0.2.93", a.Version)
	assert.True(t, strings.Contains(tr.Descriptor().DisplayName, "replay-tested"))
	assert.Contains(t, tr.Descriptor().BriefingNotes, "NOT TESTED LIVE")
}

func TestCloseMidTurn(t *testing.T) {
	tr, _ := fakeGrokTransport(t, []fakeRule{{Match: "slow", Sleep: 600, Reply: "never"}})
	r := &rec{}
	s, err := tr.Open(context.Background(), transports.SessionSpec{Cwd: t.TempDir(), Home: t.TempDir()}, r.sink)
	require.NoError(t, err)
	require.NoError(t, s.StartTurn(context.Background(), 1, "slow job"))
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.Close(ctx))
	require.NoError(t, s.Close(ctx), "idempotent")
	r.mu.Lock()
	n := len(r.evs)
	r.mu.Unlock()
	assert.Equal(t, 1, n, "only EvStarted: nothing after Close")
	err = s.StartTurn(context.Background(), 2, "after close")
	assert.Equal(t, messages.CodeNotLive, messages.ErrorCode(err))
}
