package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
)

// SuiteFirstTurn times what a user of claude-code waits for against the
// bare CLI, interleaved, against one modelmock: start to the first turn's
// end (with the warm pool, and without it), a later turn with git diff
// capture on, and a turn that asks permission. It is not in Suites() (it
// needs the real claude CLI and takes minutes): run it by name.
const SuiteFirstTurn = "firstturn"

// DefaultFirstTurnRounds is how many times each figure of the firstturn
// suite is measured on each side.
const DefaultFirstTurnRounds = 5

func init() { suiteFuncs[SuiteFirstTurn] = runFirstTurn }

// claudeSkip says why the pinned claude cannot run here ("" when it can).
func claudeSkip(ctx context.Context, bin string) string {
	if bin == "" {
		return "CODESESSION_CLAUDE_BIN is not set (it names the pinned claude " + claudecode.PinnedVersion + " binary)"
	}
	vctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(vctx, bin, "--version").Output()
	if err != nil {
		return fmt.Sprintf("%s --version failed: %v", bin, err)
	}
	if v := strings.TrimSpace(string(out)); !strings.HasPrefix(v, claudecode.PinnedVersion+" ") && v != claudecode.PinnedVersion {
		return fmt.Sprintf("%s is %q, not the pinned %s", bin, v, claudecode.PinnedVersion)
	}
	return ""
}

func runFirstTurn(ctx context.Context, o Options, dir string) (*Result, error) {
	rounds := o.FirstTurnRounds
	if rounds <= 0 {
		rounds = DefaultFirstTurnRounds
	}
	p := newProgress(o, SuiteFirstTurn)
	res := &Result{Suite: SuiteFirstTurn, Params: fmt.Sprintf("claude-code through the runtime vs the bare claude CLI, %d rounds each, interleaved, against one modelmock", rounds)}
	if why := claudeSkip(ctx, o.ClaudeBin); why != "" {
		res.Skipped = why
		return res, nil
	}
	mock, err := modelmock.Start(nil, modelmock.Reference())
	if err != nil {
		return nil, err
	}
	defer mock.Close()
	cwd := filepath.Join(dir, "work")
	repo, err := generateRepo(ctx, cwd, 1) // a one-file repository: diff capture on
	if err != nil {
		return nil, err
	}
	_ = repo
	env := map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-bench", "HOME": filepath.Join(dir, "claude-home")}
	ft := &firstTurn{o: o, p: p, res: res, bin: o.ClaudeBin, cwd: cwd, env: env, dir: dir, rounds: rounds}
	for _, step := range []func(context.Context) error{ft.firstTurns, ft.laterTurns} {
		if err := step(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res.check("ran", false, "%v", err)
			return res, nil
		}
	}
	res.note("a runtime start is start op to the first read-turn's turn_complete; a bare one is the user message written to a claude process already started and initialized, to its result line")
	res.note("with the pool, each round times two starts: one when the pool is ready (the refill of the previous start is waited for, untimed, until it has answered initialize and settled after the work the CLI does on its own for about 2 s after that), and one as soon as the refill has answered initialize; without the pool, the start boots the CLI")
	res.note("the hops of a later or a permission turn are the driver's clocks against the times the session stamped on its events (turn_started, the clarification, turn_end): the runtime's own work and durable writes, not the CLI's")
	res.note("capture by hand: a second bare CLI in a repository of its own, with the project's git capture run around and beside its turns as the session's differ runs it (Begin, Prepare after the tool result, Finish after the result line, timed; Settle after, untimed), to tell what the runtime adds from what capture costs on this machine")
	res.note("CPU of this process: getrusage around each timed turn; on both sides it holds modelmock's and the driver's work, on the runtime's side also the runtime's own (its hops, parsing, durable writes): the difference is what the runtime costs the cores the CLI runs on")
	res.note("runtime later turns are guide to read-turn with git diff capture on (a one-file repository); permission turns answer the can_use_tool clarification allow_once through the runtime, and by hand on the bare CLI")
	return res, nil
}

type firstTurn struct {
	o        Options
	p        *progress
	res      *Result
	bin, cwd string
	dir      string
	env      map[string]string
	rounds   int
	settles  settleCount // of the runtimes' git captures
}

