package droid

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/contain"
	"github.com/codesession/codesession/transports/droid/droidtest"
	"github.com/codesession/codesession/transports/modelmock"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/confinetest"
	"github.com/codesession/codesession/transports/proc/proctest"
	"github.com/codesession/codesession/transports/transporttest/pooltest"
)

// secondModelID is the second custom model the pool rig's settings
// configure: same mock, another model name, so a turn's text tells which
// one ran.
const secondModelID = droidtest.SecondModelID

// poolRig is a droid transport with a warm pool of size n, one modelmock
// and one HOME and workspace, so every start shares a key.
type poolRig struct {
	t        testing.TB
	tr       *Transport
	kit      *prockit.Kit
	mock     *modelmock.Server
	cwd      string
	home     string
	sessions int
}

func newPoolRig(t testing.TB, sc *modelmock.Scenario, n int) *poolRig {
	t.Helper()
	bin := droidBinary(t)
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	kit, err := prockit.NewKit(t.TempDir(), "rt-droid-warm-test")
	require.NoError(t, err)
	t.Cleanup(kit.Close) // last: after the sessions and the pool
	r := &poolRig{t: t, tr: New(WithBinary(bin), WithWarmPool(n)), kit: kit, mock: mock, cwd: t.TempDir(), home: t.TempDir()}
	droidtest.WriteSettings(t, r.home, mock.URL(), true)
	t.Cleanup(func() { r.tr.DrainWarm(nil) })
	return r
}

func (r *poolRig) spec(model string, p messages.Posture) transports.SessionSpec {
	r.sessions++
	id := "cs_pool_" + string(rune('a'+r.sessions))
	return transports.SessionSpec{SessionID: id, Cwd: r.cwd, Home: r.home, Model: model, Posture: p, Procs: r.kit.Group(id)}
}

// open starts a session of spec, closed at the end of the test.
func (r *poolRig) open(spec transports.SessionSpec, rec *recorder) *session {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := r.tr.Open(ctx, spec, rec.sink)
	require.NoError(r.t, err)
	r.t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		_ = s.Close(cctx)
	})
	return s.(*session)
}

func (r *poolRig) waitIdle(spec transports.SessionSpec, n int, why string) {
	r.t.Helper()
	require.Eventually(r.t, func() bool { return r.tr.WarmIdle(spec) == n }, 3*time.Minute, 50*time.Millisecond, why)
}

func pgidOf(s *session) int {
	s.Lock()
	defer s.Unlock()
	return s.Proc.Pgid
}

