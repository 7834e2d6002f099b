package acptest

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/modelmock"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
	"github.com/codesession/codesession/transports/transporttest"
)

// liveWait bounds every wait of the warm pool's live checks: it only stops
// hangs (an agent boots in seconds idle, in minutes on a loaded CI box).
const liveWait = 4 * time.Minute

// Warm is a transport with a warm pool of a given size, its own process
// kit (records under a temp dir, as a runtime's), a mock and a workspace.
type Warm struct {
	T    testing.TB
	B    Backend
	Tr   *acp.Transport
	Kit  *prockit.Kit
	Mock *modelmock.Server
	Wire *Wire
	Cwd  string
}

// NewWarm builds b's transport with a pool of size (0: none) against a
// mock scripted with sc (nil: every prompt answered PONG(model=M)).
func NewWarm(t testing.TB, b Backend, size int, sc *modelmock.Scenario) *Warm {
	t.Helper()
	mock, err := modelmock.Start(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	kit, err := prockit.NewKit(t.TempDir(), "rt-acp-warm")
	if err != nil {
		t.Fatal(err)
	}
	w := &Wire{}
	tr, ok := b.New(Options(acp.WithBinary(b.Bin), acp.WithWarmPool(size), w.Tap())...).(*acp.Transport)
	if !ok {
		t.Fatal("the backend's transport is not the ACP client")
	}
	t.Cleanup(func() { tr.DrainWarm(nil); kit.Close() })
	return &Warm{T: t, B: b, Tr: tr, Kit: kit, Mock: mock, Wire: w, Cwd: t.TempDir()}
}

// Spec is the spec of session id under posture p, in the runtime's kit.
func (w *Warm) Spec(id string, p messages.Posture) transports.SessionSpec {
	spec := w.B.Spec(w.T, w.Mock)
	spec.SessionID, spec.Cwd, spec.Posture, spec.Procs = id, w.Cwd, p, w.Kit.Group(id)
	return spec
}

// Started is one open session of a Warm.
type Started struct {
	S    transports.Session
	Rec  *transporttest.Recorder
	Pid  int
	Ext  string        // the agent's session id (EvStarted)
	Open time.Duration // how long Open took
}

// Start opens a session of spec, closed at the test's end.
func (w *Warm) Start(spec transports.SessionSpec) *Started {
	w.T.Helper()
	rec := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), liveWait)
	defer cancel()
	t0 := time.Now()
	s, err := w.Tr.Open(ctx, spec, rec.Sink)
	if err != nil {
		w.T.Fatalf("Open %s: %v", spec.SessionID, err)
	}
	st := &Started{S: s, Rec: rec, Open: time.Since(t0), Pid: s.(interface{ Pid() int }).Pid()}
	w.T.Cleanup(func() { st.Close(w.T) })
	ev, ok := rec.Started()
	if !ok {
		w.T.Fatalf("Open %s returned without EvStarted", spec.SessionID)
	}
	st.Ext = ev.ExternalSessionID
	return st
}