// runtime opens a runtime whose only backend is claude-code with a warm
// pool of pool processes, diff capture on or off.
func (f *firstTurn) runtime(name string, pool int, diff bool) (*benchRuntime, *claudecode.Transport, error) {
	tr := claudecode.New(claudecode.WithBinary(f.bin), claudecode.WithWarmPool(pool))
	var extra []actors.Option
	if diff {
		extra = append(extra, actors.WithDiffCapture(func(cwd string, _ messages.Descriptor) diffcapture.Capturer {
			return &countedGit{Git: diffcapture.NewGit(cwd), settles: &f.settles}
		}))
	}
	// each runtime's CLIs keep their state in a HOME of their own, as the
	// bare CLI does: the CLI's per-turn work grows with what its HOME holds
	env := maps.Clone(f.env)
	env["HOME"] = filepath.Join(f.dir, name+"-home")
	if err := os.MkdirAll(env["HOME"], 0o700); err != nil {
		return nil, nil, err
	}
	b, err := openRuntime(f.o, filepath.Join(f.dir, name), transports.NewRegistry(tr), env, extra...)
	return b, tr, err
}

// startToFirstTurn starts a session and reads its first turn.
func startToFirstTurn(ctx context.Context, b *benchRuntime, cwd, brief string) (string, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	st, err := b.rt.Start(octx, scope, messages.Start{Brief: brief, Cwd: cwd, Model: "claude-mock-1"})
	if err != nil {
		return "", err
	}
	r, err := b.rt.ReadTurn(octx, scope, messages.ReadTurn{SessionID: st.SessionID})
	if err == nil {
		err = expectKind(r, messages.KindTurnComplete)
	}
	return st.SessionID, err
}

func (f *firstTurn) firstTurns(ctx context.Context) error {
	pooled, tr, err := f.runtime("pooled", 1, false)
	if err != nil {
		return err
	}
	defer pooled.close()
	cold, _, err := f.runtime("cold", 0, false)
	if err != nil {
		return err
	}
	defer cold.close()
	// the first start of a key is cold: it fills the pool
	f.p.printf("first turns: filling the pool")
	sid, err := startToFirstTurn(ctx, pooled, f.cwd, "warm up")
	if err != nil {
		return fmt.Errorf("warm-up start: %w", err)
	}
	stop(ctx, pooled, sid)
	var withPool, unsettled, withoutPool, bare latencies
	var misses, early int
	// timedStart times one start to its first turn into l, then stops it
	timedStart := func(b *benchRuntime, brief string, l *latencies) error {
		t0 := time.Now()
		sid, err := startToFirstTurn(ctx, b, f.cwd, brief)
		if err != nil {
			return fmt.Errorf("%s: %w", brief, err)
		}
		l.since(t0)
		stop(ctx, b, sid)
		return nil
	}
	for i := range f.rounds {
		f.p.printf("first turns: round %d of %d", i+1, f.rounds)
		if err := waitFor(ctx, 3*time.Minute, func() bool { return tr.WarmReady() > 0 }); err != nil {
			misses++
		}
		if err := timedStart(pooled, fmt.Sprintf("pooled %d", i), &withPool); err != nil {
			return err
		}
		if err := timedStart(cold, fmt.Sprintf("cold %d", i), &withoutPool); err != nil {
			return err
		}

		cli, err := startBareClaude(ctx, f.bin, f.cwd, f.env, filepath.Join(f.dir, "bare-home"), false)
		if err != nil {
			return err
		}
		d, err := cli.turn(ctx, fmt.Sprintf("bare %d", i))
		cli.close()
		if err != nil {
			return fmt.Errorf("bare first turn %d: %w", i, err)
		}
		bare.add(d)

		// a start that comes as soon as the refill of the last one
		// answered initialize, before it settled: what a start gets in
		// the seconds after the pool's previous start
		if err := waitFor(ctx, 3*time.Minute, func() bool { return tr.WarmBooted() > 0 }); err != nil {
			misses++
		}
		if tr.WarmReady() == 0 {
			early++
		}
		if err := timedStart(pooled, fmt.Sprintf("pooled before the pool settled %d", i), &unsettled); err != nil {
			return err
		}
	}
	f.res.check("pool ready for every timed start", misses == 0, "%d of %d timed starts found the pool still empty after 3 minutes", misses, 2*f.rounds)
	w, c, b := withPool.summary(), withoutPool.summary(), bare.summary()
	f.res.vs("start to first turn, warm pool, p50", ms(w.p50), UnitMs, "bare pre-started CLI first turn p50", ms(b.p50))
	f.res.vs("start to first turn, warm pool not settled yet, p50", ms(unsettled.summary().p50), UnitMs, "bare pre-started CLI first turn p50", ms(b.p50))
	f.res.note("a start before the pool settled: the timed start came as soon as the pool held a refill that had answered initialize, %d of %d times before it had settled", early, f.rounds)
	f.res.vs("start to first turn, no pool, p50", ms(c.p50), UnitMs, "bare pre-started CLI first turn p50", ms(b.p50))
	f.res.vs("start to first turn, warm pool, max", ms(w.mx), UnitMs, "bare pre-started CLI first turn max", ms(b.mx))
	return nil
}

