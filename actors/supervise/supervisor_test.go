package supervise_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/codesession/codesession/actors/supervise"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// journal is the shared, ordered record of what every actor of a test did.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, fmt.Sprintf(format, args...))
}

// with returns the lines starting with prefix, in order.
func (j *journal) with(prefix string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, l := range j.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func (j *journal) has(line string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Contains(j.lines, line)
}

func (j *journal) index(line string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Index(j.lines, line)
}

// worker is a child that journals what it receives, as "<name>.<gen> ...".
// Messages: "boom" panics, "block" waits for release, "exit"/"exit-abnormal"
// call Exit, "selfstop" poisons itself; anything else is journaled as "got".
type worker struct {
	j            *journal
	release      chan struct{}
	startPanics  *atomic.Int32 // Started panics while positive (decremented)
	stoppedPanic bool
	stoppedBlock chan struct{}
	id           string
}

func (w *worker) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		name, gen, ok := supervise.Identity(c)
		if !ok {
			panic("no identity")
		}
		w.id = fmt.Sprintf("%s.%d", name, gen)
		w.j.add("%s started", w.id)
		if w.startPanics != nil && w.startPanics.Add(-1) >= 0 {
			panic("boom in Started")
		}
	case actor.Stopped:
		if w.stoppedBlock != nil {
			<-w.stoppedBlock
		}
		w.j.add("%s stopped", w.id)
		if w.stoppedPanic {
			panic("boom in Stopped")
		}
	case string:
		switch m {
		case "boom":
			panic("boom on " + w.id)
		case "block":
			<-w.release
		case "exit":
			if err := supervise.Exit(c, true); err != nil {
				panic(err)
			}
		case "exit-abnormal":
			if err := supervise.Exit(c, false); err != nil {
				panic(err)
			}
		case "selfstop":
			c.Engine().Poison(c.PID())
		}
		w.j.add("%s got %s", w.id, m)
	}
}

type workerOpt func(*worker)

func blocksOn(ch chan struct{}) workerOpt        { return func(w *worker) { w.release = ch } }
func panicsInStarted(n *atomic.Int32) workerOpt  { return func(w *worker) { w.startPanics = n } }
func panicsInStopped() workerOpt                 { return func(w *worker) { w.stoppedPanic = true } }
func blocksInStopped(ch chan struct{}) workerOpt { return func(w *worker) { w.stoppedBlock = ch } }

func spec(j *journal, name string, rt supervise.RestartType, opts ...workerOpt) supervise.ChildSpec {
	return supervise.ChildSpec{
		Name:    name,
		Restart: rt,
		Producer: func() actor.Receiver {
			w := &worker{j: j}
			for _, o := range opts {
				o(w)
			}
			return w
		},
	}
}

// Messages understood by the test parent.
type (
	sendTo struct {
		name string
		msgs []string
	}
	stopReq  struct{ names []string } // nil: StopAll
	stopDone struct{}
	inspect  struct {
		fn   func(*supervise.Supervisor)
		done chan struct{}
	}
)

// parent embeds a Supervisor the way the session actor does.
type parent struct {
	j         *journal
	sup       *supervise.Supervisor
	stopOnEsc bool
}

func (p *parent) Receive(c *actor.Context) {
	handled, esc := p.sup.Handle(c, c.Message())
	if esc != nil {
		p.j.add("parent escalation %s.%d %s: %s", esc.Child, esc.Gen, esc.Reason, esc.Cause)
		if p.stopOnEsc {
			p.sup.StopAll(c, stopDone{})
		}
	}
	if handled {
		return
	}
	switch m := c.Message().(type) {
	case actor.Started:
		if err := p.sup.StartAll(c); err != nil {
			p.j.add("parent startall: %v", err)
		}
	case sendTo:
		for _, msg := range m.msgs {
			if err := p.sup.Send(c, m.name, msg); err != nil {
				p.j.add("parent send %s %s: %v", m.name, msg, err)
			}
		}
	case stopReq:
		if m.names == nil {
			p.sup.StopAll(c, stopDone{})
		} else {
			p.sup.StopChildren(c, m.names, stopDone{})
		}
	case stopDone:
		p.j.add("parent done")
	case inspect:
		m.fn(p.sup)
		close(m.done)
	}
}

