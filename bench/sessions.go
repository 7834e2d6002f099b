package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// asks reports whether scripted turn t raises a clarification: the odd
// turns do, so the first one always does.
func asks(t int) bool { return t%2 == 1 }

// sessionScenario is K turns of about M backend events each. An asking
// turn opens with a tool call that asks (tool_use, clarification,
// tool_result); every turn has thinking and tool-call fillers and ends with
// a text (three deltas and the whole text) and turn_end.
func sessionScenario(turns, events int) *script.Scenario {
	sc := &script.Scenario{}
	for t := 1; t <= turns; t++ {
		var steps []script.Step
		left := events - 1 - 4 // turn_end, the closing text
		if asks(t) {
			steps = append(steps, script.Tool("Bash", map[string]string{"command": "go test ./..."}, "ok").Asking())
			left -= 3
		}
		for i := 0; left > 0; i++ {
			if i%3 == 2 && left >= 2 {
				steps = append(steps, script.Tool("Read", map[string]string{"file_path": fmt.Sprintf("pkg/file%d.go", i)}, "package pkg\n"))
				left -= 2
				continue
			}
			steps = append(steps, script.Thinking(fmt.Sprintf("step %d of turn {{turn}}", i)))
			left--
		}
		steps = append(steps, script.Text("Turn {{turn}} is done."))
		sc.Turns = append(sc.Turns, script.Turn{Steps: steps})
	}
	return sc
}

// The ops the sessions suite times.
const (
	opStart    = "start"
	opReadTurn = "read-turn"
	opAnswer   = "answer"
	opGuide    = "guide"
	opStop     = "stop"
)

// barrier holds drivers at one point until released; a driver that fails
// before it still arrives (once).
type barrier struct {
	arrived sync.WaitGroup
	release chan struct{}
}

func newBarrier(n int) *barrier {
	b := &barrier{release: make(chan struct{})}
	b.arrived.Add(n)
	return b
}

// arrive marks the caller as arrived (once per driver, through once).
func (b *barrier) arrive(once *sync.Once) { once.Do(b.arrived.Done) }

// wait arrives and blocks until the barrier is released.
func (b *barrier) wait(once *sync.Once) {
	b.arrive(once)
	<-b.release
}

// sessionDriver drives one session through its turns.
type sessionDriver struct {
	rt    *benchRuntime
	cwd   string
	turns int
	lat   map[string]*latencies
	bar   *barrier
	// firstStart and lastStart span every start call, for the start rate.
	startMu               sync.Mutex
	firstStart, lastStart time.Time
	errs                  failures
	kinds                 failures
}

func (d *sessionDriver) noteStart(t0, t1 time.Time) {
	d.startMu.Lock()
	defer d.startMu.Unlock()
	if d.firstStart.IsZero() || t0.Before(d.firstStart) {
		d.firstStart = t0
	}
	if t1.After(d.lastStart) {
		d.lastStart = t1
	}
}