// laterLanes is how many CLI processes each side of the later and
// permission turns runs: round i uses lane i mod laterLanes on every side.
// Two processes of the same CLI, started and driven the same way, do not
// run at the same speed (each has its own heap and compiled code): with one
// process a side, runs of the same code put the runtime's later turn at
// 0.87x to 1.17x the bare CLI's, so a figure said more about which process
// was the quicker than about the runtime. Spread over lanes, each side's
// p50 is that of several processes.
const laterLanes = 3

// laterLane is one process of each side, each in a repository of its own:
// a file another side wrote between two turns would be a change in the
// work tree, which the next capture must look at with git (one add at
// Begin), and not what these rounds measure.
type laterLane struct {
	cwd, ndCwd, bareCwd, capCwd string
	sid, sidND                  string // the runtime's sessions, capture on and off
	cli                         *bareClaude
	capCli                      *capturedBare // a bare CLI with the capture done by hand beside it
}

// startLanes starts laterLanes lanes (no more than there are rounds): on b
// (capture on), on nodiff, and bare, each past a warm-up turn. The bare
// CLIs of a kind share a HOME, as a runtime's sessions do.
func (f *firstTurn) startLanes(ctx context.Context, b, nodiff *benchRuntime) ([]*laterLane, func(), error) {
	var lanes []*laterLane
	closeAll := func() {
		for _, l := range lanes {
			if l.sid != "" {
				stop(ctx, b, l.sid)
			}
			if l.sidND != "" {
				stop(ctx, nodiff, l.sidND)
			}
			if l.cli != nil {
				l.cli.close()
			}
			if l.capCli != nil {
				l.capCli.close()
			}
		}
	}
	for j := range min(laterLanes, f.rounds) {
		l := &laterLane{}
		lanes = append(lanes, l)
		dir := func(kind string) string { return filepath.Join(f.dir, fmt.Sprintf("%s-%d", kind, j)) }
		l.cwd, l.ndCwd, l.bareCwd, l.capCwd = dir("work-later"), dir("work-nodiff"), dir("work-bare"), dir("work-bare-capture")
		for _, d := range []string{l.cwd, l.ndCwd, l.bareCwd, l.capCwd} {
			if _, err := generateRepo(ctx, d, 1); err != nil {
				return lanes, closeAll, err
			}
		}
		var err error
		if l.sid, err = startToFirstTurn(ctx, b, l.cwd, "warm up"); err != nil {
			return lanes, closeAll, fmt.Errorf("start: %w", err)
		}
		if l.sidND, err = startToFirstTurn(ctx, nodiff, l.ndCwd, "warm up"); err != nil {
			return lanes, closeAll, fmt.Errorf("start: %w", err)
		}
		if l.cli, err = startBareClaude(ctx, f.bin, l.bareCwd, f.env, filepath.Join(f.dir, "bare-home"), true); err != nil {
			return lanes, closeAll, err
		}
		if _, err := l.cli.turn(ctx, "warm up"); err != nil {
			return lanes, closeAll, fmt.Errorf("bare warm-up turn: %w", err)
		}
		capBare, err := startBareClaude(ctx, f.bin, l.capCwd, f.env, filepath.Join(f.dir, "bare-capture-home"), true)
		if err != nil {
			return lanes, closeAll, err
		}
		l.capCli = &capturedBare{bareClaude: capBare, git: diffcapture.NewGit(l.capCwd)}
		if _, _, err := l.capCli.turn(ctx, "warm up"); err != nil {
			return lanes, closeAll, fmt.Errorf("bare warm-up turn with capture: %w", err)
		}
	}
	return lanes, closeAll, nil
}

