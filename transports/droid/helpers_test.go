package droid

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// mockModelID is the id droid derives from the display name of the one
// custom model writeFactorySettings configures.
const mockModelID = "custom:Loopback-Mock-(chat)-0"

// droidBinary finds the real CLI for the live tests: $CODESESSION_DROID_BIN,
// else droid on PATH; a skip without it, a failure under CI=true.
func droidBinary(t testing.TB) string {
	t.Helper()
	return subprocesstest.Find(t, EnvBinary, "npm install droid@"+PinnedVersion, "droid")
}

// writeFactorySettings points droid in home at the mock: one
// bring-your-own-key Chat Completions model, no Factory login.
func writeFactorySettings(t testing.TB, home, mockURL string) {
	t.Helper()
	settings := map[string]any{"customModels": []map[string]any{{
		"model": "mock-model", "displayName": "Loopback Mock (chat)", "baseUrl": mockURL + "/v1",
		"apiKey": "sk-mock", "provider": "generic-chat-completion-api", "maxOutputTokens": 8192,
	}}}
	b, err := json.Marshal(settings)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".factory"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".factory", "settings.json"), b, 0o600))
}

// live is one real droid session against a modelmock server.
type live struct {
	t    testing.TB
	mock *modelmock.Server
	tr   *Transport
	spec transports.SessionSpec
	rec  *recorder
	sess transports.Session
}

type liveOpts struct {
	posture messages.Posture
	effort  messages.Effort
	topts   []Option
}

// newLive starts modelmock with sc and opens a session in a fresh
// workspace with a fresh HOME (never the real ~/.factory).
func newLive(t testing.TB, sc *modelmock.Scenario, o liveOpts) *live {
	t.Helper()
	bin := droidBinary(t)
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	home := t.TempDir()
	writeFactorySettings(t, home, mock.URL())
	l := &live{t: t, mock: mock, rec: newRecorder()}
	l.tr = New(append([]Option{WithBinary(bin)}, o.topts...)...)
	l.spec = transports.SessionSpec{SessionID: "cs_test", Cwd: t.TempDir(), Home: home, Model: mockModelID,
		Posture: o.posture, Effort: o.effort}
	l.open()
	return l
}

func (l *live) open() {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := l.tr.Open(ctx, l.spec, l.rec.sink)
	require.NoError(l.t, err)
	l.sess = s
	l.t.Cleanup(func() { l.close() })
}

func (l *live) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(l.t, l.sess.Close(ctx))
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// recorder collects a session's events.
type recorder struct {
	mu   sync.Mutex
	evs  []turnEvent
	more chan struct{}
}

func newRecorder() *recorder { return &recorder{more: make(chan struct{}, 1)} }

func (r *recorder) sink(turn int, ev messages.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, turnEvent{turn, ev})
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []turnEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]turnEvent(nil), r.evs...)
}

func (r *recorder) wait(t testing.TB, d time.Duration, match func(turnEvent) bool) turnEvent {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		evs := r.all()
		for _, te := range evs {
			if match(te) {
				return te
			}
		}
		select {
		case <-r.more:
		case <-deadline.C:
			t.Fatalf("no matching event within %s; events:\n%s", d, dump(evs))
		}
	}
}

func (r *recorder) turnEnd(t testing.TB, turn int) messages.Event {
	t.Helper()
	return r.wait(t, 2*time.Minute, func(te turnEvent) bool {
		return te.turn == turn && (te.ev.Type == messages.EvTurnEnd || (te.ev.Type == messages.EvError && te.ev.Fatal))
	}).ev
}

func (r *recorder) ofType(turn int, typ messages.EventType) []messages.Event {
	var out []messages.Event
	for _, te := range r.all() {
		if te.turn == turn && te.ev.Type == typ {
			out = append(out, te.ev)
		}
	}
	return out
}

func dump(evs []turnEvent) string {
	var b strings.Builder
	for _, te := range evs {
		ev := te.ev
		fmt.Fprintf(&b, "  turn %d %s", te.turn, ev.Type)
		for _, f := range []struct{ k, v string }{{"text", ev.Text}, {"tool", ev.ToolName}, {"id", ev.ClarificationID},
			{"state", string(ev.State)}, {"input", string(ev.Input)}, {"output", ev.Output}, {"ext", ev.ExternalSessionID}} {
			if f.v != "" {
				v := f.v
				if len(v) > 160 {
					v = v[:160] + "..."
				}
				fmt.Fprintf(&b, " %s=%q", f.k, v)
			}
		}
		if ev.Fatal {
			b.WriteString(" fatal")
		}
		b.WriteString("\n")
	}
	return b.String()
}
