package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// turnWatch signals every turn_diff a session emits, with its seq: the
// turn's result is queued in the same step.
type turnWatch struct {
	mu   sync.Mutex
	sid  string
	last uint64
	ch   chan uint64
}

func newTurnWatch() *turnWatch { return &turnWatch{ch: make(chan uint64, 1024)} }

func (w *turnWatch) listen(sid string, ev messages.PersistedEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sid != "" && sid != w.sid {
		return
	}
	w.last = ev.Seq
	if ev.Event.Type == messages.EvTurnDiff {
		w.ch <- ev.Seq
	}
}

func (w *turnWatch) follow(sid string) {
	w.mu.Lock()
	w.sid = sid
	w.mu.Unlock()
}

// bufferedSession is one session with results queued for reading.
type bufferedSession struct {
	b     *benchRuntime
	watch *turnWatch
	sid   string
	turns int // turns run so far (results queued or read)
	read  int // results read
}

// startBuffered starts a scripted session (the echo scenario) and waits
// for its first turn's result to be queued.
func startBuffered(ctx context.Context, o Options, home, cwd string) (*bufferedSession, error) {
	watch := newTurnWatch()
	b, err := openRuntime(o, home, transports.NewRegistry(script.New(script.WithDelayScale(0))), nil, actors.WithEventListener(watch.listen))
	if err != nil {
		return nil, err
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	st, err := b.rt.Start(octx, scope, messages.Start{Brief: "routing bench", Cwd: cwd})
	if err != nil {
		b.close()
		return nil, err
	}
	watch.follow(st.SessionID)
	s := &bufferedSession{b: b, watch: watch, sid: st.SessionID}
	if err := s.awaitTurn(ctx); err != nil {
		b.close()
		return nil, err
	}
	return s, nil
}

func (s *bufferedSession) awaitTurn(ctx context.Context) error {
	select {
	case <-s.watch.ch:
		s.turns++
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(opTimeout):
		return fmt.Errorf("turn %d never ended", s.turns+1)
	}
}

// queue runs n more turns without reading their results (each started by
// queued guidance once the one before ended), then waits until everything
// the session emitted is durable: every queued result is then ready.
func (s *bufferedSession) queue(ctx context.Context, n int) error {
	for range n {
		octx, cancel := opCtx(ctx)
		_, err := s.b.rt.Guide(octx, scope, messages.Guide{SessionID: s.sid, Text: "again", Mode: messages.GuideQueue})
		cancel()
		if err != nil {
			return err
		}
		if err := s.awaitTurn(ctx); err != nil {
			return err
		}
	}
	s.watch.mu.Lock()
	want := s.watch.last
	s.watch.mu.Unlock()
	for {
		last, err := s.b.rt.Store().LastSeq(ctx, s.sid)
		if err != nil {
			return err
		}
		if last >= want {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// readNext reads the next buffered result and checks it is the next turn.
func (s *bufferedSession) readNext(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	r, err := s.b.rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: s.sid})
	d := time.Since(t0)
	if err != nil {
		return d, err
	}
	s.read++
	if err := expectKind(r, messages.KindTurnComplete); err != nil {
		return d, err
	}
	if r.Turn != s.read {
		return d, fmt.Errorf("read %d returned turn %d", s.read, r.Turn)
	}
	return d, nil
}

// stop stops the session and closes the runtime.
func (s *bufferedSession) stop(ctx context.Context) error {
	octx, cancel := opCtx(ctx)
	defer cancel()
	_, err := s.b.rt.Stop(octx, scope, messages.Stop{SessionID: s.sid})
	if cerr := s.b.close(); err == nil {
		err = cerr
	}
	return err
}

// rawRequestLatencies times n hollywood Request(...).Result() round trips
// to one actor that Responds, and n round trips through two actors (a
// forwarder, like the registry, and the target) answered on a channel,
// the runtime's own shape.
func rawRequestLatencies(n int) (request, twoHop summary, err error) {
	e, err := newRawEngine()
	if err != nil {
		return request, twoHop, err
	}
	target := spawnRaw(e, "target", 0)
	fwd := spawnRaw(e, "registry", 0)
	defer func() {
		<-e.Poison(target).Done()
		<-e.Poison(fwd).Done()
	}()
	var req, hop latencies
	for range 100 { // warm up
		if _, err := e.Request(target, "ping", time.Minute).Result(); err != nil {
			return request, twoHop, err
		}
	}
	for range n {
		t0 := time.Now()
		if _, err := e.Request(target, "ping", time.Minute).Result(); err != nil {
			return request, twoHop, err
		}
		req.since(t0)
	}
	for range n {
		t0 := time.Now()
		ch := make(chan struct{}, 1)
		e.Send(fwd, rawForward{to: target, ping: rawPing{reply: ch}})
		<-ch
		hop.since(t0)
	}
	return req.summary(), hop.summary(), nil
}

func runRouting(ctx context.Context, o Options, dir string) (*Result, error) {
	p := newProgress(o, SuiteRouting)
	n := o.RoutingReads
	res := &Result{Suite: SuiteRouting, Params: fmt.Sprintf("%d read-turns of already-buffered results, one at a time (script backend; file store unless replaced)", n)}
	s, err := startBuffered(ctx, o, filepath.Join(dir, "home"), dir)
	if err != nil {
		return nil, err
	}
	p.printf("queueing %d turn results", n)
	if err := s.queue(ctx, n-1); err != nil {
		s.b.close()
		return nil, err
	}
	var lat latencies
	var errs failures
	p.printf("reading them")
	for range s.turns {
		octx, cancel := opCtx(ctx)
		d, err := s.readNext(octx)
		cancel()
		if err != nil {
			errs.add("%v", err)
			break
		}
		lat.add(d)
	}
	errs.report(res, "buffered results in order", fmt.Sprintf("%d read-turns returned turns 1..%d, each once", s.read, s.turns))
	if err := s.stop(ctx); err != nil {
		res.check("session stopped", false, "%v", err)
	}
	if _, err := s.b.verify(ctx, []string{s.sid}, logExpect{turns: s.turns, clarifications: 0, reason: messages.ReleaseExplicit, status: messages.StatusEnded}, res); err != nil {
		return nil, err
	}
	p.printf("raw hollywood round trips")
	req, hop, err := rawRequestLatencies(n)
	if err != nil {
		return nil, err
	}
	got := lat.summary()
	res.latencyRows("read-turn (buffered)", got, "hollywood Request().Result()", req)
	res.vs("read-turn (buffered) p50", ms(got.p50), UnitMs, "two actor hops + reply channel p50", ms(hop.p50))
	res.vs("read-turns", rate(got.n, time.Duration(got.n)*got.mean), UnitPerSec, "hollywood requests", rate(req.n, time.Duration(req.n)*req.mean))
	res.note("a buffered read-turn goes Runtime -> registry actor -> session actor -> reply channel, with the op's checks and metrics; the two-hop baseline is that path with nothing of ours on it")
	return res, nil
}