func (f *firstTurn) laterTurns(ctx context.Context) error {
	b, _, err := f.runtime("later", 0, true)
	if err != nil {
		return err
	}
	defer b.close()
	// the same turns without diff capture, to tell its share
	nodiff, _, err := f.runtime("later-nodiff", 0, false)
	if err != nil {
		return err
	}
	defer nodiff.close()
	lanes, closeLanes, err := f.startLanes(ctx, b, nodiff)
	defer closeLanes()
	if err != nil {
		return err
	}
	f.res.note("later and permission turns: each side runs %d CLI processes (sessions, or bare CLIs), each in a one-file repository of its own; round i uses process i mod %d on every side, so a side's p50 is that of several processes, not of the one that happened to be quicker", len(lanes), len(lanes))
	var later, laterND, bareLater, perm, permND, barePerm, barePermCap latencies
	var hops, hopsND, laterHops, laterHopsND turnHops
	// this process's CPU through each turn: modelmock's and the driver's
	// on both sides, the runtime's own on its side only
	var cpuND, cpuBare latencies
	diffs, capDiffs := 0, 0
	turns, noisy := 0, 0
	for i := range f.rounds {
		f.p.printf("later and permission turns: round %d of %d", i+1, f.rounds)
		l := lanes[i%len(lanes)]
		// the sides of each kind of turn, in an order that rotates
		// from round to round: whichever goes first in a round follows
		// the previous round's last turn, whose process may still be busy
		// after its result line
		laterSteps := []func(octx context.Context) error{
			func(octx context.Context) error {
				t0 := time.Now()
				r, err := guideAndRead(octx, b, l.sid, fmt.Sprintf("later %d", i), messages.KindTurnComplete)
				if err != nil {
					return fmt.Errorf("later turn %d: %w", i, err)
				}
				later.since(t0)
				laterHops.turns = append(laterHops.turns, turnTimes{sid: l.sid, guided: t0, done: time.Now()})
				if r.TurnDiff != nil && r.TurnDiff.Source == messages.DiffGit {
					diffs++
				}
				return nil
			},
			func(octx context.Context) error {
				t0 := time.Now()
				if _, err := guideAndRead(octx, nodiff, l.sidND, fmt.Sprintf("later %d", i), messages.KindTurnComplete); err != nil {
					return fmt.Errorf("later turn without diff capture %d: %w", i, err)
				}
				laterND.since(t0)
				laterHopsND.turns = append(laterHopsND.turns, turnTimes{sid: l.sidND, guided: t0, done: time.Now()})
				return nil
			},
			func(octx context.Context) error {
				d, err := l.cli.turn(octx, fmt.Sprintf("bare later %d", i))
				if err != nil {
					return fmt.Errorf("bare later turn %d: %w", i, err)
				}
				bareLater.add(d)
				return nil
			},
		}
		// a permission turn: the agent writes a file, the runtime asks;
		// once with diff capture (the turn's diff has the file) and once
		// without, to tell capture's share from the question's round trip;
		// the bare CLI answers by hand, once plain and once with the same
		// capture run beside it by hand (what capture costs without the
		// runtime)
		permSteps := []func(octx context.Context) error{
			func(octx context.Context) error {
				dp, err := permissionTurn(octx, b, l.sid, filepath.Join(l.cwd, fmt.Sprintf("perm-%d.txt", i)), &hops)
				if err != nil {
					return fmt.Errorf("permission turn %d: %w", i, err)
				}
				perm.add(dp)
				return nil
			},
			func(octx context.Context) error {
				c0 := processCPU()
				dp, err := permissionTurn(octx, nodiff, l.sidND, filepath.Join(l.ndCwd, fmt.Sprintf("perm-nd-%d.txt", i)), &hopsND)
				if err != nil {
					return fmt.Errorf("permission turn without diff capture %d: %w", i, err)
				}
				cpuND.add(processCPU() - c0)
				permND.add(dp)
				return nil
			},
			func(octx context.Context) error {
				c0 := processCPU()
				d, err := l.cli.turn(octx, "TOOL:WRITE "+filepath.Join(l.bareCwd, fmt.Sprintf("bare-perm-%d.txt", i))+" bare")
				if err != nil {
					return fmt.Errorf("bare permission turn %d: %w", i, err)
				}
				cpuBare.add(processCPU() - c0)
				barePerm.add(d)
				return nil
			},
			func(octx context.Context) error {
				d, diff, err := l.capCli.turn(octx, "TOOL:WRITE "+filepath.Join(l.capCwd, fmt.Sprintf("bare-perm-%d.txt", i))+" bare")
				if err != nil {
					return fmt.Errorf("bare permission turn with capture %d: %w", i, err)
				}
				if diff.Source == messages.DiffGit && len(diff.Files) == 1 {
					capDiffs++
				}
				barePermCap.add(d)
				return nil
			},
		}
		for _, steps := range [][]func(context.Context) error{laterSteps, permSteps} {
			for k := range steps {
				// every timed turn starts on a quiet machine: no CLI
				// still at work after its last turn (quiet.go)
				turns++
				if !waitChildrenQuiet(ctx, quietFor, quietMax) {
					noisy++
				}
				// each turn's ops bounded on their own: one bound for
				// every round ran out in a long run (90 rounds)
				octx, cancel := opCtx(ctx)
				err := steps[(i+k)%len(steps)](octx)
				cancel()
				if err != nil {
					return err
				}
				// what a side's capture does after its answer (Settle:
				// a write-tree, the witness's add) is its own work, not
				// the next side's: untimed, wait it out before the next
				// turn is timed, on the runtime's side and by hand
				if err := waitFor(ctx, 3*time.Minute, f.settles.quiet); err != nil {
					return fmt.Errorf("the runtime's capture did not settle: %w", err)
				}
				l.capCli.settling.Wait()
			}
		}
	}
	f.res.note("each later and permission turn was timed once the CPU time of this process's children (every CLI, and what they run) had stood still for %v (at most %d clock ticks); %d of %d turns were timed without that, after waiting %v", quietFor, quietTicks, noisy, turns, quietMax)
	f.res.check("later turns diffed by git", diffs == f.rounds, "%d of %d later turns came with a git diff", diffs, f.rounds)
	asked, capAsked := 0, 0
	for _, l := range lanes {
		asked += l.cli.asked
		capAsked += l.capCli.asked
	}
	f.res.check("bare permission turns asked", asked == f.rounds && capAsked == f.rounds, "the bare CLIs, without and with capture by hand, asked can_use_tool %d and %d times in %d permission turns each", asked, capAsked, f.rounds)
	f.res.check("bare permission turns with capture diffed", capDiffs == f.rounds, "%d of %d came with a git diff of the one file written", capDiffs, f.rounds)
	l, nd, bl, pm, bp := later.summary(), laterND.summary(), bareLater.summary(), perm.summary(), barePerm.summary()
	f.res.vs("later turn, diff capture on, p50", ms(l.p50), UnitMs, "bare CLI turn p50", ms(bl.p50))
	f.res.vs("later turn, diff capture off, p50", ms(nd.p50), UnitMs, "bare CLI turn p50", ms(bl.p50))
	f.res.vs("permission turn, diff capture on, p50", ms(pm.p50), UnitMs, "bare CLI answering can_use_tool by hand p50", ms(bp.p50))
	f.res.vs("permission turn, diff capture off, p50", ms(permND.summary().p50), UnitMs, "bare CLI answering can_use_tool by hand p50", ms(bp.p50))
	// capture's own share: the same git work beside the bare CLI
	bc := barePermCap.summary()
	f.res.vs("permission turn, diff capture on, vs capture by hand, p50", ms(pm.p50), UnitMs, "bare CLI with the same capture by hand p50", ms(bc.p50))
	f.res.vs("bare CLI permission turn with capture by hand, p50", ms(bc.p50), UnitMs, "bare CLI answering can_use_tool by hand p50", ms(bp.p50))
	// the same, paired within each round
	for _, p := range []struct {
		figure string
		a, b   *latencies
	}{
		{"later turn, diff capture on, vs the bare CLI turn of the same round", &later, &bareLater},
		{"later turn, diff capture off, vs the bare CLI turn of the same round", &laterND, &bareLater},
		{"permission turn, diff capture on, vs the bare CLI turn of the same round", &perm, &barePerm},
		{"permission turn, diff capture off, vs the bare CLI turn of the same round", &permND, &barePerm},
		{"permission turn, diff capture on, vs capture by hand in the same round", &perm, &barePermCap},
	} {
		f.res.row(p.figure+", median of the rounds' ratios", pairedRatio(p.a, p.b), UnitRatio)
	}
	f.res.vs("CPU of this process through a permission turn, capture off, p50", ms(cpuND.summary().p50), UnitMs,
		"through the bare CLI's permission turn p50", ms(cpuBare.summary().p50))
	for _, h := range []struct {
		hops  *turnHops
		b     *benchRuntime
		label string
		bare  *latencies
	}{
		{&laterHopsND, nodiff, "later turn, capture off", &bareLater},
		{&laterHops, b, "later turn, capture on", &bareLater},
		{&hopsND, nodiff, "permission turn, capture off", nil},
		{&hops, b, "permission turn, capture on", nil},
	} {
		if err := h.hops.report(ctx, f.res, h.b, h.label, h.bare); err != nil {
			return err
		}
	}
	return nil
}

