package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/native"
)

// nativeModelCalls is how many model calls each scripted native turn
// makes: one answered with a tool call (ls), one with the closing text.
const nativeModelCalls = 2

// nativeScenario: every "bench" prompt is answered with thinking, a line
// of text and an ls call, then, with the tool's result, a closing text.
func nativeScenario() *modelmock.Scenario {
	return &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "bench"}, Steps: []modelmock.Step{
		{Thinking: "list the files first", Text: "Looking at the workspace.", Tool: &modelmock.ToolCall{Name: native.ToolLs, Input: json.RawMessage(`{}`)}},
		{Text: "Done: the workspace is listed."},
	}}}}
}

// modelClock sums how long the model server spent on the model calls it
// answered (from the request's arrival to its answer's end).
type modelClock struct {
	busy  atomic.Int64 // ns
	calls atomic.Int64

	mu     sync.Mutex
	record bool
	bodies [][]byte // the model calls' request bodies, while record is set
}

func (m *modelClock) hook(r modelmock.Request) {
	if r.Kind != modelmock.KindMain {
		return
	}
	m.busy.Add(int64(time.Since(r.At)))
	m.calls.Add(1)
	m.mu.Lock()
	if m.record {
		m.bodies = append(m.bodies, r.Body)
	}
	m.mu.Unlock()
}

// stopRecording returns the bodies recorded so far and records no more.
func (m *modelClock) stopRecording() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record = false
	return m.bodies
}

// turnClock times one session's turns where the runtime meets the
// backend: when the backend is asked to start a turn, and when it emits
// the turn's end. The bench's goroutine of the session reads them once
// read-turn answered, which happens after both.
type turnClock struct {
	started, ended atomic.Int64 // unix ns
}

// clockedTransport is the native transport with a turnClock per session,
// so a turn splits into the op's way to the backend, the backend's turn
// and the way from its end to read-turn's answer (the result made durable).
type clockedTransport struct {
	transports.Transport
	mu     sync.Mutex
	clocks map[string]*turnClock // by session id
}

func (t *clockedTransport) clock(sid string) *turnClock {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.clocks[sid]
	if !ok {
		c = &turnClock{}
		t.clocks[sid] = c
	}
	return c
}

func (t *clockedTransport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	c := t.clock(spec.SessionID)
	s, err := t.Transport.Open(ctx, spec, func(turn int, ev messages.Event) {
		if ev.Type == messages.EvTurnEnd {
			c.ended.Store(time.Now().UnixNano())
		}
		sink(turn, ev)
	})
	if err != nil {
		return nil, err
	}
	return clockedSession{Session: s, c: c}, nil
}

// clockedSession is a native session with its clock; it keeps the
// abilities a native session has (the runtime finds them by type
// assertion), though the bench's turns use neither, and says what the
// native session says of its commands (Prompt): hidden, the runtime ran
// them on a goroutine each, not as it does for a native session.
type clockedSession struct {
	transports.Session
	c *turnClock
}

func (s clockedSession) Interrupt(ctx context.Context) error {
	return s.Session.(transports.Interrupter).Interrupt(ctx)
}

func (s clockedSession) SetPosture(ctx context.Context, p messages.Posture) error {
	return s.Session.(transports.PostureSetter).SetPosture(ctx, p)
}

// Prompt is the native session's: its clock's StartTurn only stores a time.
func (s clockedSession) Prompt() bool {
	p, ok := s.Session.(transports.Prompt)
	return ok && p.Prompt()
}

func (s clockedSession) StartTurn(ctx context.Context, turn int, input string) error {
	s.c.started.Store(time.Now().UnixNano())
	return s.Session.StartTurn(ctx, turn, input)
}

// nativeFlushes is how many durable writes deviceFlush times at c=1.
const nativeFlushes = 200

// nativeWakes and nativeFaultPages are how many hand-offs threadWake
// times and how many pages pageFault touches at c=1 (about 0.1 s and a
// few ms here).
const (
	nativeWakes      = 200
	nativeFaultPages = 2000
)

