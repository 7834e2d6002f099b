package claudecode

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli/clitest"
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
	l.sess = clitest.Open(l.t, l.tr, l.spec, l.rec.sink, time.Minute, 20*time.Second)
}

// close closes the session now (the cleanup's Close is then a no-op).
func (l *live) close() { clitest.Close(l.t, l.sess, 20*time.Second) }

func ctxFor(t testing.TB, d time.Duration) context.Context { return clitest.Ctx(t, d) }

// turnEvent is one recorded sink call; recorder collects a session's
// events (clitest.Recorder) under the names this package's tests use.
type (
	turnEvent struct {
		turn int
		ev   messages.Event
	}
	recorder struct{ *clitest.Recorder[turnEvent] }
)

func newRecorder() *recorder {
	return &recorder{clitest.NewRecorder(func(turn int, ev messages.Event) turnEvent { return turnEvent{turn, ev} })}
}

func (r *recorder) sink(turn int, ev messages.Event) { r.Sink(turn, ev) }
func (r *recorder) all() []turnEvent                 { return r.All() }

// wait returns the first event from index from on that matches, failing
// the test after d.
func (r *recorder) wait(t testing.TB, d time.Duration, from int, match func(turnEvent) bool) (turnEvent, int) {
	t.Helper()
	return r.Wait(t, d, from, match)
}

// turnEnd waits for the event that closes turn: EvTurnEnd, or a fatal EvError.
func (r *recorder) turnEnd(t testing.TB, turn int) messages.Event {
	t.Helper()
	return r.TurnEnd(t, turn, 90*time.Second)
}

// ofType returns the events of a type in turn.
func (r *recorder) ofType(turn int, typ messages.EventType) []messages.Event {
	return r.OfType(turn, typ)
}

func dump(evs []turnEvent) string {
	recs := make([]clitest.Record, len(evs))
	for i, te := range evs {
		recs[i] = clitest.Record{Turn: te.turn, Ev: te.ev}
	}
	return clitest.Dump(recs)
}
