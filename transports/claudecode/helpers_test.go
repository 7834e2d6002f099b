package claudecode

import (
	"context"
	"fmt"
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

// claudeBinary finds the real CLI for the live tests: $CODESESSION_CLAUDE_BIN,
// else claude on PATH. Without one the test is skipped, except under CI=true
// where a live test that would skip fails instead (.ci/run installs the
// pinned version, so a missing binary there is a broken install).
func claudeBinary(t testing.TB) string {
	t.Helper()
	return subprocesstest.Find(t, EnvBinary, "npm install @anthropic-ai/claude-code@"+PinnedVersion, "claude")
}

// live is one real claude session against a modelmock server.
type live struct {
	t    testing.TB
	mock *modelmock.Server
	tr   *Transport
	spec transports.SessionSpec
	rec  *recorder
	sess transports.Session
}

// liveOpts adjust a live session.
type liveOpts struct {
	posture messages.Posture
	allowed []string
	env     []string
	topts   []Option
	model   string
}

// newLive starts modelmock with sc and opens a session in a fresh
// workspace with a fresh HOME (never the real ~/.claude).
func newLive(t testing.TB, sc *modelmock.Scenario, o liveOpts) *live {
	t.Helper()
	bin := claudeBinary(t)
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	if o.model == "" {
		o.model = "claude-mock-1"
	}
	l := &live{t: t, mock: mock, rec: newRecorder()}
	l.tr = New(append([]Option{WithBinary(bin)}, o.topts...)...)
	l.spec = transports.SessionSpec{
		SessionID:    "cs_test",
		Cwd:          t.TempDir(),
		Home:         t.TempDir(),
		Model:        o.model,
		Posture:      o.posture,
		AllowedTools: o.allowed,
		Env:          append([]string{"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test"}, o.env...),
	}
	l.open()
	return l
}

func (l *live) open() {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := l.tr.Open(ctx, l.spec, l.rec.sink)
	require.NoError(l.t, err)
	l.sess = s
	l.t.Cleanup(func() { l.close() })
}

func (l *live) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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

// wait returns the first event from index from on that matches, failing
// the test after d.
func (r *recorder) wait(t testing.TB, d time.Duration, from int, match func(turnEvent) bool) (turnEvent, int) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		evs := r.all()
		for i := from; i < len(evs); i++ {
			if match(evs[i]) {
				return evs[i], i
			}
		}
		select {
		case <-r.more:
		case <-deadline.C:
			t.Fatalf("no matching event within %s; events:\n%s", d, dump(evs))
		}
	}
}

// turnEnd waits for the event that closes turn: EvTurnEnd, or a fatal EvError.
func (r *recorder) turnEnd(t testing.TB, turn int) messages.Event {
	t.Helper()
	te, _ := r.wait(t, 90*time.Second, 0, func(te turnEvent) bool {
		return te.turn == turn && (te.ev.Type == messages.EvTurnEnd || (te.ev.Type == messages.EvError && te.ev.Fatal))
	})
	return te.ev
}

// ofType returns the events of a type in turn.
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
