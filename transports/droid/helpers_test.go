package droid

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli/clitest"
	"github.com/codesession/codesession/transports/droid/droidtest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// mockModelID is the id droid derives for the one custom model
// droidtest.WriteSettings always configures.
const mockModelID = droidtest.MockModelID

// droidBinary finds the real CLI for the live tests: $CODESESSION_DROID_BIN,
// else droid on PATH; a skip without it, a failure under CI=true.
func droidBinary(t testing.TB) string {
	t.Helper()
	return subprocesstest.Find(t, EnvBinary, "npm install droid@"+PinnedVersion, "droid")
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
	home := droidtest.Home(t, mock.URL())
	l := &live{t: t, mock: mock, rec: newRecorder()}
	l.tr = New(append([]Option{WithBinary(bin)}, o.topts...)...)
	l.spec = transports.SessionSpec{SessionID: "cs_test", Cwd: t.TempDir(), Home: home, Model: mockModelID,
		Posture: o.posture, Effort: o.effort}
	l.open()
	return l
}

func (l *live) open() {
	l.t.Helper()
	l.sess = clitest.Open(l.t, l.tr, l.spec, l.rec.sink, 2*time.Minute, 30*time.Second)
}

// close closes the session now (the cleanup's Close is then a no-op).
func (l *live) close() { clitest.Close(l.t, l.sess, 30*time.Second) }

func ctxFor(t testing.TB, d time.Duration) context.Context { return clitest.Ctx(t, d) }

// turnEvent is one recorded sink call.
type turnEvent struct {
	turn int
	ev   messages.Event
}

// recorder collects a session's events (clitest.Recorder); its wait looks
// at every event so far.
type recorder struct {
	*clitest.Recorder[turnEvent]
}

func newRecorder() *recorder {
	return &recorder{clitest.NewRecorder(func(turn int, ev messages.Event) turnEvent { return turnEvent{turn, ev} })}
}

func (r *recorder) sink(turn int, ev messages.Event) { r.Sink(turn, ev) }

func (r *recorder) all() []turnEvent { return r.All() }

func (r *recorder) wait(t testing.TB, d time.Duration, match func(turnEvent) bool) turnEvent {
	t.Helper()
	te, _ := r.Wait(t, d, 0, match)
	return te
}

func (r *recorder) turnEnd(t testing.TB, turn int) messages.Event {
	t.Helper()
	return r.TurnEnd(t, turn, 2*time.Minute)
}

func (r *recorder) ofType(turn int, typ messages.EventType) []messages.Event {
	return r.OfType(turn, typ)
}

// dump renders events for a failure message (clitest.Dump).
func dump(evs []turnEvent) string {
	var recs []clitest.Record
	for _, te := range evs {
		recs = append(recs, clitest.Record{Turn: te.turn, Ev: te.ev})
	}
	return clitest.Dump(recs)
}