// permissionTurn has the agent write target, answers the runtime's
// clarification allow_once, and reads the turn to its end. With hops, it
// records when the driver had the question and the result.
func permissionTurn(ctx context.Context, b *benchRuntime, sid, target string, hops *turnHops) (time.Duration, error) {
	t0 := time.Now()
	r, err := guideAndRead(ctx, b, sid, "TOOL:WRITE "+target+" runtime", messages.KindClarification)
	if err != nil {
		return 0, err
	}
	asked := time.Now()
	if _, err := b.rt.Answer(ctx, scope, messages.Answer{SessionID: sid, ClarificationID: r.ClarificationID, Decision: messages.DecisionAllowOnce}); err != nil {
		return 0, fmt.Errorf("answer: %w", err)
	}
	r, err = b.rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	if err == nil {
		err = expectKind(r, messages.KindTurnComplete)
	}
	if hops != nil {
		hops.turns = append(hops.turns, turnTimes{sid: sid, guided: t0, asked: asked, done: time.Now()})
	}
	return time.Since(t0), err
}

// turnHops times the runtime's own part of turns: the driver's clocks
// (guide sent, question read, result read) against the times the session
// stamped on the events (the turn handed to the transport, the CLI's
// question and its result line taken in). What lies between is the
// runtime's hops and its durable writes, never the CLI's own time. A turn
// that asks nothing (asked zero) has no question hop.
type turnHops struct {
	turns []turnTimes
}