// drive runs one session: start, K turns (clarifications answered after a
// steering guidance, later turns started by queued guidance), stop. It
// returns the session id ("" when start failed).
func (d *sessionDriver) drive(ctx context.Context, i int) (sid string) {
	var once sync.Once
	defer d.bar.arrive(&once)
	rt := d.rt.rt
	timed := func(op string, f func(ctx context.Context) error) error {
		octx, cancel := opCtx(ctx)
		defer cancel()
		t0 := time.Now()
		err := f(octx)
		d.lat[op].since(t0)
		if err != nil {
			d.errs.add("session %d %s: %v", i, op, err)
		}
		return err
	}
	read := func(want messages.TurnKind) (messages.TurnResult, error) {
		var r messages.TurnResult
		err := timed(opReadTurn, func(ctx context.Context) (err error) {
			r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
			return err
		})
		if err == nil {
			if kerr := expectKind(r, want); kerr != nil {
				d.kinds.add("session %d: %v", i, kerr)
				return r, kerr
			}
		}
		return r, err
	}

	t0 := time.Now()
	err := timed(opStart, func(ctx context.Context) error {
		st, err := rt.Start(ctx, scope, messages.Start{Brief: fmt.Sprintf("bench session %d", i), Cwd: d.cwd})
		sid = st.SessionID
		return err
	})
	d.noteStart(t0, time.Now())
	if err != nil {
		return ""
	}
	defer func() {
		_ = timed(opStop, func(ctx context.Context) error {
			res, err := rt.Stop(ctx, scope, messages.Stop{SessionID: sid, Outcome: messages.OutcomeSuccess})
			if err == nil && res.AlreadyStopped {
				err = errors.New("the session was already stopped")
			}
			return err
		})
	}()
	for t := 1; t <= d.turns; t++ {
		if t > 1 {
			if timed(opGuide, func(ctx context.Context) error {
				_, err := rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: fmt.Sprintf("now turn %d", t), Mode: messages.GuideQueue})
				return err
			}) != nil {
				return sid
			}
		}
		if asks(t) {
			r, err := read(messages.KindClarification)
			if err != nil {
				return sid
			}
			if t == 1 {
				d.bar.wait(&once) // every session is live and waiting on its clarification
			}
			if timed(opGuide, func(ctx context.Context) error {
				_, err := rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "keep the change small", Mode: messages.GuideSteer})
				return err
			}) != nil {
				return sid
			}
			if timed(opAnswer, func(ctx context.Context) error {
				_, err := rt.Answer(ctx, scope, messages.Answer{SessionID: sid, ClarificationID: r.ClarificationID, Decision: messages.DecisionAllowOnce})
				return err
			}) != nil {
				return sid
			}
		}
		if _, err := read(messages.KindTurnComplete); err != nil {
			return sid
		}
	}
	return sid
}

// rawSessions is the raw baseline of the sessions suite.
type rawSessions struct {
	start, read, request, stop summary
	startRate                  float64
	heap, rss, gor             float64 // per raw session
	threads                    float64 // peak OS threads
}