// nativeLevel is one rung of the ladder: c sessions at once.
type nativeLevel struct {
	c          int
	turns      int
	elapsed    time.Duration
	turnLat    summary
	turnSum    time.Duration
	modelBusy  time.Duration
	modelCalls int64
	storeBusy  time.Duration
	walCommits int64 // the store's WAL group commits (one fsync each); -1: no WAL
	// a turn's parts: the op to the backend's StartTurn, the backend's
	// turn (to its turn_end, model server included), turn_end to
	// read-turn's answer (the result made durable)
	toBackend, backendTurn, toAnswer summary
	// firstTurn is a session's first turn alone: the start op (the record
	// made durable, capability curation, the actors spawned) to its
	// read-turn, the first model call's connection dialled; the turns
	// rows share it among every turn of the session
	firstTurn summary
	bare      summary
	bareSum   time.Duration
	bareSpan  time.Duration
	bareTurns int
	// alone is the native backend's turns without the runtime (no actors,
	// no store), aloneSum their time less the model server's
	alone    summary
	aloneSum time.Duration
	// the process's CPU (getrusage: the runtime, modelmock, the bench's
	// goroutines) over the turns, over the bare baseline's calls and over
	// the backend alone's turns
	cpu, bareCPU, aloneCPU time.Duration
	// flush is one durable write on the home's disk (deviceFlush), taken
	// at c=1 only: there a turn waits for one flush of its own, at higher
	// rungs sessions share their flushes
	flush summary
	// the process's page faults and context switches over the turns, the
	// bare baseline's calls and the backend alone's turns
	kern, bareKern, aloneKern kernelUsage
	// at c=1 only, what two kernel costs are on this machine: a hand-off
	// to a goroutine on a sleeping thread (threadWake) and one page fault
	// (pageFault); a c=1 turn is made of hand-offs with the other CPU
	// idle between them
	wake  summary
	fault time.Duration
}