// turnTimes is one turn of session sid, by the driver's clocks.
type turnTimes struct {
	sid                 string
	guided, asked, done time.Time
}

// report adds the p50 of each hop of the turns and, with bare, the p50 of
// what lies between the hops against bare's.
func (h *turnHops) report(ctx context.Context, res *Result, b *benchRuntime, label string, bare *latencies) error {
	logs := map[string][]messages.PersistedEvent{}
	var start, question, result, cli latencies
	questions := 0
	for _, pt := range h.turns {
		evs, ok := logs[pt.sid]
		if !ok {
			var err error
			if evs, err = b.rt.Store().ReadEvents(ctx, pt.sid, 0, 0); err != nil {
				return err
			}
			logs[pt.sid] = evs
		}
		var started, clar, ended time.Time
		for _, e := range evs {
			if e.At.Before(pt.guided) || e.At.After(pt.done) {
				continue
			}
			switch {
			case e.Event.Type == messages.EvTurnStarted && started.IsZero():
				started = e.At
			case e.Event.Type == messages.EvClarification && e.Event.Decision == "" && clar.IsZero():
				clar = e.At
			case e.Event.Type == messages.EvTurnEnd:
				ended = e.At
			}
		}
		asks := !pt.asked.IsZero()
		if started.IsZero() || clar.IsZero() == asks || ended.IsZero() {
			return fmt.Errorf("%s: a turn's events are missing from the log", label)
		}
		start.add(started.Sub(pt.guided))
		if asks {
			question.add(pt.asked.Sub(clar))
			questions++
		}
		result.add(pt.done.Sub(ended))
		cli.add(ended.Sub(started))
	}
	res.row(label+": guide op to the turn handed to the CLI, p50", ms(start.summary().p50), UnitMs)
	if questions > 0 {
		res.row(label+": the CLI's question taken in to the driver reading it, p50", ms(question.summary().p50), UnitMs)
	}
	res.row(label+": the CLI's result taken in to the driver reading the turn, p50", ms(result.summary().p50), UnitMs)
	if bare != nil {
		// what is left of the turn: the CLI's own time, with the pipes
		// to and from it; against the bare CLI's turn, it shows whether
		// the runtime slows the CLI down (its CPU, or capture's, taken
		// from the cores the CLI runs on) beside its own hops
		res.vs(label+": the turn handed to the CLI to its result taken in, p50", ms(cli.summary().p50), UnitMs, "bare CLI turn p50", ms(bare.summary().p50))
	}
	return nil
}

// guideAndRead queues text as the next turn and reads its result, which
// must be of kind want.
func guideAndRead(ctx context.Context, b *benchRuntime, sid, text string, want messages.TurnKind) (messages.TurnResult, error) {
	if _, err := b.rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: text}); err != nil {
		return messages.TurnResult{}, err
	}
	r, err := b.rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	if err == nil {
		err = expectKind(r, want)
	}
	return r, err
}

func stop(ctx context.Context, b *benchRuntime, sid string) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	_, _ = b.rt.Stop(octx, scope, messages.Stop{SessionID: sid})
}