// measureRawSessions runs n raw sessions at once: the real sessions' op
// sequence with only the costs they build on. Start: spawn an actor with
// three children, one request round trip, a durable record create. Guide
// and answer: one request round trip. Read-turn: a round trip and a
// durable append of a line (a result is delivered once durable). Stop: a
// round trip, a durable append, a record replace and poisoning the actor.
// Memory is measured with all n alive after their first read, the drivers
// parked, as in the real run.
func measureRawSessions(ctx context.Context, n, turns int, dir string) (rawSessions, error) {
	var out rawSessions
	e, err := newRawEngine()
	if err != nil {
		return out, err
	}
	meta := rawRecord()
	line := encodeLines([]messages.PersistedEvent{{Seq: 1, At: time.Now(), Turn: 1, Event: messages.Event{Type: messages.EvClarification,
		ClarificationID: "clar-0123456789", ToolName: "Bash", Input: []byte(`{"command":"go test ./..."}`)}}})
	var start, read, req, stop latencies
	var errs failures
	bar := newBarrier(n)
	fds := newFDGate(n)
	before := snapshot()
	threads := sampleThreads()
	var wg sync.WaitGroup
	t0 := time.Now()
	var lastStart time.Time
	var mu sync.Mutex
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			defer bar.arrive(&once)
			sdir := filepath.Join(dir, fmt.Sprintf("raw%06d", i))
			s0 := time.Now()
			pid := spawnRaw(e, fmt.Sprintf("raw%06d", i), 3)
			pingRaw(e, pid)
			fds.take()
			err := rawCreate(sdir, meta)
			fds.give()
			if err != nil {
				errs.add("raw create: %v", err)
				return
			}
			now := time.Now()
			start.add(now.Sub(s0))
			mu.Lock()
			if now.After(lastStart) {
				lastStart = now
			}
			mu.Unlock()
			var l *rawLog
			appendLine := func() error {
				if n > rawOpenLogs {
					fds.take()
					defer fds.give()
				}
				if l == nil {
					var err error
					if l, err = openRawLog(sdir); err != nil {
						return err
					}
				}
				err := l.append(line)
				if n > rawOpenLogs {
					// above this many live trees a log is opened per
					// append (the store keeps an LRU of handles too), so
					// the descriptors stay within the process's limit
					_ = l.close()
					l = nil
				}
				return err
			}
			defer func() {
				if l != nil {
					_ = l.close()
				}
			}()
			readOnce := func() bool {
				r0 := time.Now()
				pingRaw(e, pid)
				if err := appendLine(); err != nil {
					errs.add("raw append: %v", err)
					return false
				}
				read.since(r0)
				return true
			}
			ping := func() {
				r0 := time.Now()
				pingRaw(e, pid)
				req.since(r0)
			}
			for t := 1; t <= turns; t++ {
				if t > 1 {
					ping() // guide
				}
				if asks(t) {
					if !readOnce() {
						return
					}
					if t == 1 {
						bar.wait(&once)
					}
					ping() // guide (steer)
					ping() // answer
				}
				if !readOnce() {
					return
				}
			}
			s0 = time.Now()
			pingRaw(e, pid)
			err = appendLine()
			if err == nil {
				fds.take()
				err = rawReplace(sdir, meta)
				fds.give()
			}
			<-e.Poison(pid).Done()
			stop.since(s0)
			if err != nil {
				errs.add("raw stop: %v", err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { bar.arrived.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		close(bar.release)
		wg.Wait()
		return out, ctx.Err()
	}
	after := snapshot()
	out.startRate = rate(n, lastStart.Sub(t0))
	out.heap = perUnit(after.heap, before.heap, n)
	out.rss = perUnit(after.rss, before.rss, n)
	out.gor = perSession(after.goroutines-before.goroutines-n, n)
	close(bar.release)
	wg.Wait()
	out.threads = threads.end()
	if errs.n > 0 {
		return out, fmt.Errorf("raw baseline: %s", errs.first[0])
	}
	out.start, out.read, out.request, out.stop = start.summary(), read.summary(), req.summary(), stop.summary()
	return out, nil
}

// fdGate bounds how many raw sessions hold descriptors at once, within
// the process's open-file limit: at 20,000 sessions starting together
// each would hold two (a temp file and its directory) and overrun a
// 20,000 limit, where the store keeps an LRU of handles.
type fdGate chan struct{}

// newFDGate is a gate for n sessions: no gate (nil) when every session
// may hold its two descriptors at once with room to spare, otherwise a
// quarter of the soft limit, never under 64.
func newFDGate(n int) fdGate {
	limit := openFileLimit()
	if limit <= 0 || 2*n+1024 <= limit {
		return nil
	}
	return make(fdGate, max(64, limit/4))
}

func (g fdGate) take() {
	if g != nil {
		g <- struct{}{}
	}
}

func (g fdGate) give() {
	if g != nil {
		<-g
	}
}

// rawOpenLogs is how many raw sessions keep their log open between
// appends; with more, each append opens and closes it.
const rawOpenLogs = 5000

// rawAppendRate appends the same bytes to plain files with the same
// batching and fsync policy as the session run saw (batches per log,
// bytes per batch), from up to 1,000 writers at once, and returns events
// per second and the CPU this process spent on them (nothing else of the
// suite runs meanwhile).
func rawAppendRate(ctx context.Context, dir string, writers, batchesPer, eventsPerBatch, bytesPerBatch int) (float64, time.Duration, error) {
	data := make([]byte, bytesPerBatch)
	for i := range data {
		data[i] = 'x'
	}
	if bytesPerBatch > 0 {
		data[len(data)-1] = '\n'
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, 0, err
	}
	var errs failures
	var wg sync.WaitGroup
	cpu0 := processCPU()
	t0 := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := filepath.Join(dir, fmt.Sprintf("log%05d", w))
			if err := os.Mkdir(d, 0o700); err != nil {
				errs.add("%v", err)
				return
			}
			l, err := openRawLog(d)
			if err != nil {
				errs.add("%v", err)
				return
			}
			defer l.close()
			for range batchesPer {
				if ctx.Err() != nil {
					return
				}
				if err := l.append(data); err != nil {
					errs.add("%v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := processCPU() - cpu0
	if errs.n > 0 {
		return 0, 0, fmt.Errorf("raw appends: %s", errs.first[0])
	}
	return rate(writers*batchesPer*eventsPerBatch, elapsed), cpu, ctx.Err()
}

func runSessions(ctx context.Context, o Options, dir string) (*Result, error) {
	p := newProgress(o, SuiteSessions)
	n, k, m := o.Sessions, o.Turns, o.Events
	res := &Result{Suite: SuiteSessions, Params: fmt.Sprintf("%d concurrent sessions x %d turns x ~%d events (script backend, delays off; file store unless replaced; diff capture off)", n, k, m)}
	asking := 0
	for t := 1; t <= k; t++ {
		if asks(t) {
			asking++
		}
	}

	p.printf("raw baseline: %d hollywood actor trees with durable records, the same ops", n)
	if err := os.MkdirAll(filepath.Join(dir, "raw"), 0o700); err != nil {
		return nil, err
	}
	raw, err := measureRawSessions(ctx, n, k, filepath.Join(dir, "raw"))
	if err != nil {
		return nil, err
	}

	cwd := filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		return nil, err
	}
	sc := sessionScenario(k, m)
	brt, err := openRuntime(o, filepath.Join(dir, "home"), transports.NewRegistry(script.New(script.WithScenario(sc), script.WithDelayScale(0))), nil)
	if err != nil {
		return nil, err
	}
	d := &sessionDriver{rt: brt, cwd: cwd, turns: k, bar: newBarrier(n), lat: map[string]*latencies{}}
	for _, op := range []string{opStart, opReadTurn, opAnswer, opGuide, opStop} {
		d.lat[op] = &latencies{}
	}
	before := snapshot()
	threads := sampleThreads()
	p.printf("starting %d sessions", n)
	sids := make([]string, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sids[i] = d.drive(ctx, i)
		}()
	}
	arrived := make(chan struct{})
	go func() { d.bar.arrived.Wait(); close(arrived) }()
	select {
	case <-arrived:
	case <-ctx.Done():
	}
	live := snapshot()
	liveCount := 0
	if ids, err := brt.rt.LiveSessions(ctx); err == nil {
		liveCount = len(ids)
	}
	p.printf("%d sessions live, each waiting on its first clarification; heap %.0f MiB, %d goroutines", liveCount, float64(live.heap)/(1<<20), live.goroutines)
	// from here every session is live and only turns run: the events
	// persisted from the release on are the load phase's (the whole run
	// also holds the starts, each a durable record create)
	eventsAtRelease, appendsAtRelease := brt.store.events.Load(), brt.store.appends.Load()
	tRelease, cpuAtRelease, waitAtRelease, kernAtRelease := time.Now(), processCPU(), runQueueWait(), processKernelUsage()
	stopProfile, profileErr := startTurnsProfile(o.TurnsProfile)
	stopTrace, traceErr := startTurnsTrace(o.TurnsTrace)
	close(d.bar.release)
	wg.Wait()
	stopTrace()
	stopProfile()
	elapsed := time.Since(t0)
	loadElapsed, loadCPU, waitAtStop := time.Since(tRelease), processCPU()-cpuAtRelease, runQueueWait()
	loadKern := processKernelUsage().since(kernAtRelease)
	peakThreads := threads.end()
	p.printf("all sessions stopped after %.1fs", elapsed.Seconds())
	appends, events, metas := brt.store.appends.Load(), brt.store.events.Load(), brt.store.metas.Load()
	cerr := brt.close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// meta.json files actually written (create, release, checkpoints), when
	// the store counts them; the record changes above go through its WAL
	metaFiles := int64(-1)
	if mc, ok := brt.store.Store.(interface{ MetaFileWrites() int64 }); ok {
		metaFiles = mc.MetaFileWrites()
	}
	// WAL group commits (one write and one fsync each), when the store has a WAL
	walCommits := int64(-1)
	if wc, ok := brt.store.Store.(interface{ WALCommits() int64 }); ok {
		walCommits = wc.WALCommits()
	}
	checkpoints, checkpointSpent := int64(-1), time.Duration(0)
	if lc, ok := brt.store.Store.(interface {
		LoopCheckpoints() (int64, time.Duration)
	}); ok {
		checkpoints, checkpointSpent = lc.LoopCheckpoints()
	}
	checkpointMax := time.Duration(-1)
	if lm, ok := brt.store.Store.(interface{ LoopCheckpointMax() time.Duration }); ok {
		checkpointMax = lm.LoopCheckpointMax()
	}

	var started []string
	for _, sid := range sids {
		if sid != "" {
			started = append(started, sid)
		}
	}
	p.printf("reading %d logs back", len(started))
	stats, err := brt.verify(ctx, started, logExpect{turns: k, clarifications: asking, reason: messages.ReleaseExplicit, status: messages.StatusEnded}, res)
	if err != nil {
		return nil, err
	}
	d.errs.report(res, "ops succeeded", fmt.Sprintf("every start, read-turn, answer, guide and stop of %d sessions answered without error", n))
	d.kinds.report(res, "results as scripted", "every read-turn returned the scripted kind (clarification, then turn_complete)")
	res.check("sessions started", len(started) == n, "%d of %d", len(started), n)
	if cerr != nil {
		res.check("runtime closed", false, "%v", cerr)
	}

	// the store's raw rate, with the batching this run saw
	var rawEvents float64
	var rawCPU time.Duration
	var rawKern kernelUsage
	rawTotal := 0
	if appends > 0 && len(started) > 0 {
		batchesPer := max(int(appends)/len(started), 1)
		eventsPerBatch := max(int(math.Round(float64(events)/float64(appends))), 1)
		bytesPerBatch := int(float64(stats.bytes) / float64(max(stats.events, 1)) * float64(eventsPerBatch))
		writers := min(len(started), 1000)
		p.printf("raw baseline: %d plain files x %d appends of %d bytes, fsync each", writers, batchesPer, bytesPerBatch)
		kern0 := processKernelUsage()
		rawEvents, rawCPU, err = rawAppendRate(ctx, filepath.Join(dir, "rawlogs"), writers, batchesPer, eventsPerBatch, bytesPerBatch)
		rawKern = processKernelUsage().since(kern0)
		rawTotal = writers * batchesPer * eventsPerBatch
		if err != nil {
			return nil, err
		}
		res.note("the store's raw rate is %d plain files (one per session, up to 1,000 at once) each taking %d appends of %d events (%d bytes) with one write and one fsync per append: the batching this run saw",
			writers, batchesPer, eventsPerBatch, bytesPerBatch)
	}

	startSpan := d.lastStart.Sub(d.firstStart)
	res.vs("sessions started", rate(len(started), startSpan), UnitPerSec, "raw actor tree + durable record", raw.startRate)
	res.latencyRows("start", d.lat[opStart].summary(), "raw spawn+request+durable create", raw.start)
	res.latencyRows("read-turn", d.lat[opReadTurn].summary(), "raw request+durable append", raw.read)
	for _, op := range []string{opAnswer, opGuide} {
		res.latencyRows(op, d.lat[op].summary(), "raw request round trip", raw.request)
	}
	res.latencyRows("stop", d.lat[opStop].summary(), "raw request+durable append+replace+poison", raw.stop)
	res.vs("events persisted", rate(int(events), elapsed), UnitPerSec, "plain-file appends, same batching", rawEvents)
	res.vs("events persisted, turns phase", rate(int(events-eventsAtRelease), loadElapsed), UnitPerSec, "plain-file appends, same batching", rawEvents)
	loadEvents := events - eventsAtRelease
	res.vs("CPU per event persisted, turns phase", perEvent(loadCPU, loadEvents), UnitMs, "plain-file appends, same batching", perEvent(rawCPU, int64(rawTotal)))
	loadFaults, loadSwitches := loadKern.per(int(loadEvents))
	rawFaults, rawSwitches := rawKern.per(rawTotal)
	res.vsCount("page faults per event persisted, turns phase", loadFaults, "plain-file appends, same batching", rawFaults)
	res.vsCount("voluntary context switches per event persisted, turns phase", loadSwitches, "plain-file appends, same batching", rawSwitches)
	res.row("cores busy, turns phase (process CPU / wall)", loadCPU.Seconds()/loadElapsed.Seconds(), UnitCount)
	if waitAtRelease >= 0 && waitAtStop >= waitAtRelease {
		res.row("cores wanted but not given, turns phase (run-queue wait / wall)", (waitAtStop-waitAtRelease).Seconds()/loadElapsed.Seconds(), UnitCount)
	}
	res.row("events per append (group commit)", float64(events)/math.Max(float64(appends), 1), UnitCount)
	res.row("record changes (store PutMeta/Create)", rate(int(metas), elapsed), UnitPerSec)
	if walCommits > 0 {
		res.row("appends per WAL group commit (one fsync)", float64(appends)/float64(walCommits), UnitCount)
	}
	if checkpoints >= 0 {
		res.row("WAL checkpoints mid-run", float64(checkpoints), UnitCount)
		res.row("WAL loop time in those checkpoints", ms(checkpointSpent), UnitMs)
		if checkpointMax >= 0 {
			res.row("longest WAL commit stall by one checkpoint", ms(checkpointMax), UnitMs)
		}
	}
	if metaFiles >= 0 && len(started) > 0 {
		res.row("meta.json writes per session", float64(metaFiles)/float64(len(started)), UnitCount)
	}
	res.vs("heap per live session", perUnit(live.heap, before.heap, n), UnitBytes, "raw actor tree + record", raw.heap)
	res.vs("RSS per live session", perUnit(live.rss, before.rss, n), UnitBytes, "raw actor tree + record", raw.rss)
	res.vs("goroutines per live session", perSession(live.goroutines-before.goroutines-n, n), UnitCount, "raw actor tree", raw.gor)
	res.vs("OS threads, peak", peakThreads, UnitCount, "raw actor trees + files", raw.threads)
	res.row("live sessions at the memory snapshot", float64(liveCount), UnitCount)
	res.note("latencies are under full load: %d drivers issue their ops at once, so queueing behind the other sessions is part of every figure; read-turn includes the turn itself (up to its result being durable)", n)
	res.note("the memory figures are taken with every session live and waiting on its first clarification, after a GC; both sides include one parked driver goroutine per session")
	res.note("events persisted: %d events in %d appends over %.1fs (the whole run); %s read back", events, appends, elapsed.Seconds(), FormatValue(float64(stats.bytes), UnitBytes))
	res.note("CPU per event: this process's user and system CPU (getrusage, every thread: the drivers, the sessions, the script backend, the store) over the turns phase, per event persisted in it; the baseline's is the process's CPU through the plain-file appends, per event. Cores busy below %d says the process waited (for CPU it was not given on a loaded machine, or for the disk), not that it ran out of work; cores wanted but not given is the first kind (its threads' time runnable on a run queue, /proc schedstat), so busy plus wanted well below %[1]d is the process waiting on itself or the disk", runtime.NumCPU())
	if profileErr != nil {
		res.note("turns profile not taken: %v", profileErr)
	}
	if traceErr != nil {
		res.note("turns trace not taken: %v", traceErr)
	}
	res.note("events persisted, turns phase: %d events in %d appends over %.1fs, from every session live (the barrier's release) to the last stop", events-eventsAtRelease, appends-appendsAtRelease, loadElapsed.Seconds())
	return res, nil
}

// perEvent is CPU time per event, in milliseconds.
func perEvent(cpu time.Duration, events int64) float64 {
	if events <= 0 {
		return math.NaN()
	}
	return ms(cpu) / float64(events)
}

// perSession is a count per session rounded to hundredths: a stray
// goroutine of the harness is not a fraction of every session.
func perSession(count, n int) float64 {
	return math.Round(100*float64(count)/float64(n)) / 100
}