// hollywoodWatch counts the events that would mean a panic reached
// hollywood's own restart path.
type hollywoodWatch struct {
	restarted, maxExceeded, duplicate atomic.Int32
}

type harness struct {
	t      *testing.T
	j      *journal
	e      *actor.Engine
	parent *actor.PID
	watch  *hollywoodWatch
	wpid   *actor.PID
}

type harnessOpt struct {
	stopOnEsc   bool
	maxBuffered int
}

func start(t *testing.T, j *journal, specs []supervise.ChildSpec, p supervise.Policy, o harnessOpt) *harness {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	require.NoError(t, err)
	h := &harness{t: t, j: j, e: e, watch: &hollywoodWatch{}}
	h.wpid = e.SpawnFunc(func(c *actor.Context) {
		switch c.Message().(type) {
		case actor.ActorRestartedEvent:
			h.watch.restarted.Add(1)
		case actor.ActorMaxRestartsExceededEvent:
			h.watch.maxExceeded.Add(1)
		case actor.ActorDuplicateIdEvent:
			h.watch.duplicate.Add(1)
		}
	}, "watch")
	e.Subscribe(h.wpid)
	h.parent = supervise.Spawn(e, func() actor.Receiver {
		sup := supervise.New(specs, p)
		sup.MaxBuffered = o.maxBuffered
		sup.OnEvent = func(ev supervise.Event) {
			j.add("event %s %s.%d %s delay=%v count=%d", ev.Kind, ev.Child, ev.Gen, ev.Reason, ev.Delay, ev.Count)
		}
		return &parent{j: j, sup: sup, stopOnEsc: o.stopOnEsc}
	}, "session", supervise.RecoverOptions{
		Name:      "session",
		OnFailure: func(f supervise.ChildFailed) { j.add("top failure %s: %s", f.Name, f.Reason) },
	}, actor.WithID("s1"))
	synctest.Wait()
	return h
}

func (h *harness) send(name string, msgs ...string) {
	h.e.Send(h.parent, sendTo{name: name, msgs: msgs})
	synctest.Wait()
}

func (h *harness) inspect(fn func(*supervise.Supervisor)) {
	done := make(chan struct{})
	h.e.Send(h.parent, inspect{fn: fn, done: done})
	<-done
}

func (h *harness) state(name string) (st supervise.ChildState) {
	h.inspect(func(s *supervise.Supervisor) { st = s.State(name) })
	return st
}

func (h *harness) pid(name string) (pid *actor.PID) {
	h.inspect(func(s *supervise.Supervisor) { pid = s.PID(name) })
	return pid
}

// sleep advances virtual time and lets everything settle.
func (h *harness) sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// finish stops the tree and checks that nothing reached hollywood's restart
// path.
func (h *harness) finish() {
	h.t.Helper()
	<-h.e.Poison(h.parent).Done()
	h.e.Unsubscribe(h.wpid)
	<-h.e.Poison(h.wpid).Done()
	synctest.Wait()
	assert.Zero(h.t, h.watch.restarted.Load(), "a panic reached hollywood's restart path")
	assert.Zero(h.t, h.watch.maxExceeded.Load(), "hollywood's MaxRestarts was exceeded")
	assert.Zero(h.t, h.watch.duplicate.Load(), "a child ID was spawned twice")
}

// deterministic: no jitter, 10s doubling to 1m, 3 restarts per minute.
func policy(s supervise.Strategy) supervise.Policy {
	return supervise.Policy{
		Strategy:  s,
		Intensity: 3,
		Window:    time.Minute,
		Backoff: supervise.Backoff{
			InitialInterval: 10 * time.Second,
			MaxInterval:     time.Minute,
			Multiplier:      2,
		},
	}
}

func three(j *journal, rt supervise.RestartType, bOpts ...workerOpt) []supervise.ChildSpec {
	return []supervise.ChildSpec{
		spec(j, "a", rt),
		spec(j, "b", rt, bOpts...),
		spec(j, "c", rt),
	}
}

func TestRestartRedeliversQueuedAndBufferedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Permanent), policy(supervise.OneForOne), harnessOpt{})
		assert.Equal(t, []string{"a.1 started", "b.1 started", "c.1 started"}, j.withAny("a.1 started", "b.1 started", "c.1 started"))

		// m3 and m4 are queued in b's inbox behind the panicking message.
		h.send("b", "m1", "m2", "boom", "m3", "m4")
		assert.Equal(t, supervise.StateBackoff, h.state("b"))
		assert.Nil(t, h.pid("b"))
		// sent while b is down: buffered
		h.send("b", "m5", "m6")

		h.sleep(10*time.Second - time.Millisecond)
		assert.False(t, j.has("b.2 started"), "restarted before the backoff")
		h.sleep(time.Millisecond)
		assert.Equal(t, supervise.StateUp, h.state("b"))
		assert.Equal(t, []string{
			"b.1 started", "b.1 got m1", "b.1 got m2", "b.1 stopped",
			"b.2 started", "b.2 got m3", "b.2 got m4", "b.2 got m5", "b.2 got m6",
		}, j.with("b."))
		assert.Equal(t, []string{"a.1 started"}, j.with("a."))
		assert.Equal(t, []string{"c.1 started"}, j.with("c."))
		assert.Equal(t, []string{
			"event failed b.1 within-policy delay=10s count=0",
			"event restarted b.2 within-policy delay=10s count=0",
		}, j.with("event "))
		assert.Equal(t, "session/s1/b/2", h.pid("b").GetID())
		h.finish()
	})
}

// with returns the lines starting with any of the prefixes.
func (j *journal) withAny(prefixes ...string) []string {
	var out []string
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, l := range j.lines {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

func TestIntensityExceededEscalatesAndProcessSurvives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		p := policy(supervise.OneForOne)
		p.Intensity = 2
		h := start(t, j, three(j, supervise.Permanent), p, harnessOpt{stopOnEsc: true})

		h.send("b", "boom")
		h.sleep(10 * time.Second)
		h.send("b", "boom")
		h.sleep(20 * time.Second)
		require.True(t, j.has("b.3 started"))
		h.send("b", "boom", "lost")

		assert.Equal(t, []string{"parent escalation b.3 intensity-exceeded: boom on b.3"}, j.with("parent escalation"))
		assert.True(t, j.has("parent done"))
		for _, name := range []string{"a", "b", "c"} {
			assert.Contains(t, []supervise.ChildState{supervise.StateDown, supervise.StateEscalated}, h.state(name), name)
		}
		assert.Equal(t, supervise.StateEscalated, h.state("b"))
		// StopAll stopped the others in reverse start order
		assert.Less(t, j.index("c.1 stopped"), j.index("a.1 stopped"))
		assert.Less(t, j.index("a.1 stopped"), j.index("parent done"))
		assert.True(t, j.has("event dropped b.3 child-down delay=0s count=1"), "the bounced message is reported dropped")
		h.send("b", "after")
		assert.Equal(t, []string{`parent send b after: send to "b": supervise: child is down and will not be restarted`}, j.with("parent send"))

		// Nothing restarts later.
		h.sleep(time.Hour)
		assert.False(t, j.has("b.4 started"))
		h.finish()
	})
}

func TestRestForOneRestartsLaterSiblings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Permanent), policy(supervise.RestForOne), harnessOpt{})

		h.send("c", "x1")
		h.send("b", "boom")
		assert.Equal(t, supervise.StateBackoff, h.state("b"))
		assert.Equal(t, supervise.StateBackoff, h.state("c"), "c waits for b")
		assert.Equal(t, supervise.StateUp, h.state("a"))
		h.send("c", "x2")

		h.sleep(10 * time.Second)
		assert.Equal(t, []string{"a.1 started"}, j.with("a."))
		assert.Equal(t, []string{"c.1 started", "c.1 got x1", "c.1 stopped", "c.2 started", "c.2 got x2"}, j.with("c."))
		assert.Less(t, j.index("b.2 started"), j.index("c.2 started"), "restarted in start order")
		assert.Equal(t, []string{
			"event failed b.1 within-policy delay=10s count=0",
			"event restarted b.2 within-policy delay=10s count=0",
			"event restarted c.2 sibling-restart delay=0s count=0",
		}, j.with("event "))
		h.finish()
	})
}

func TestTemporaryIsNotRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Temporary), policy(supervise.OneForOne), harnessOpt{})
		h.send("b", "boom", "m1")
		assert.Equal(t, []string{"parent escalation b.1 temporary: boom on b.1"}, j.with("parent escalation"))
		assert.Equal(t, supervise.StateEscalated, h.state("b"))
		h.sleep(time.Hour)
		assert.Equal(t, []string{"b.1 started", "b.1 stopped"}, j.with("b."))
		h.send("b", "m2")
		assert.Equal(t, []string{`parent send b m2: send to "b": supervise: child is down and will not be restarted`}, j.with("parent send"))
		assert.Equal(t, supervise.StateUp, h.state("a"))
		h.finish()
	})
}

func TestTransientNormalExitIsNotRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Transient), policy(supervise.OneForOne), harnessOpt{})

		// a: Exit(normal) — final; the message queued behind it is dropped, loudly.
		h.send("a", "exit", "late")
		// b: poisons itself — seen through the middleware as a normal exit.
		h.send("b", "selfstop")
		// c: abnormal exit — restarted like a failure.
		h.send("c", "exit-abnormal", "kept")
		h.sleep(time.Hour)

		assert.Equal(t, supervise.StateDown, h.state("a"))
		assert.Equal(t, supervise.StateDown, h.state("b"))
		assert.Equal(t, supervise.StateUp, h.state("c"))
		assert.Equal(t, []string{"a.1 started", "a.1 got exit", "a.1 stopped"}, j.with("a."))
		assert.Equal(t, []string{"b.1 started", "b.1 got selfstop", "b.1 stopped"}, j.with("b."))
		assert.Equal(t, []string{"c.1 started", "c.1 got exit-abnormal", "c.1 stopped", "c.2 started", "c.2 got kept"}, j.with("c."))
		assert.Equal(t, []string{
			"event exited a.1 normal-exit delay=0s count=0",
			"event dropped a.1 child-down delay=0s count=1",
			"event exited b.1 normal-exit delay=0s count=0",
			"event failed c.1 abnormal-exit delay=10s count=0",
			"event restarted c.2 abnormal-exit delay=10s count=0",
		}, j.with("event "))
		h.finish()
	})
}

func TestPermanentNormalExitIsRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Permanent), policy(supervise.OneForOne), harnessOpt{})
		h.send("a", "exit", "kept")
		h.sleep(10 * time.Second)
		assert.Equal(t, []string{"a.1 started", "a.1 got exit", "a.1 stopped", "a.2 started", "a.2 got kept"}, j.with("a."))
		h.finish()
	})
}

func TestStopChildrenOrderAndShutdownTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		release := make(chan struct{})
		specs := three(j, supervise.Permanent, blocksOn(release))
		specs[1].ShutdownTimeout = 3 * time.Second
		h := start(t, j, specs, policy(supervise.OneForOne), harnessOpt{})

		h.send("b", "block", "queued")
		h.e.Send(h.parent, stopReq{}) // StopAll: c, b, a
		synctest.Wait()
		assert.True(t, j.has("c.1 stopped"))
		assert.False(t, j.has("a.1 stopped"), "a waits for b")
		assert.Equal(t, supervise.StateShutdown, h.state("b"))

		h.sleep(3*time.Second - time.Millisecond)
		assert.False(t, j.has("parent done"))
		h.sleep(time.Millisecond)
		assert.True(t, j.has("parent done"))
		assert.Less(t, j.index("c.1 stopped"), j.index("event abandoned b.1 shutdown-timeout delay=0s count=0"))
		assert.Less(t, j.index("event abandoned b.1 shutdown-timeout delay=0s count=0"), j.index("a.1 stopped"))
		assert.Less(t, j.index("a.1 stopped"), j.index("parent done"))
		assert.False(t, j.has("b.1 stopped"), "b is still blocked")
		var abandoned []string
		h.inspect(func(s *supervise.Supervisor) { abandoned = s.Abandoned() })
		assert.Equal(t, []string{"b.1"}, abandoned)
		for _, name := range []string{"a", "b", "c"} {
			assert.Equal(t, supervise.StateDown, h.state(name), name)
		}

		// The abandoned instance finishes later; nothing restarts.
		close(release)
		h.sleep(time.Hour)
		assert.Equal(t, []string{"b.1 started", "b.1 got block", "b.1 got queued", "b.1 stopped"}, j.with("b."))
		assert.False(t, j.has("b.2 started"))
		h.finish()
	})
}