// waitFor polls cond until it holds or d passes.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// bareClaude is one claude process driven by hand the way the SDK does:
// started and initialized before anything is timed; permission questions
// (with the stdio prompt tool) answered allow at once.
type bareClaude struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	sc     *bufio.Scanner
	asked  int
	cancel context.CancelFunc
	// toolRan, when set, is called on the reading goroutine for each
	// user line carrying a tool's result (it must not block)
	toolRan func()
}

func startBareClaude(ctx context.Context, bin, cwd string, env map[string]string, home string, promptTool bool) (*bareClaude, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	// the process lives until close or the run's end: a fixed bound
	// here would kill it in the middle of a long run
	ctx, cancel := context.WithCancel(ctx)
	args := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--include-partial-messages", "--permission-mode", "default", "--model", "claude-mock-1"}
	if promptTool {
		args = append(args, "--permission-prompt-tool", "stdio")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = cwd
	// the CLI and whatever it starts are one process group, killed
	// together when ctx ends: a tool's process left behind holding the
	// stdout pipe would keep a read waiting after the CLI is gone
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_SDK_READS_SESSION_STATE=1")
	if os.Geteuid() == 0 {
		cmd.Env = append(cmd.Env, "IS_SANDBOX=1")
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "HOME="+home)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	c := &bareClaude{cmd: cmd, stdin: stdin, stdout: stdout, sc: bufio.NewScanner(stdout), cancel: cancel}
	c.sc.Buffer(make([]byte, 1<<20), 16<<20)
	if err := c.write(map[string]any{"type": "control_request", "request_id": "init", "request": map[string]any{"subtype": "initialize", "hooks": nil}}); err != nil {
		c.close()
		return nil, err
	}
	octx, ocancel := opCtx(ctx)
	defer ocancel()
	if err := c.until(octx, func(typ string, line []byte) bool { return typ == "control_response" }); err != nil {
		c.close()
		return nil, fmt.Errorf("bare claude initialize: %w", err)
	}
	return c, nil
}

func (c *bareClaude) write(v any) error {
	b, _ := json.Marshal(v)
	_, err := c.stdin.Write(append(b, '\n'))
	return err
}

// until reads lines until done says so, answering can_use_tool allow.
// When ctx ends first the CLI is killed (a bare CLI that stalls is a
// failed run, never a hung one) and the error says what it read last.
func (c *bareClaude) until(ctx context.Context, done func(typ string, line []byte) bool) error {
	stop := context.AfterFunc(ctx, func() {
		c.cancel()           // kills the process group
		_ = c.stdout.Close() // and ends the read even if something holds the pipe
	})
	defer stop()
	// the last line's head, for the error: copied into one buffer, so
	// the timed reads allocate nothing for it
	var last []byte
	for c.sc.Scan() {
		last = append(last[:0], c.sc.Bytes()[:min(len(c.sc.Bytes()), lastLineHead)]...)
		var head struct {
			Type      string `json:"type"`
			IsError   bool   `json:"is_error"`
			RequestID string `json:"request_id"`
			Request   struct {
				Subtype string          `json:"subtype"`
				Input   json.RawMessage `json:"input"`
			} `json:"request"`
		}
		if json.Unmarshal(c.sc.Bytes(), &head) != nil {
			continue
		}
		if head.Type == "control_request" && head.Request.Subtype == "can_use_tool" {
			c.asked++
			if err := c.write(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": head.RequestID,
				"response": map[string]any{"behavior": "allow", "updatedInput": head.Request.Input}}}); err != nil {
				return err
			}
			continue
		}
		if c.toolRan != nil && head.Type == "user" && bytes.Contains(c.sc.Bytes(), []byte(`"tool_result"`)) {
			c.toolRan()
		}
		if head.Type == "result" && head.IsError {
			return fmt.Errorf("an error result")
		}
		if done(head.Type, c.sc.Bytes()) {
			return nil
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("the CLI gave no answer in time (%w); its last line: %s", ctx.Err(), last)
	}
	if err := c.sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("the CLI exited; its last line: %s", last)
}

// lastLineHead is how much of the last line read an error of until shows.
const lastLineHead = 300

// turn writes a user message and times it to its result line.
// A turn that gets no result within the op timeout fails (until).
func (c *bareClaude) turn(ctx context.Context, text string) (time.Duration, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	t0 := time.Now()
	if err := c.write(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}, "parent_tool_use_id": nil, "session_id": ""}); err != nil {
		return 0, err
	}
	err := c.until(ctx, func(typ string, _ []byte) bool { return typ == "result" })
	return time.Since(t0), err
}