func runNative(ctx context.Context, o Options, dir string) (*Result, error) {
	p := newProgress(o, SuiteNative)
	res := &Result{Suite: SuiteNative, Params: fmt.Sprintf("native backend against modelmock on 127.0.0.1 (Anthropic Messages, streamed), %d turns per session of %d model calls each, at %s sessions at once; diff capture off",
		o.NativeTurns, nativeModelCalls, joinInts(o.Concurrency))}
	var levels []nativeLevel
	var opErrs, kinds failures
	totalCalls, wantCalls := int64(0), int64(0)
	for i, c := range o.Concurrency {
		p.printf("%d sessions at once", c)
		var profile, traceTo io.Writer
		if i == len(o.Concurrency)-1 {
			profile, traceTo = o.TurnsProfile, o.TurnsTrace
		}
		lv, calls, err := nativeRung(ctx, o, filepath.Join(dir, fmt.Sprintf("c%d", c)), c, profile, traceTo, &opErrs, &kinds, res)
		if err != nil {
			return nil, err
		}
		totalCalls += calls
		wantCalls += int64(c * o.NativeTurns * nativeModelCalls)
		levels = append(levels, lv)
	}
	opErrs.report(res, "ops succeeded", "every start, guide, read-turn and stop answered without error")
	kinds.report(res, "turns completed", fmt.Sprintf("every turn returned turn_complete after %d model calls", nativeModelCalls))
	res.check("model calls", totalCalls == wantCalls, "%d model calls answered, %d turns x %d expected", totalCalls, wantCalls/nativeModelCalls, nativeModelCalls)

	for _, lv := range levels {
		pre := fmt.Sprintf("c=%d: ", lv.c)
		res.vs(pre+"turns", rate(lv.turns, lv.elapsed), UnitPerSec, "the same model calls replayed", rate(lv.bareTurns, lv.bareSpan))
		res.vs(pre+"turn p50", ms(lv.turnLat.p50), UnitMs, "the same model calls p50", ms(lv.bare.p50))
		res.vs(pre+"turn p99", ms(lv.turnLat.p99), UnitMs, "the same model calls p99", ms(lv.bare.p99))
		share := 100 * (1 - float64(lv.modelBusy)/float64(lv.turnSum))
		res.row(pre+"runtime's share of a turn", share, UnitPercent)
		runtimePerTurn := (lv.turnSum - lv.modelBusy) / time.Duration(max(lv.turns, 1))
		barePerTurn := lv.bareSum / time.Duration(max(lv.bareTurns, 1))
		res.vs(pre+"runtime per turn (turn - model server)", ms(runtimePerTurn), UnitMs,
			"bare client per turn (calls - model server)", ms(barePerTurn))
		if lv.flush.n > 0 {
			res.row(pre+fmt.Sprintf("one device flush on the home's disk (a %d-byte write over zeros + fdatasync, as a WAL commit; mean of %d)", flushFrame, lv.flush.n), ms(lv.flush.mean), UnitMs)
			res.vs(pre+"runtime per turn less one device flush (the contract's floor)", ms(runtimePerTurn-lv.flush.mean), UnitMs,
				"bare client per turn (calls - model server)", ms(barePerTurn))
		}
		alonePerTurn := lv.aloneSum / time.Duration(max(lv.alone.n, 1))
		res.vs(pre+"the native backend alone per turn (turn - model server; no runtime)", ms(alonePerTurn), UnitMs,
			"bare client per turn (calls - model server)", ms(barePerTurn))
		res.vs(pre+"runtime per turn against the native backend alone (what the actors and the store add)", ms(runtimePerTurn), UnitMs,
			"the native backend alone per turn (turn - model server)", ms(alonePerTurn))
		res.vs(pre+"process CPU per turn (runtime + model server)", ms(lv.cpu/time.Duration(max(lv.turns, 1))), UnitMs,
			"process CPU per turn replayed (bare client + model server)", ms(lv.bareCPU/time.Duration(max(lv.bareTurns, 1))))
		res.vs(pre+"process CPU per turn, the native backend alone (+ model server)", ms(lv.aloneCPU/time.Duration(max(lv.alone.n, 1))), UnitMs,
			"process CPU per turn replayed (bare client + model server)", ms(lv.bareCPU/time.Duration(max(lv.bareTurns, 1))))
		faults, switches := lv.kern.per(lv.turns)
		bareFaults, bareSwitches := lv.bareKern.per(lv.bareTurns)
		aloneFaults, aloneSwitches := lv.aloneKern.per(lv.alone.n)
		res.vsCount(pre+"page faults per turn (the process: runtime + model server)", faults,
			"page faults per turn replayed (bare client + model server)", bareFaults)
		res.vsCount(pre+"page faults per turn, the native backend alone (+ model server)", aloneFaults,
			"page faults per turn replayed (bare client + model server)", bareFaults)
		res.vsCount(pre+"voluntary context switches per turn (the process: runtime + model server)", switches,
			"voluntary context switches per turn replayed (bare client + model server)", bareSwitches)
		res.vsCount(pre+"voluntary context switches per turn, the native backend alone (+ model server)", aloneSwitches,
			"voluntary context switches per turn replayed (bare client + model server)", bareSwitches)
		if lv.wake.n > 0 {
			res.row(pre+fmt.Sprintf("one hand-off to a goroutine on a sleeping thread (a channel send to it running, its CPU idle %s before; p50 of %d)", wakeIdle, lv.wake.n), ms(lv.wake.p50), UnitMs)
			res.row(pre+fmt.Sprintf("one page fault (the first touch of a fresh page; mean of %d)", nativeFaultPages), ms(lv.fault), UnitMs)
		}
		res.row(pre+"a session's first turn, its start included (mean; the turn rows share it among the session's turns)", ms(lv.firstTurn.mean), UnitMs)
		res.row(pre+"turn, part 1: the op to the backend's StartTurn (mean)", ms(lv.toBackend.mean), UnitMs)
		res.row(pre+"turn, part 2: the backend's turn, model server included (mean)", ms(lv.backendTurn.mean), UnitMs)
		res.row(pre+"turn, part 3: turn_end to read-turn's answer, the result made durable (mean)", ms(lv.toAnswer.mean), UnitMs)
		res.row(pre+"store writes per turn (appends and records, fsync'd)", ms(lv.storeBusy/time.Duration(max(lv.turns, 1))), UnitMs)
		if lv.walCommits >= 0 {
			// includes each session's start and stop: a floor of what a turn waits for is one of them
			res.row(pre+"WAL group commits (fsyncs) per turn", float64(lv.walCommits)/float64(max(lv.turns, 1)), UnitCount)
		}
	}
	res.note("store writes happen on each session's persist actor alongside the agent loop; a turn's result is delivered once its events are durable, so they are part of the runtime's share")
	res.note("a turn runs from the op that starts it (start or guide) to read-turn returning its result: the agent loop, tool execution, events persisted, the result made durable")
	res.note("a turn's three parts are timed where the runtime meets the backend: its StartTurn and its turn_end event; part 3 is what a turn waits for the store once the backend is done (its last batch's group commit, and an earlier batch still in flight)")
	res.note("page faults and voluntary context switches per turn: getrusage's minor faults and voluntary switches of the whole process over the same spans as its CPU; at c=1 the two kernel costs beside them (a hand-off to a goroutine on a sleeping thread, one page fault) say what each costs on this machine: a side that runs first in a rung grows the heap and pays the faults of its fresh pages, and every hand-off between goroutines at c=1 may wake the idle CPU")
	res.note("process CPU per turn: this process's user and system CPU (getrusage, every thread) over a rung's turns, from the first op to the last stop, per turn; the baseline's over its replay. Both hold modelmock's CPU (the same calls on both sides): the difference is the runtime's CPU against the bare client's")
	res.note("the contract's floor: a turn's result is durable before read-turn answers, so a turn at c=1 holds at least one device flush after its turn_end that the bare client never pays; 'less one device flush' takes the mean of %d flushes measured on the same disk right after the rung, and is the ratio to read against issue 35's 2x at c=1", nativeFlushes)
	res.note("the model server's time is from each model call's arrival to the end of its streamed answer (modelmock's request log); the runtime's share is what is left of the turns")
	res.note("the native backend alone runs the same turns (the same scenario, as many sessions at once) straight on a native transport after the replay: no actors, no store, no op; its 'per turn' is StartTurn to its turn_end less the model server's time. It is what the agent loop itself costs over the bare client (the answers decoded, the tool run, the next request built); the runtime's row against it is what the actors and the store add")
	res.note("the baseline replays the very request bodies the sessions sent (the conversation so far, the tools) with a plain HTTP client reading each streamed answer to its end, %d calls per turn, from as many goroutines as sessions; its 'per turn' is the client side of those calls", nativeModelCalls)
	return res, nil
}

