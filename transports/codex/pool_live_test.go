package codex

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/contain"
	"github.com/codesession/codesession/transports/modelmock"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/confinetest"
	"github.com/codesession/codesession/transports/proc/proctest"
	"github.com/codesession/codesession/transports/transporttest/pooltest"
)

// entries lists a folder's names, sorted.
func entries(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	sort.Strings(out)
	return out
}

func pgidOf(s *Session) int {
	s.Lock()
	defer s.Unlock()
	if s.Proc == nil {
		return 0
	}
	return s.Proc.Pgid
}

// poolRig is a transport with a warm pool, a process kit and a home root
// of a test's own, against a mock.
type poolRig struct {
	t    *testing.T
	kit  *prockit.Kit
	root string
	cwd  string
	mock *modelmock.Server
	tr   *Transport
}

func newPoolRig(t *testing.T, size int, sc *modelmock.Scenario) *poolRig {
	bin := codexBinary(t)
	kit, err := prockit.NewKit(t.TempDir(), "rt-warm-codex")
	require.NoError(t, err)
	t.Cleanup(kit.Close) // last: after the sessions and the pool
	r := &poolRig{t: t, kit: kit, root: t.TempDir(), cwd: t.TempDir(), mock: startMock(t, sc)}
	r.tr = New(WithBinary(bin), WithHomeRoot(r.root), WithWarmPool(size))
	t.Cleanup(func() { r.tr.DrainWarm(nil) })
	return r
}

func (r *poolRig) spec(id, model string, e messages.Effort, p messages.Posture) transports.SessionSpec {
	return transports.SessionSpec{SessionID: id, Cwd: r.cwd, Model: model, Effort: e, Posture: p, Procs: r.kit.Group(id), Env: mockEnv(r.mock)}
}

func (r *poolRig) open(spec transports.SessionSpec) (*Session, *recorder) {
	r.t.Helper()
	rec := newRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	s, err := r.tr.Open(ctx, spec, rec.sink)
	require.NoError(r.t, err)
	r.t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*Session), rec
}

// turn runs input as turn n and requires it to complete.
func (r *poolRig) turn(s *Session, rec *recorder, n int, input string) messages.Event {
	r.t.Helper()
	require.NoError(r.t, s.StartTurn(ctxT(r.t), n, input))
	end := rec.turnEnd(r.t, n)
	require.Equal(r.t, messages.TurnCompleted, end.State, rec.dump())
	return end
}

// warmHomes are the pooled CODEX_HOMEs (and links left by adoptions)
// under the home root.
func (r *poolRig) warmHomes() []string {
	m, err := filepath.Glob(filepath.Join(r.root, ".warm-*"))
	require.NoError(r.t, err)
	return m
}