// A start adopts the pooled process booted after the previous start's
// first turn: its model and autonomy are set with
// droid.update_session_settings and are what the first turn runs with, the
// pool refills, and draining the runtime's kit kills what is pooled,
// records included, and leaves the adopted session alone.
func TestLiveWarmPoolAdoptsSetsAndDrains(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{
		Match: modelmock.Match{Regex: `RUN (\S+) RISK=(\w+)`},
		Steps: []modelmock.Step{{Tool: &modelmock.ToolCall{Name: "Execute",
			Input: json.RawMessage(`{"command":"touch {{1}}","riskLevel":"{{2}}","riskLevelReason":"the mock says so"}`)}}},
	}}}
	r := newPoolRig(t, sc, 1)
	ctx := ctxFor(t, 5*time.Minute)

	specA := r.spec(mockModelID, messages.PostureDefault)
	recA := newRecorder()
	a := r.open(specA, recA)
	assert.Empty(t, proctest.WarmGroups(t, r.kit.Dir), "the pool refills only after the first turn")
	require.NoError(t, a.StartTurn(ctx, 1, "which model?"))
	assert.Equal(t, "PONG(model=mock-model): which model?", recA.turnEnd(t, 1).Text)
	specB := r.spec(secondModelID, messages.PostureFull)
	r.waitIdle(specB, 1, "A's first turn refilled the pool for its key (model and posture are not part of it)")
	pooled := proctest.WarmGroups(t, r.kit.Dir)
	require.Len(t, pooled, 1, "the pooled process is recorded for the boot sweep")

	recB := newRecorder()
	b := r.open(specB, recB)
	pgid := pgidOf(b)
	assert.Contains(t, pooled, pgid, "the start adopted the pooled process")
	startedA := recA.wait(t, time.Minute, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted })
	startedB := recB.wait(t, time.Minute, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted })
	assert.Regexp(t, `^[0-9a-f-]{36}$`, startedB.ev.ExternalSessionID)
	assert.NotEqual(t, startedA.ev.ExternalSessionID, startedB.ev.ExternalSessionID)
	assert.Equal(t, secondModelID, startedB.ev.Model)
	b.Lock()
	reported := b.Core.settings
	b.Unlock()
	assert.Equal(t, secondModelID, reported.ModelID, "droid reports the model set at adoption")
	assert.Equal(t, "high", reported.AutonomyLevel, "droid reports the autonomy of posture full")

	require.NoError(t, b.StartTurn(ctx, 1, "which model?"))
	end := recB.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(recB.all()))
	assert.Equal(t, "PONG(model=mock-model-two): which model?", end.Text, "the model set at adoption answered the first turn")
	// at autonomy high droid runs a medium-risk command without asking
	// (at "off", the pooled process's own, it asks: see TestLiveAcceptEditsAndTheGate)
	target := filepath.Join(r.cwd, "medium.txt")
	require.NoError(t, b.StartTurn(ctx, 2, "RUN "+target+" RISK=medium"))
	require.Equal(t, messages.TurnCompleted, recB.turnEnd(t, 2).State, dump(recB.all()))
	assert.Empty(t, recB.ofType(2, messages.EvClarification), "autonomy high was in effect")
	assert.FileExists(t, target)

	r.waitIdle(specB, 1, "the adoption refilled the pool")
	refilled := proctest.WarmGroups(t, r.kit.Dir)
	require.Len(t, refilled, 2, "the adopted process keeps its pool group's record until it ends; a new one is pooled")
	r.tr.DrainWarm(r.kit)
	assert.Equal(t, 0, r.tr.WarmReady())
	pooltest.Drained(t, refilled, pgid)
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	require.NoError(t, b.Close(cctx))
	assert.Eventually(t, func() bool { return !proctest.GroupAlive(pgid) }, time.Minute, 20*time.Millisecond, "the adopted process ended with its session")
	assert.Empty(t, proctest.WarmGroups(t, r.kit.Dir), "no record of a pooled or adopted process is left")
	assert.Equal(t, 0, r.tr.WarmReady(), "a drained kit is never refilled")
}

// A pooled process that died while idle is not adopted: the start boots a
// fresh one and its first turn completes.
func TestLiveWarmPoolSkipsADeadProcess(t *testing.T) {
	t.Parallel()
	r := newPoolRig(t, nil, 1)
	ctx := ctxFor(t, 5*time.Minute)
	specA := r.spec(mockModelID, messages.PostureDefault)
	recA := newRecorder()
	a := r.open(specA, recA)
	require.NoError(t, a.StartTurn(ctx, 1, "hello"))
	require.Equal(t, messages.TurnCompleted, recA.turnEnd(t, 1).State, dump(recA.all()))
	specB := r.spec(mockModelID, messages.PostureDefault)
	r.waitIdle(specB, 1, "A's first turn refilled the pool")
	dead := pooltest.KillOne(t, r.kit.Dir)

	recB := newRecorder()
	b := r.open(specB, recB)
	assert.NotEqual(t, dead, pgidOf(b), "the dead pooled process was not adopted")
	assert.NotContains(t, proctest.WarmGroups(t, r.kit.Dir), pgidOf(b), "the start booted its own process, in its own group")
	require.NoError(t, b.StartTurn(ctx, 1, "hello"))
	end := recB.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(recB.all()))
	assert.Equal(t, "PONG(model=mock-model): hello", end.Text)
}