func TestStopChildrenExplicitOrderCancelsPendingRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Permanent), policy(supervise.OneForOne), harnessOpt{})
		h.send("b", "boom")
		h.send("b", "held")
		assert.Equal(t, supervise.StateBackoff, h.state("b"))
		h.e.Send(h.parent, stopReq{names: []string{"a", "b", "c"}})
		synctest.Wait()
		assert.Less(t, j.index("a.1 stopped"), j.index("c.1 stopped"))
		assert.Less(t, j.index("c.1 stopped"), j.index("parent done"))
		assert.True(t, j.has("event dropped b.1 child-down delay=0s count=1"))
		h.sleep(time.Hour)
		assert.False(t, j.has("b.2 started"), "a child stopped on purpose is not restarted")
		h.finish()
	})
}

func TestPanicInStartedIsContained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		var panics atomic.Int32
		panics.Store(2)
		h := start(t, j, three(j, supervise.Permanent, panicsInStarted(&panics)), policy(supervise.OneForOne), harnessOpt{})
		h.send("b", "m1")
		h.sleep(10 * time.Second)
		h.send("b", "m2")
		h.sleep(20 * time.Second)
		assert.Equal(t, []string{
			"b.1 started", "b.1 stopped",
			"b.2 started", "b.2 stopped",
			"b.3 started", "b.3 got m1", "b.3 got m2",
		}, j.with("b."))
		assert.Equal(t, supervise.StateUp, h.state("b"))
		h.finish()
	})
}

func TestPanicInStartedForeverEscalates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		var panics atomic.Int32
		panics.Store(1000)
		p := policy(supervise.OneForOne)
		p.Intensity = 2
		h := start(t, j, three(j, supervise.Permanent, panicsInStarted(&panics)), p, harnessOpt{stopOnEsc: true})
		h.sleep(time.Hour)
		assert.Equal(t, []string{"parent escalation b.3 intensity-exceeded: boom in Started"}, j.with("parent escalation"))
		assert.True(t, j.has("parent done"))
		h.finish()
	})
}

func TestPanicInStoppedIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Permanent, panicsInStopped()), policy(supervise.OneForOne), harnessOpt{})
		// Stopped of a failed instance panics too: reported, ignored.
		h.send("b", "boom")
		h.sleep(10 * time.Second)
		require.True(t, j.has("b.2 started"))
		h.e.Send(h.parent, stopReq{})
		synctest.Wait()
		assert.True(t, j.has("parent done"))
		assert.Equal(t, []string{
			"event failed b.1 within-policy delay=10s count=0",
			"event failed b.1 already-stopping delay=0s count=0",
			"event restarted b.2 within-policy delay=10s count=0",
			"event exited c.1 stopped delay=0s count=0",
			"event failed b.2 already-stopping delay=0s count=0",
			"event exited b.2 stopped delay=0s count=0",
			"event exited a.1 stopped delay=0s count=0",
		}, j.with("event "))
		h.finish()
	})
}

func TestTenMinuteBackoffRunsInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		p := policy(supervise.OneForOne)
		p.Backoff.InitialInterval = 10 * time.Minute
		p.Backoff.MaxInterval = time.Hour
		p.Window = 2 * time.Hour
		h := start(t, j, three(j, supervise.Permanent), p, harnessOpt{})
		t0 := time.Now()
		h.send("b", "boom")
		h.sleep(10 * time.Minute)
		assert.True(t, j.has("b.2 started"))
		assert.Equal(t, 10*time.Minute, time.Since(t0), "virtual time")
		h.finish()
	})
}

func TestStaleAndForeignMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Permanent), policy(supervise.OneForOne), harnessOpt{})
		h.send("b", "boom")
		h.sleep(10 * time.Second)
		require.Equal(t, supervise.StateUp, h.state("b"))
		before := len(j.with("event "))

		// A failure report of generation 1 when 2 runs: ignored.
		h.e.Send(h.parent, supervise.ChildFailed{Name: "b", Gen: 1, Reason: "stale"})
		h.e.Send(h.parent, supervise.ChildExited{Name: "b", Gen: 1})
		synctest.Wait()
		assert.Len(t, j.with("event "), before)
		assert.Equal(t, supervise.StateUp, h.state("b"))

		// A late bounce from generation 1 goes to generation 2.
		h.e.Send(h.parent, supervise.Undelivered{Name: "b", Gen: 1, Message: "late"})
		synctest.Wait()
		assert.True(t, j.has("b.2 got late"))

		// Reports about children it does not know are not its business.
		var handled bool
		h.inspect(func(s *supervise.Supervisor) {
			handled, _ = s.Handle(nil, supervise.ChildFailed{Name: "zzz", Gen: 1})
		})
		assert.False(t, handled)
		h.finish()
	})
}

func TestBufferIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Permanent), policy(supervise.OneForOne), harnessOpt{maxBuffered: 2})
		h.send("b", "boom", "q1", "q2", "q3") // q3 bounced past the bound
		h.send("b", "s1")
		assert.True(t, j.has("event dropped b.1 buffer-full delay=0s count=1"))
		require.Len(t, j.with("parent send b s1"), 1)
		assert.True(t, errors.Is(supervise.ErrBufferFull, supervise.ErrBufferFull))
		assert.Contains(t, j.with("parent send b s1")[0], supervise.ErrBufferFull.Error())
		h.sleep(10 * time.Second)
		assert.Equal(t, []string{"b.1 started", "b.1 stopped", "b.2 started", "b.2 got q1", "b.2 got q2"}, j.with("b."))
		h.finish()
	})
}

func TestSendErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Permanent), policy(supervise.OneForOne), harnessOpt{})
		h.send("nobody", "x")
		assert.True(t, j.has("parent send nobody x: send to \"nobody\": supervise: unknown child"))
		var err error
		h.inspect(func(s *supervise.Supervisor) { err = s.StartAll(nil) })
		assert.ErrorIs(t, err, supervise.ErrAlreadyStarted)
		h.inspect(func(s *supervise.Supervisor) { err = supervise.New(nil, policy(supervise.OneForOne)).Send(nil, "x", 1) })
		assert.ErrorIs(t, err, supervise.ErrUnknownChild)
		h.finish()
	})
}

// A top-level actor spawned with Spawn: failures go to OnFailure, later
// messages to OnUndelivered, and hollywood never restarts it.
func TestSpawnTopLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := actor.NewEngine(actor.NewEngineConfig())
		require.NoError(t, err)
		var (
			mu       sync.Mutex
			failures []supervise.ChildFailed
			bounced  []any
			got      []string
			stopped  int
		)
		pid := supervise.Spawn(e, newFuncReceiver(func(c *actor.Context) {
			mu.Lock()
			defer mu.Unlock()
			switch m := c.Message().(type) {
			case actor.Stopped:
				stopped++
			case string:
				if m == "boom" {
					panic("top boom")
				}
				got = append(got, m)
			}
		}), "top", supervise.RecoverOptions{
			Name:          "top",
			OnFailure:     func(f supervise.ChildFailed) { mu.Lock(); failures = append(failures, f); mu.Unlock() },
			OnUndelivered: func(u supervise.Undelivered) { mu.Lock(); bounced = append(bounced, u.Message); mu.Unlock() },
		}, actor.WithInboxSize(0), actor.WithMaxRestarts(3)) // both overridden
		for _, m := range []string{"a", "boom", "b", "c"} {
			e.Send(pid, m)
		}
		synctest.Wait()
		<-e.Poison(pid).Done()
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"a"}, got)
		assert.Equal(t, []any{"b", "c"}, bounced)
		require.Len(t, failures, 1)
		assert.Equal(t, "top", failures[0].Name)
		assert.Equal(t, "top boom", failures[0].Reason)
		assert.Equal(t, "string", failures[0].MsgType)
		assert.Contains(t, failures[0].Stack, "supervisor_test.go")
		assert.Equal(t, 1, stopped, "Stopped runs once, at the real stop")
	})
}