// capturedBare is the bare CLI with git diff capture done by hand, as a
// host driving the CLI itself would do it with this project's capture. It
// is the control for the runtime's permission turn with capture on: on
// both sides the git of capture competes with the CLI for the same cores.
type capturedBare struct {
	*bareClaude
	git      *diffcapture.Git
	settling sync.WaitGroup
}

// turn is timed to the diff's end, as a runtime turn's result comes with
// its diff: Begin before the user message, Prepare beside the turn once a
// tool ran, Finish after the result line (each of Begin and Finish asked
// at once first, BeginNow and FinishNow, as the session asks them); then
// Settle, untimed, beside whatever comes next (the capture serializes it
// with the next Begin), as the session's differ does.
func (c *capturedBare) turn(ctx context.Context, text string) (time.Duration, messages.TurnDiff, error) {
	t0 := time.Now()
	// at once when the capture can answer so, as the session asks
	base, _, ok := c.git.BeginNow()
	if !ok {
		var err error
		if base, err = c.git.Begin(ctx); err != nil {
			return 0, messages.TurnDiff{}, err
		}
	}
	var preparing sync.WaitGroup
	var busy atomic.Bool
	c.toolRan = func() {
		// one at a time, never holding up the CLI's output (the differ
		// runs a Prepare asked for meanwhile after; these turns run one tool)
		if busy.CompareAndSwap(false, true) {
			preparing.Go(func() { c.git.Prepare(ctx, base); busy.Store(false) })
		}
	}
	defer func() { c.toolRan = nil }()
	if err := c.write(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}, "parent_tool_use_id": nil, "session_id": ""}); err != nil {
		return 0, messages.TurnDiff{}, err
	}
	rctx, cancel := opCtx(ctx)
	defer cancel()
	if err := c.until(rctx, func(typ string, _ []byte) bool { return typ == "result" }); err != nil {
		preparing.Wait()
		return 0, messages.TurnDiff{}, err
	}
	diff, _, ok := c.git.FinishNow(base, nil)
	if !ok {
		diff = c.git.Finish(ctx, base, nil)
	}
	d := time.Since(t0)
	preparing.Wait()
	c.settling.Go(func() { c.git.Settle(ctx) })
	return d, diff, nil
}

func (c *capturedBare) close() {
	c.settling.Wait()
	_ = c.git.Close()
	c.bareClaude.close()
}

func (c *bareClaude) close() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cancel() // kills its process group
		<-done
	}
	c.cancel()
}

// countedGit is the runtime's git capture, counting its Finishes and the
// Settles after them (and Prepares running), so the rounds can wait out
// what one side's capture does after its answer before the next side's
// turn is timed.
type countedGit struct {
	*diffcapture.Git
	settles *settleCount
}

func (g *countedGit) Finish(ctx context.Context, b diffcapture.Baseline, editPaths []string) messages.TurnDiff {
	d := g.Git.Finish(ctx, b, editPaths)
	g.settles.finished()
	return d
}

// FinishNow's answer is followed by a Settle only when it owes one.
func (g *countedGit) FinishNow(b diffcapture.Baseline, editPaths []string) (messages.TurnDiff, bool, bool) {
	d, settle, ok := g.Git.FinishNow(b, editPaths)
	if ok && settle {
		g.settles.finished()
	}
	return d, settle, ok
}

// Prepare counts as running too: one asked for late in a turn can
// outlast its Finish.
func (g *countedGit) Prepare(ctx context.Context, b diffcapture.Baseline) {
	g.settles.begin()
	defer g.settles.end(0)
	g.Git.Prepare(ctx, b)
}

func (g *countedGit) Settle(ctx context.Context) {
	after := g.settles.begin()
	defer g.settles.end(after)
	g.Git.Settle(ctx)
}

// settleCount says whether every Finish has had the Settle the session's
// differ runs after its answer, and no Settle or Prepare is running. Its
// counts are shared by the runtime's sessions: they hold while one session
// with capture runs turns at a time, as the rounds do.
type settleCount struct {
	mu       sync.Mutex
	finishes int // Finishes returned
	settled  int // the Finishes a Settle that ended had seen return
	running  int
}

func (s *settleCount) finished() {
	s.mu.Lock()
	s.finishes++
	s.mu.Unlock()
}

func (s *settleCount) begin() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running++
	return s.finishes
}

func (s *settleCount) end(after int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.settled = max(s.settled, after)
}

func (s *settleCount) quiet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running == 0 && s.settled >= s.finishes
}