// Pool size 0 boots at start as before: no process is booted ahead, and
// none after the first turn.
func TestLiveWarmPoolSizeZeroBootsAtStart(t *testing.T) {
	t.Parallel()
	r := newPoolRig(t, nil, 0)
	spec := r.spec(mockModelID, messages.PostureDefault)
	rec := newRecorder()
	s := r.open(spec, rec)
	require.NoError(t, s.StartTurn(ctxFor(t, 3*time.Minute), 1, "hello"))
	require.Equal(t, messages.TurnCompleted, rec.turnEnd(t, 1).State, dump(rec.all()))
	time.Sleep(2 * time.Second) // a refill would have started by now
	assert.Empty(t, proctest.WarmGroups(t, r.kit.Dir), "nothing was booted for a pool")
	assert.Equal(t, 0, r.tr.WarmReady())
	var own bool
	files, err := filepath.Glob(filepath.Join(r.kit.Dir, "*.json"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var rec prockit.Record
		require.NoError(t, json.Unmarshal(b, &rec))
		own = own || (rec.SessionID == spec.SessionID && rec.Pgid == pgidOf(s))
	}
	assert.True(t, own, "the session's process runs in the session's own group, recorded for the boot sweep")
}

// TestLiveContainedWarmRecord: contained as the runtime contains it, with
// a warm pool of one. A session that adopts the pooled process says on its
// record what that process may write, the paths only the pool's group had
// included: its private TMPDIR and its cgroup. Their rules were built in
// the pool's group, so the session's own group had seen no start: before,
// its record said only what the runtime knew before any start.
func TestLiveContainedWarmRecord(t *testing.T) {
	confinetest.NeedLandlock(t)
	r := newPoolRig(t, nil, 1)
	tr := contain.Wrap(r.tr, contain.Options{Kit: r.kit})
	open := func(id string) (transports.Session, *recorder, *messages.Applied) {
		t.Helper()
		rec := newRecorder()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		s, err := tr.Open(ctx, transports.SessionSpec{SessionID: id, Cwd: r.cwd, Home: r.home, Model: mockModelID}, rec.sink)
		require.NoError(t, err)
		t.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			_ = s.Close(cctx)
		})
		ev := rec.wait(t, time.Minute, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted }).ev
		require.NotNil(t, ev.Containment, "EvStarted carries the session's containment")
		return s, rec, ev.Containment
	}
	ownTmp := func(a *messages.Applied) []string {
		var out []string
		for _, p := range a.Writable {
			if strings.HasPrefix(filepath.Base(p), "codesession-tmp-") && !strings.HasSuffix(p, "*") {
				out = append(out, p)
			}
		}
		return out
	}

	a, recA, appliedA := open("cs_rec_a")
	assert.Len(t, ownTmp(appliedA), 1, "the booting session's record names its process's private TMPDIR: %v", appliedA.Writable)
	require.NoError(t, a.StartTurn(ctxFor(t, 3*time.Minute), 1, "hello"))
	require.Equal(t, messages.TurnCompleted, recA.turnEnd(t, 1).State, dump(recA.all()))
	require.Eventually(t, func() bool { return r.tr.WarmReady() == 1 }, 3*time.Minute, 50*time.Millisecond, "A's first turn refilled the pool")
	pgid, pooledRec := pooltest.One(t, r.kit.Dir)
	tmp := pooltest.TmpdirOf(t, r.kit.Dir, pgid)
	assert.NotContains(t, appliedA.Writable, tmp, "the pooled process's TMPDIR is its own")

	_, _, appliedB := open("cs_rec_b")
	require.Equal(t, 0, r.tr.WarmReady(), "the second session adopted the pooled process")
	pooltest.AdoptedRecord(t, r.kit, appliedB.Writable, tmp, pooledRec)
}