// nativeRung runs c native sessions of o.NativeTurns turns at once, then
// the bare baseline at the same concurrency. profile, when set, receives
// a CPU profile of the sessions' turns (not of the baseline), traceTo a
// Go execution trace of them.
func nativeRung(ctx context.Context, o Options, dir string, c int, profile, traceTo io.Writer, opErrs, kinds *failures, res *Result) (nativeLevel, int64, error) {
	lv := nativeLevel{c: c}
	clock := &modelClock{record: true}
	mock, err := modelmock.Start(nil, nativeScenario(), modelmock.WithRequestHook(clock.hook))
	if err != nil {
		return lv, 0, err
	}
	defer mock.Close()
	env := map[string]string{native.EnvAnthropicBaseURL: mock.URL(), native.EnvAnthropicAPIKey: "bench-key"}
	tr := &clockedTransport{Transport: native.New(native.WithProcessEnv(nil)), clocks: map[string]*turnClock{}}
	b, err := openRuntime(o, filepath.Join(dir, "home"), transports.NewRegistry(tr), env)
	if err != nil {
		return lv, 0, err
	}
	var turnLat, toBackend, backendTurn, toAnswer, firstTurn latencies
	sids := make([]string, c)
	var wg sync.WaitGroup
	stopProfile, profileErr := startTurnsProfile(profile)
	if profileErr != nil {
		res.note("turns profile not taken: %v", profileErr)
	}
	stopTrace, traceErr := startTurnsTrace(traceTo)
	if traceErr != nil {
		res.note("turns trace not taken: %v", traceErr)
	}
	t0, cpu0, kern0 := time.Now(), processCPU(), processKernelUsage()
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cwd := filepath.Join(dir, fmt.Sprintf("work%d", i))
			if err := os.MkdirAll(cwd, 0o700); err != nil {
				opErrs.add("%v", err)
				return
			}
			_ = os.WriteFile(filepath.Join(cwd, "README.md"), []byte("# bench\n"), 0o600)
			octx, cancel := opCtx(ctx)
			defer cancel()
			for t := 1; t <= o.NativeTurns; t++ {
				s0 := time.Now()
				if t == 1 {
					st, err := b.rt.Start(octx, scope, messages.Start{Brief: "bench turn 1", Cwd: cwd, Model: "claude-mock"})
					if err != nil {
						opErrs.add("session %d start: %v", i, err)
						return
					}
					sids[i] = st.SessionID
				} else if _, err := b.rt.Guide(octx, scope, messages.Guide{SessionID: sids[i], Text: fmt.Sprintf("bench turn %d", t), Mode: messages.GuideQueue}); err != nil {
					opErrs.add("session %d guide: %v", i, err)
					return
				}
				r, err := b.rt.ReadTurn(octx, scope, messages.ReadTurn{SessionID: sids[i]})
				if err != nil {
					opErrs.add("session %d read-turn: %v", i, err)
					return
				}
				turnLat.since(s0)
				if t == 1 {
					firstTurn.since(s0)
				}
				if ck := tr.clock(sids[i]); ck.started.Load() >= s0.UnixNano() && ck.ended.Load() >= ck.started.Load() {
					st, en := time.Unix(0, ck.started.Load()), time.Unix(0, ck.ended.Load())
					toBackend.add(st.Sub(s0))
					backendTurn.add(en.Sub(st))
					toAnswer.since(en)
				}
				if kerr := expectKind(r, messages.KindTurnComplete); kerr != nil {
					kinds.add("session %d: %v", i, kerr)
					return
				}
			}
			if _, err := b.rt.Stop(octx, scope, messages.Stop{SessionID: sids[i]}); err != nil {
				opErrs.add("session %d stop: %v", i, err)
			}
		}()
	}
	wg.Wait()
	lv.elapsed, lv.cpu, lv.kern = time.Since(t0), processCPU()-cpu0, processKernelUsage().since(kern0)
	stopTrace()
	stopProfile()
	lv.turnLat = turnLat.summary()
	lv.toBackend, lv.backendTurn, lv.toAnswer = toBackend.summary(), backendTurn.summary(), toAnswer.summary()
	lv.firstTurn = firstTurn.summary()
	lv.turns = lv.turnLat.n
	lv.turnSum = time.Duration(lv.turnLat.n) * lv.turnLat.mean
	lv.modelBusy = time.Duration(clock.busy.Load())
	calls := clock.calls.Load()
	lv.modelCalls = calls
	lv.storeBusy = time.Duration(b.store.busy.Load())
	lv.walCommits = -1
	if wc, ok := b.store.Store.(interface{ WALCommits() int64 }); ok {
		lv.walCommits = wc.WALCommits()
	}
	if err := b.close(); err != nil {
		res.check(fmt.Sprintf("c=%d: runtime closed", c), false, "%v", err)
	}
	var started []string
	for _, sid := range sids {
		if sid != "" {
			started = append(started, sid)
		}
	}
	sub := &Result{}
	if _, err := b.verify(ctx, started, logExpect{turns: o.NativeTurns, clarifications: 0, reason: messages.ReleaseExplicit, status: messages.StatusEnded}, sub); err != nil {
		return lv, calls, err
	}
	for _, ch := range sub.Checks {
		ch.Name = fmt.Sprintf("c=%d: %s", c, ch.Name)
		res.Checks = append(res.Checks, ch)
	}

	// the bare baseline: the same calls from a plain client
	bodies := clock.stopRecording()
	busyBefore, bareCPU0, bareKern0 := clock.busy.Load(), processCPU(), processKernelUsage()
	bare, err := bareModelTurns(ctx, mock.URL(), c, bodies)
	if err != nil {
		return lv, calls, err
	}
	lv.bareCPU, lv.bareKern = processCPU()-bareCPU0, processKernelUsage().since(bareKern0)
	lv.bare, lv.bareSpan = bare.turns.summary(), bare.span
	lv.bareTurns = lv.bare.n
	lv.bareSum = time.Duration(lv.bare.n)*lv.bare.mean - time.Duration(clock.busy.Load()-busyBefore)

	// the native backend alone: the same turns without the runtime
	busyBefore, aloneCPU0, aloneKern0 := clock.busy.Load(), processCPU(), processKernelUsage()
	if lv.alone, err = nativeAloneTurns(ctx, mock.URL(), dir, c, o.NativeTurns); err != nil {
		return lv, calls, err
	}
	lv.aloneCPU, lv.aloneKern = processCPU()-aloneCPU0, processKernelUsage().since(aloneKern0)
	lv.aloneSum = time.Duration(lv.alone.n)*lv.alone.mean - time.Duration(clock.busy.Load()-busyBefore)
	if c == 1 {
		if lv.flush, err = deviceFlush(dir, nativeFlushes, 30*time.Second); err != nil {
			return lv, calls, fmt.Errorf("the device flush: %w", err)
		}
		lv.wake = threadWake(nativeWakes)
		if lv.fault, err = pageFault(nativeFaultPages); err != nil {
			return lv, calls, fmt.Errorf("the page fault: %w", err)
		}
	}
	return lv, calls, nil
}