// A start adopts the app-server the pool booted after the previous
// session's first turn: its CODEX_HOME becomes the session's, its thread
// runs the asked model, effort and posture (full: a command outside the
// workspace runs unasked), the pool refills after that first turn, and
// draining kills what is pooled and removes its CODEX_HOME while the
// adopted session lives on, to close later without a trace but its home.
func TestLiveWarmPoolAdoptsSetsAndDrains(t *testing.T) {
	outside := t.TempDir()
	target := filepath.Join(outside, "full.txt")
	r := newPoolRig(t, 1, &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "write outside"}, Steps: []modelmock.Step{shellStep("touch "+target, false), {Text: "written"}}},
	}})
	a, recA := r.open(r.spec("cs_a", mockModel, "", messages.PostureDefault))
	assert.Empty(t, proctest.WarmGroups(t, r.kit.Dir), "the pool boots nothing before the first turn has ended")
	r.turn(a, recA, 1, "hello")

	specB := r.spec("cs_b", "gpt-5.4", messages.EffortHigh, messages.PostureFull)
	specB.AppendSystemPrompt = "warm-instructions-7f3"
	require.Eventually(t, func() bool { return r.tr.WarmIdle(specB) == 1 }, liveTimeout, 50*time.Millisecond,
		"after A's first turn the pool booted one for the key (model, effort, posture and prompt are not part of it)")
	pooled := proctest.WarmGroups(t, r.kit.Dir)
	require.Len(t, pooled, 1, "the pooled process is recorded for the boot sweep")
	require.Len(t, r.warmHomes(), 1, "the pooled process has a CODEX_HOME of its own")
	pooledHome := r.warmHomes()[0]
	assert.NotEqual(t, filepath.Join(r.root, "cs_a"), pooledHome)

	b, recB := r.open(specB)
	pgid := pgidOf(b)
	assert.Contains(t, pooled, pgid, "the start adopted the pooled process")
	home := filepath.Join(r.root, "cs_b")
	fi, err := os.Lstat(home)
	require.NoError(t, err)
	assert.True(t, fi.IsDir(), "the session's CODEX_HOME is a folder where a cold start puts it")
	link, err := os.Readlink(pooledHome)
	require.NoError(t, err, "the pooled path is a link for the running process")
	assert.Equal(t, home, link)

	got := b.Settings()
	assert.Equal(t, Settings{Sandbox: "dangerFullAccess", ApprovalPolicy: "never", Model: "gpt-5.4", Effort: "high"}, got,
		"thread/start and the rewritten config.toml gave the thread the session's settings")
	started := recB.wait(t, 0, "EvStarted", func(ev messages.Event) bool { return ev.Type == messages.EvStarted })
	assert.Equal(t, b.ThreadID(), started.ExternalSessionID)
	assert.NotEqual(t, a.ThreadID(), b.ThreadID())
	assert.Equal(t, "gpt-5.4", started.Model)

	r.turn(b, recB, 1, "write outside")
	assert.FileExists(t, target, "full posture: the command outside the workspace ran: %s", recB.dump())
	for _, ev := range recB.turnEvents(1) {
		assert.NotEqual(t, messages.EvClarification, ev.Type, "full posture asks nothing: %+v", ev)
	}
	mt := lastMeta(t, r.mock)
	assert.Equal(t, "gpt-5.4", mt.Model)
	assert.Equal(t, "high", mt.Effort)
	assert.Equal(t, "danger-full-access", mt.Sandbox)
	assert.Contains(t, mt.Body, "warm-instructions-7f3", "the appended system prompt went with thread/start")
	rollouts, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "*", "*", "rollout-*.jsonl"))
	assert.NotEmpty(t, rollouts, "the thread is recorded in the session's CODEX_HOME, where a resume looks")

	// A's own turn still runs on its own process and model.
	r.turn(a, recA, 2, "hello again")
	assert.Equal(t, mockModel, lastMeta(t, r.mock).Model)

	require.Eventually(t, func() bool { return r.tr.WarmIdle(specB) == 1 }, liveTimeout, 50*time.Millisecond, "B's first turn refilled the pool")
	refilled := proctest.WarmGroups(t, r.kit.Dir)
	require.Len(t, refilled, 2, "the adopted process keeps its pool group's record until it ends; a new one is pooled")
	r.tr.DrainWarm(r.kit)
	assert.Equal(t, 0, r.tr.WarmReady())
	pooltest.Drained(t, refilled, pgid)
	assert.Equal(t, []string{pooledHome}, r.warmHomes(), "the drained process's CODEX_HOME is gone; the adopted one's link stays while it runs")

	r.turn(b, recB, 2, "still here")
	require.NoError(t, b.Close(context.Background()))
	require.NoError(t, a.Close(context.Background()))
	assert.False(t, proctest.GroupAlive(pgid), "the adopted process ended with its session")
	assert.Empty(t, proctest.WarmGroups(t, r.kit.Dir), "no record of a pooled or adopted process is left")
	assert.Equal(t, []string{"cs_a", "cs_b"}, entries(t, r.root), "the sessions' CODEX_HOMEs, nothing else")
}

// A pooled process that died while idle is never adopted: the start boots
// its own, and the dead one's CODEX_HOME goes.
func TestLiveWarmPoolSkipsDeadProcess(t *testing.T) {
	r := newPoolRig(t, 1, &modelmock.Scenario{})
	a, recA := r.open(r.spec("cs_a", mockModel, "", messages.PostureDefault))
	r.turn(a, recA, 1, "hello")
	specB := r.spec("cs_b", "gpt-5.4", "", messages.PosturePlan)
	require.Eventually(t, func() bool { return r.tr.WarmIdle(specB) == 1 }, liveTimeout, 50*time.Millisecond)
	dead := pooltest.KillOne(t, r.kit.Dir)

	b, recB := r.open(specB)
	assert.NotEqual(t, dead, pgidOf(b), "the dead pooled process was not adopted")
	assert.NotContains(t, proctest.WarmGroups(t, r.kit.Dir), pgidOf(b), "the start booted its own process, in its own group")
	assert.Equal(t, "readOnly", b.Settings().Sandbox)
	r.turn(b, recB, 1, "hello")
	assert.Equal(t, "gpt-5.4", lastMeta(t, r.mock).Model)
	assert.Equal(t, "read-only", lastMeta(t, r.mock).Sandbox)
	r.tr.DrainWarm(r.kit) // what B's first turn refilled
	assert.Empty(t, r.warmHomes(), "the dead process's CODEX_HOME was removed, and the refill's at the drain")
}