type funcReceiver func(*actor.Context)

func (f funcReceiver) Receive(c *actor.Context) { f(c) }

func newFuncReceiver(f func(*actor.Context)) actor.Producer {
	return func() actor.Receiver { return funcReceiver(f) }
}

// One restart in real time, outside any bubble, so goleak (TestMain) checks
// what the supervisor leaves behind with a real clock.
func TestRealTimeRestart(t *testing.T) {
	j := &journal{}
	e, err := actor.NewEngine(actor.NewEngineConfig())
	require.NoError(t, err)
	p := policy(supervise.OneForOne)
	p.Backoff.InitialInterval = time.Millisecond
	pid := supervise.Spawn(e, func() actor.Receiver {
		return &parent{j: j, sup: supervise.New(three(j, supervise.Permanent), p)}
	}, "rt", supervise.RecoverOptions{})
	e.Send(pid, sendTo{name: "b", msgs: []string{"boom", "after"}})
	require.Eventually(t, func() bool { return j.has("b.2 got after") }, time.Minute, time.Millisecond)
	e.Send(pid, stopReq{})
	require.Eventually(t, func() bool { return j.has("parent done") }, time.Minute, time.Millisecond)
	<-e.Poison(pid).Done()
}

// The failed instance's Stopped never returns: it is abandoned after its
// ShutdownTimeout and the next generation starts anyway, under a new ID.
func TestRestartAbandonsInstanceThatDoesNotStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		release := make(chan struct{})
		specs := three(j, supervise.Permanent, blocksInStopped(release))
		specs[1].ShutdownTimeout = 30 * time.Second // longer than the 10s backoff
		h := start(t, j, specs, policy(supervise.OneForOne), harnessOpt{})
		h.send("b", "boom", "m1")
		h.sleep(10 * time.Second)
		assert.Equal(t, supervise.StateStopping, h.state("b"), "the backoff has passed but b.1 is not gone")
		h.sleep(20 * time.Second)
		assert.Equal(t, supervise.StateUp, h.state("b"))
		assert.Equal(t, []string{
			"event failed b.1 within-policy delay=10s count=0",
			"event abandoned b.1 shutdown-timeout delay=0s count=0",
			"event restarted b.2 within-policy delay=10s count=0",
		}, j.with("event "))
		assert.Equal(t, []string{"b.1 started", "b.2 started", "b.2 got m1"}, j.with("b."))
		close(release)
		synctest.Wait()
		assert.Equal(t, "b.1 stopped", j.with("b.")[3])
		assert.Equal(t, "session/s1/b/2", h.pid("b").GetID())
		h.finish()
	})
}

// The default policy, jitter included, in virtual time.
func TestDefaultPolicyRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		h := start(t, j, three(j, supervise.Transient), supervise.DefaultPolicy(), harnessOpt{})
		for gen := 1; gen <= 3; gen++ {
			h.send("a", "boom")
			h.sleep(2 * time.Second) // at most 1s * 1.25 of backoff; all within the 30s window
			require.True(t, j.has(fmt.Sprintf("a.%d started", gen+1)))
		}
		h.send("a", "boom")
		assert.Equal(t, []string{"parent escalation a.4 intensity-exceeded: boom on a.4"}, j.with("parent escalation"))
		h.finish()
	})
}