type bareRun struct {
	turns latencies
	span  time.Duration
}

// bareModelTurns replays the recorded model calls (the very request
// bodies the sessions sent) from c goroutines with a plain HTTP client
// that reads every streamed answer to its end, nativeModelCalls calls per
// timed turn.
func bareModelTurns(ctx context.Context, url string, c int, bodies [][]byte) (*bareRun, error) {
	out := &bareRun{}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c, DisableCompression: true}}
	defer client.CloseIdleConnections()
	var errs failures
	var wg sync.WaitGroup
	t0 := time.Now()
	for g := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine [][]byte
			for i := g; i < len(bodies); i += c {
				mine = append(mine, bodies[i])
			}
			for k := 0; k+nativeModelCalls <= len(mine); k += nativeModelCalls {
				s0 := time.Now()
				for _, body := range mine[k : k+nativeModelCalls] {
					if err := bareCall(ctx, client, url, body); err != nil {
						errs.add("%v", err)
						return
					}
				}
				out.turns.since(s0)
			}
		}()
	}
	wg.Wait()
	out.span = time.Since(t0)
	if errs.n > 0 {
		return nil, fmt.Errorf("bare model calls: %s", errs.first[0])
	}
	return out, nil
}

func bareCall(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "bench-key")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || n == 0 {
		return fmt.Errorf("model call: HTTP %d, %d bytes", resp.StatusCode, n)
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// nativeAloneTurns runs c native sessions of turns turns each straight on
// a native transport against url: no actors, no store, no gate answers
// (the scenario's ls needs none). Each turn is timed from StartTurn to its
// turn_end: what the runtime's native turn would cost with the runtime
// taken away, the agent loop's own work (the answers decoded, the tool
// run, the next request built) on top of the model calls.
func nativeAloneTurns(ctx context.Context, url, dir string, c, turns int) (summary, error) {
	var lat latencies
	tr := native.New(native.WithProcessEnv(nil))
	env := []string{native.EnvAnthropicBaseURL + "=" + url, native.EnvAnthropicAPIKey + "=bench-key"}
	var errs failures
	var wg sync.WaitGroup
	for g := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cwd := filepath.Join(dir, fmt.Sprintf("alone%d", g))
			if err := os.MkdirAll(cwd, 0o700); err != nil {
				errs.add("%v", err)
				return
			}
			_ = os.WriteFile(filepath.Join(cwd, "README.md"), []byte("# bench\n"), 0o600)
			ended := make(chan messages.TurnState, 1)
			octx, cancel := opCtx(ctx)
			defer cancel()
			s, err := tr.Open(octx, transports.SessionSpec{SessionID: fmt.Sprintf("alone-%d", g), Cwd: cwd, Model: "claude-mock", Env: env},
				func(_ int, ev messages.Event) {
					if ev.Type == messages.EvTurnEnd {
						ended <- ev.State
					}
				})
			if err != nil {
				errs.add("open: %v", err)
				return
			}
			defer s.Close(context.WithoutCancel(octx))
			for t := 1; t <= turns; t++ {
				s0 := time.Now()
				if err := s.StartTurn(octx, t, fmt.Sprintf("bench turn %d", t)); err != nil {
					errs.add("turn %d: %v", t, err)
					return
				}
				select {
				case st := <-ended:
					if st != messages.TurnCompleted {
						errs.add("turn %d ended %s", t, st)
						return
					}
				case <-octx.Done():
					errs.add("turn %d: %v", t, octx.Err())
					return
				}
				lat.since(s0)
			}
		}()
	}
	wg.Wait()
	if errs.n > 0 {
		return summary{}, fmt.Errorf("the native backend alone: %s", errs.first[0])
	}
	return lat.summary(), nil
}