// With the pool off a start boots its own app-server, as before the pool:
// nothing is booted ahead, nothing is pooled after a turn.
func TestLiveWarmPoolOff(t *testing.T) {
	r := newPoolRig(t, 0, &modelmock.Scenario{})
	a, recA := r.open(r.spec("cs_a", mockModel, "", messages.PostureDefault))
	r.turn(a, recA, 1, "hello")
	b, recB := r.open(r.spec("cs_b", mockModel, "", messages.PostureDefault))
	r.turn(b, recB, 1, "hello")
	assert.NotEqual(t, pgidOf(a), pgidOf(b))
	assert.Empty(t, proctest.WarmGroups(t, r.kit.Dir), "no process was booted for a pool")
	assert.Equal(t, 0, r.tr.WarmReady())
	assert.Empty(t, r.warmHomes())
	assert.Equal(t, []string{"cs_a", "cs_b"}, entries(t, r.root))
}

// TestLiveContainedWarmRecord: contained as the runtime contains it, with
// a warm pool of one. A session that adopts the pooled process says on its
// record what that process may write: the folder of the CODEX_HOMEs, so
// its own (the pooled one, renamed), and the pooled process's private
// TMPDIR. Their rules were built in the pool's group, so the session's own
// group had seen no start: before, its record said only what the runtime
// knew before any start, neither of these.
func TestLiveContainedWarmRecord(t *testing.T) {
	confinetest.NeedLandlock(t)
	r := newPoolRig(t, 1, &modelmock.Scenario{})
	tr := contain.Wrap(r.tr, contain.Options{Kit: r.kit})
	open := func(id string) (transports.Session, *recorder, *messages.Applied) {
		t.Helper()
		rec := newRecorder()
		ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
		defer cancel()
		s, err := tr.Open(ctx, transports.SessionSpec{SessionID: id, Cwd: r.cwd, Model: mockModel, Env: mockEnv(r.mock)}, rec.sink)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		ev := rec.wait(t, 0, "EvStarted", func(ev messages.Event) bool { return ev.Type == messages.EvStarted })
		require.NotNil(t, ev.Containment, "EvStarted carries the session's containment")
		return s, rec, ev.Containment
	}

	a, recA, appliedA := open("cs_rec_a")
	assert.True(t, covers(t, appliedA.Writable, filepath.Join(r.root, "cs_rec_a")),
		"the booting session's record lets it write its CODEX_HOME: %v", appliedA.Writable)
	require.NoError(t, a.StartTurn(ctxT(t), 1, "hello"))
	require.Equal(t, messages.TurnCompleted, recA.turnEnd(t, 1).State, recA.dump())
	require.Eventually(t, func() bool { return r.tr.WarmReady() == 1 }, liveTimeout, 50*time.Millisecond, "A's first turn refilled the pool")
	pgid, pooledRec := pooltest.One(t, r.kit.Dir)
	require.Len(t, r.warmHomes(), 1)
	assert.True(t, covers(t, appliedA.Writable, r.warmHomes()[0]), "the pooled CODEX_HOME is where A's record lets processes write")
	tmp := pooltest.TmpdirOf(t, r.kit.Dir, pgid)
	assert.NotContains(t, appliedA.Writable, tmp, "the pooled process's TMPDIR is its own")

	_, _, appliedB := open("cs_rec_b")
	require.Equal(t, 0, r.tr.WarmReady(), "the second session adopted the pooled process")
	home := filepath.Join(r.root, "cs_rec_b")
	require.DirExists(t, home, "the pooled CODEX_HOME is the session's now")
	assert.True(t, covers(t, appliedB.Writable, home),
		"the adopting session's record lets it write its CODEX_HOME, the pooled one under its new name: %v", appliedB.Writable)
	pooltest.AdoptedRecord(t, r.kit, appliedB.Writable, tmp, pooledRec)
}

// covers: path (symlinks resolved) is one of list or under one of them.
func covers(t testing.TB, list []string, path string) bool {
	t.Helper()
	real, err := filepath.EvalSymlinks(path)
	require.NoError(t, err)
	for _, p := range list {
		if real == p || strings.HasPrefix(real, p+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