// Close closes the session (idempotent).
func (st *Started) Close(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := st.S.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// Turn runs turn n with input; any clarification fails it. It returns the
// turn's events, the last its EvTurnEnd.
func (st *Started) Turn(t testing.TB, n int, input string) []messages.Event {
	t.Helper()
	st.Rec.TurnStarting(n)
	if err := st.S.StartTurn(context.Background(), n, input); err != nil {
		t.Fatalf("StartTurn %d: %v", n, err)
	}
	_, ok := st.Rec.Wait(liveWait, func(recs []transporttest.Record) bool {
		for _, r := range recs {
			if r.Turn == n && (r.Event.Type == messages.EvTurnEnd || r.Event.Type == messages.EvClarification || (r.Event.Type == messages.EvError && r.Event.Fatal)) {
				return true
			}
		}
		return false
	})
	evs := st.Rec.Turn(n)
	if !ok || len(evs) == 0 {
		t.Fatalf("turn %d did not end\n%s", n, st.Rec.Transcript())
	}
	if last := evs[len(evs)-1]; last.Type != messages.EvTurnEnd || last.State != messages.TurnCompleted {
		t.Fatalf("turn %d closed with %s: want completed\n%s", n, transporttest.Brief(last), st.Rec.Transcript())
	}
	return evs
}

// PooledPids are the process groups of the kit's pooled processes (their
// records name a "warm-" group; an adopted one keeps its record until it
// ends).
func (w *Warm) PooledPids() map[int]bool {
	out := map[int]bool{}
	for pgid := range proctest.WarmGroups(w.T, w.Kit.Dir) {
		out[pgid] = true
	}
	return out
}

// WaitIdle waits until the pool holds n processes ready for spec.
func (w *Warm) WaitIdle(spec transports.SessionSpec, n int) {
	w.T.Helper()
	deadline := time.Now().Add(liveWait)
	for w.Tr.WarmIdle(spec) != n {
		if time.Now().After(deadline) {
			w.T.Fatalf("the pool holds %d processes for %s, not %d, after %v", w.Tr.WarmIdle(spec), spec.SessionID, n, liveWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// GroupGone waits until no process of group pgid runs; false after the
// deadline.
func GroupGone(pgid int) bool {
	deadline := time.Now().Add(time.Minute)
	for len(proctest.InGroup(pgid)) > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// WarmPoolRun is the warm pool's live check every ACP backend runs, with
// a pool of one:
//
//   - the first start boots its own process (recorded under its session,
//     not the pool); after its first turn the pool fills;
//   - a second start with another posture (plan) adopts the pooled
//     process (its pid is the pooled one), receives planMode for its own
//     agent session, and its first turn runs under plan: a write is
//     refused without a question; the model the mock is asked for is
//     model;
//   - a pooled process killed while idle is not adopted: the next start
//     boots a fresh one and its first turn completes;
//   - DrainWarm kills every pooled process (checked by pid) and leaves
//     adopted sessions alone; closing those leaves no process and no
//     record.
func WarmPoolRun(t *testing.T, b Backend, planMode, model string) {
	ws := t.TempDir()
	target := filepath.Join(ws, "plan-warm.txt")
	call := b.Tools.Write(target, "must not be written\n")
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "[warm plan] write"},
		Steps: []modelmock.Step{{Tool: &call}, {Text: "tried plan-warm"}}}}}
	w := NewWarm(t, b, 1, sc)
	w.Cwd = ws

	specA := w.Spec("cs-warm-a", messages.PostureDefault)
	a := w.Start(specA)
	if w.PooledPids()[a.Pid] {
		t.Fatalf("the first start's process %d is a pooled one: the pool was empty", a.Pid)
	}
	a.Turn(t, 1, "[warm a] hello")
	specB := w.Spec("cs-warm-b", messages.PosturePlan)
	w.WaitIdle(specB, 1)
	pooled := w.PooledPids()
	if len(pooled) != 1 {
		t.Fatalf("%d pooled process records: want 1 (the pooled process is recorded for the boot sweep)", len(pooled))
	}

	b2 := w.Start(specB)
	if !pooled[b2.Pid] {
		t.Fatalf("the second start runs process %d: want the pooled one %v", b2.Pid, pooled)
	}
	if b2.Ext == "" || b2.Ext == a.Ext {
		t.Errorf("the adopted session's agent session id %q: want its own (the first start's is %q)", b2.Ext, a.Ext)
	}
	if len(w.Wire.Sent(planMode, b2.Ext)) == 0 {
		t.Errorf("the adopted session's agent never received the plan mode %q", planMode)
	}
	before := len(w.Mock.MainRequests())
	evs := b2.Turn(t, 1, "[warm plan] write")
	refused := Count(evs, messages.EvWarning) > 0
	for _, ev := range evs {
		refused = refused || (ev.Type == messages.EvToolResult && ev.IsError)
	}
	if !refused {
		t.Errorf("plan on the adopted process: the write was neither refused by the client nor failed in the agent\n%s", b2.Rec.Transcript())
	}
	if _, err := os.Stat(target); err == nil {
		t.Errorf("plan on the adopted process: %s was written", target)
	}
	w.lastModelIs(before, model)

	// the refill after b2's first turn, then its death while idle
	w.WaitIdle(specB, 1)
	var dead int
	for p := range w.PooledPids() {
		if p != b2.Pid {
			dead = p
		}
	}
	if dead == 0 {
		t.Fatal("the refilled process has no record")
	}
	_ = syscall.Kill(-dead, syscall.SIGKILL)
	if !GroupGone(dead) {
		t.Fatalf("the pooled process %d did not die", dead)
	}
	c := w.Start(w.Spec("cs-warm-c", messages.PostureDefault))
	if c.Pid == dead || w.PooledPids()[c.Pid] {
		t.Fatalf("the start after the pooled process died runs %d: want a fresh process, not the dead pooled %d", c.Pid, dead)
	}
	c.Turn(t, 1, "[warm c] hello")

	// drain: what is pooled dies, adopted sessions live on
	w.WaitIdle(specB, 1)
	idle := map[int]bool{}
	for p := range w.PooledPids() {
		if p != b2.Pid {
			idle[p] = true
		}
	}
	if len(idle) != 1 {
		t.Fatalf("%d pooled processes after the refill: want 1", len(idle))
	}
	w.Tr.DrainWarm(w.Kit)
	if n := w.Tr.WarmReady(); n != 0 {
		t.Errorf("%d pooled processes after DrainWarm: want 0", n)
	}
	for p := range idle {
		if !GroupGone(p) {
			t.Errorf("the pooled process group %d outlived DrainWarm", p)
		}
	}
	if len(proctest.InGroup(b2.Pid)) == 0 {
		t.Error("DrainWarm killed an adopted session's process")
	}
	for _, st := range []*Started{a, b2, c} {
		st.Close(t)
		if !GroupGone(st.Pid) {
			t.Errorf("process group %d outlived its session's Close", st.Pid)
		}
	}
	if left := w.PooledPids(); len(left) != 0 {
		t.Errorf("pooled process records left after every session closed: %v", left)
	}
}

// lastModelIs checks that the model server was asked something after the
// first before requests, its last request for model.
func (w *Warm) lastModelIs(before int, model string) {
	w.T.Helper()
	mains := w.Mock.MainRequests()
	if len(mains) <= before {
		w.T.Fatal("the adopted session's turn never asked the model")
	}
	if got := mains[len(mains)-1].Model; got != model {
		w.T.Errorf("the adopted session's model request is for %q: want %q", got, model)
	}
}

// ModelSwitchRun checks that a start asking for another model than the
// pooled process was booted with adopts that process when the agent
// offers the model over ACP, switches it there (the wire carries the
// model's id to the agent), and that its first turn asks the model server
// for it (wantModel, as the server sees the name). A model the agent does
// not offer is never switched to: that start boots its own process.
func ModelSwitchRun(t *testing.T, b Backend, other, wantModel string) {
	w := NewWarm(t, b, 1, nil)
	specA := w.Spec("cs-model-a", messages.PostureDefault)
	a := w.Start(specA)
	a.Turn(t, 1, "[model a] hello")
	w.WaitIdle(specA, 1)
	pooled := w.PooledPids()

	specB := w.Spec("cs-model-b", messages.PostureDefault)
	specB.Model = other
	if w.Tr.WarmIdle(specB) != 0 {
		t.Fatalf("the pool holds a process booted for %s already", other)
	}
	b2 := w.Start(specB)
	if !pooled[b2.Pid] {
		t.Fatalf("the start for model %s runs process %d: want the one pooled for %s %v", other, b2.Pid, specA.Model, pooled)
	}
	if len(w.Wire.Sent(other, b2.Ext)) == 0 {
		t.Errorf("the adopted session's agent was never sent the model %q", other)
	}
	if ev, _ := b2.Rec.Started(); ev.Model != other {
		t.Errorf("the adopted session started on model %q: want %q", ev.Model, other)
	}
	before := len(w.Mock.MainRequests())
	b2.Turn(t, 1, "[model b] hello")
	w.lastModelIs(before, wantModel)

	// a model the pooled process does not offer: no switch, a boot
	// (the agent may refuse that model at its own boot: only the pool's
	// part is checked)
	w.WaitIdle(specB, 1)
	pooled = w.PooledPids()
	specC := w.Spec("cs-model-c", messages.PostureDefault)
	specC.Model = other + "-not-offered"
	ctx, cancel := context.WithTimeout(context.Background(), liveWait)
	defer cancel()
	if c, err := w.Tr.Open(ctx, specC, transporttest.NewRecorder().Sink); err == nil {
		if pid := c.(interface{ Pid() int }).Pid(); pooled[pid] {
			t.Errorf("the start for a model no pooled process offers adopted process %d", pid)
		}
		_ = c.Close(ctx)
	}
	if w.Tr.WarmIdle(specB) != 1 {
		t.Errorf("the process pooled for %s was taken by a start it cannot serve", other)
	}
}

// NoPoolRun checks that with a pool of size 0 a start boots its own
// process (recorded under its own session, not a pooled group) and that
// its first turn schedules no refill: nothing is pooled once it is over.
func NoPoolRun(t *testing.T, b Backend) {
	w := NewWarm(t, b, 0, nil)
	st := w.Start(w.Spec("cs-cold", messages.PostureDefault))
	if !recordedAs(t, w.Kit, st.Pid, "cs-cold") {
		t.Errorf("the start's process %d is not recorded under its own session", st.Pid)
	}
	st.Turn(t, 1, "[cold] hello")
	st.Close(t)
	if n := len(w.PooledPids()); n != 0 || w.Tr.WarmReady() != 0 {
		t.Errorf("%d processes pooled with a pool of size 0", n)
	}
}

// recordedAs: the kit's record of group pgid names session id.
func recordedAs(t testing.TB, kit *prockit.Kit, pgid int, id string) bool {
	for _, r := range proctest.Records(t, kit.Dir) {
		if r.Pgid == pgid && r.SessionID == id {
			return true
		}
	}
	return false
}

// BenchFirstTurn measures start -> first turn completed, with and without
// the pool, interleaved in one loop so both see the same machine: each
// iteration starts one session on a transport whose pool holds a ready
// process and one on a transport without a pool; the pool's refill is
// waited for outside the timer, before the start without a pool, so no
// boot runs beside a timed start. It reports the means in ms, the cold
// start's phases (boot+initialize, session/new: what the pool takes off
// the start path) and the ratio.
func BenchFirstTurn(b *testing.B, be Backend) {
	pool := NewWarm(b, be, 1, nil)
	cold := NewWarm(b, be, 0, nil)
	cold.Cwd = pool.Cwd
	run := func(w *Warm, id string) (time.Duration, time.Duration, int) {
		t0 := time.Now()
		st := w.Start(w.Spec(id, messages.PostureDefault))
		st.Turn(b, 1, "[bench] hello")
		total := time.Since(t0)
		st.Close(b)
		return total, st.Open, st.Pid
	}
	// warm up both (a first start in a fresh HOME costs more) and fill the pool
	run(cold, "cs-bench-warmup-cold")
	run(pool, "cs-bench-warmup-pool")
	var warmTotal, coldTotal, warmOpen, coldOpen, coldInit, coldNew time.Duration
	b.ResetTimer()
	spec := pool.Spec("cs-bench-probe", messages.PostureDefault)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pool.WaitIdle(spec, 1)
		pooled := pool.PooledPids()
		b.StartTimer()
		tot, open, pid := run(pool, "cs-bench-pool")
		if !pooled[pid] {
			b.Fatalf("iteration %d: the pooled start did not adopt", i)
		}
		warmTotal, warmOpen = warmTotal+tot, warmOpen+open
		// the refill boots after the pooled session's first turn: let it
		// finish untimed, so it never competes with the start without a pool
		b.StopTimer()
		pool.WaitIdle(spec, 1)
		b.StartTimer()
		t0 := time.Now()
		tot, open, _ = run(cold, "cs-bench-cold")
		coldTotal, coldOpen = coldTotal+tot, coldOpen+open
		// what the pool takes off the start path: the process's boot and
		// initialize, then session/new (both answered before Open returns)
		initAt := cold.Wire.FirstAfter(t0, "<<", `"agentCapabilities"`)
		newAt := cold.Wire.FirstAfter(initAt, "<<", `"result"`, `"sessionId"`)
		if initAt.IsZero() || newAt.IsZero() {
			b.Fatal("the wire shows no initialize or session/new answer")
		}
		coldInit, coldNew = coldInit+initAt.Sub(t0), coldNew+newAt.Sub(initAt)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(warmTotal), "pool-ms")
	b.ReportMetric(ms(coldTotal), "nopool-ms")
	b.ReportMetric(ms(warmOpen), "pool-open-ms")
	b.ReportMetric(ms(coldOpen), "nopool-open-ms")
	b.ReportMetric(ms(coldInit), "nopool-boot+init-ms")
	b.ReportMetric(ms(coldNew), "nopool-session/new-ms")
	b.ReportMetric(float64(warmTotal)/float64(coldTotal), "pool/nopool")
	b.ReportMetric(0, "ns/op")
}
