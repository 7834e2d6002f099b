package actors

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// quickCapture answers BeginNow and FinishNow as the test sets it
// (diffcapture.Quick) and records every call, with the baselines it was
// handed.
type quickCapture struct {
	mu                       sync.Mutex
	beginNow, finishNow      string // "ok", "no" or "panic" ("nil": BeginNow says ok with no baseline)
	settleOwed               bool
	calls                    []string
	finishBases, prepareBase []diffcapture.Baseline
}

func (q *quickCapture) record(call string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, call)
}

func (q *quickCapture) answer(how string) bool {
	if how == "panic" {
		panic("quick capture: broken")
	}
	return how == "ok"
}

func (q *quickCapture) Begin(context.Context) (diffcapture.Baseline, error) {
	q.record("Begin")
	return "slow base", nil
}

func (q *quickCapture) Finish(_ context.Context, b diffcapture.Baseline, _ []string) messages.TurnDiff {
	q.record("Finish")
	q.mu.Lock()
	q.finishBases = append(q.finishBases, b)
	q.mu.Unlock()
	return messages.TurnDiff{Source: messages.DiffGit, Files: []messages.FileChange{}, Summary: "by Finish"}
}

func (q *quickCapture) Prepare(_ context.Context, b diffcapture.Baseline) {
	q.record("Prepare")
	q.mu.Lock()
	q.prepareBase = append(q.prepareBase, b)
	q.mu.Unlock()
}

func (q *quickCapture) Settle(context.Context) { q.record("Settle") }

func (q *quickCapture) BeginNow() (diffcapture.Baseline, bool, bool) {
	q.record("BeginNow")
	if q.beginNow == "nil" {
		return nil, q.settleOwed, true // ok, but no baseline to hand on
	}
	return "quick base", q.settleOwed, q.answer(q.beginNow)
}

func (q *quickCapture) FinishNow(b diffcapture.Baseline, _ []string) (messages.TurnDiff, bool, bool) {
	q.record("FinishNow")
	if b != "quick base" {
		panic("FinishNow was handed another baseline")
	}
	return messages.TurnDiff{Source: messages.DiffGit, Files: []messages.FileChange{}, Summary: "at once"}, q.settleOwed, q.answer(q.finishNow)
}

func (q *quickCapture) seen() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.calls...)
}

func (q *quickCapture) count(call string) int {
	n := 0
	for _, c := range q.seen() {
		if c == call {
			n++
		}
	}
	return n
}

// runQuick runs one session of two turns (the second writes a file, so a
// tool result asks for a Prepare) with q as its capture and returns both
// results.
func runQuick(t *testing.T, q *quickCapture) []messages.TurnResult {
	t.Helper()
	dir := t.TempDir()
	sc := &script.Scenario{Turns: []script.Turn{
		{Steps: []script.Step{script.Text("first")}},
		{Steps: []script.Step{script.Write(dir+"/a.txt", "a"), script.Text("second")}},
	}}
	rt := newRuntime(t, testConfig(t), sc,
		WithDiffCapture(func(string, messages.Descriptor) diffcapture.Capturer { return q }))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: dir})
	require.NoError(t, err)
	first := readKind(t, rt, "s", st.SessionID)
	_, err = rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "again"})
	require.NoError(t, err)
	second := readKind(t, rt, "s", st.SessionID)
	for _, r := range []messages.TurnResult{first, second} {
		require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
		require.NotNil(t, r.TurnDiff)
	}
	return []messages.TurnResult{first, second}
}

// A capture that can answer at once (diffcapture.Quick) is asked in the
// session's own turn of work: Begin and Finish never run, and what the
// answers left is settled by the differ afterwards.
func TestQuickCaptureAnswersWithoutTheDiffer(t *testing.T) {
	q := &quickCapture{beginNow: "ok", finishNow: "ok", settleOwed: true}
	rs := runQuick(t, q)
	for _, r := range rs {
		assert.Equal(t, "at once", r.TurnDiff.Summary)
	}
	assert.Zero(t, q.count("Begin"))
	assert.Zero(t, q.count("Finish"))
	assert.Equal(t, 2, q.count("BeginNow"))
	assert.Equal(t, 2, q.count("FinishNow"))
	require.Eventually(t, func() bool { return q.count("Settle") == 4 }, time.Minute, 10*time.Millisecond,
		"a Settle after each answer that owed one")
	// Prepare runs on a goroutine of its own, as Settle does: in no order
	// with the Settles, so it is waited for too
	require.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.prepareBase) > 0
	}, time.Minute, 10*time.Millisecond, "the tool result's Prepare ran")
	q.mu.Lock()
	assert.Equal(t, []diffcapture.Baseline{"quick base"}, q.prepareBase, "the tool result's Prepare had the turn's baseline")
	q.mu.Unlock()

	// and none when nothing is owed
	q = &quickCapture{beginNow: "ok", finishNow: "ok"}
	runQuick(t, q)
	time.Sleep(50 * time.Millisecond) // (a Settle would show here)
	assert.Zero(t, q.count("Settle"))
}

// A baseline taken at once whose diff cannot be had at once goes to the
// differ's Finish; an answer that cannot be had at all, that panics, or
// that comes with no baseline leaves the stage to Begin and Finish as if
// nothing had been asked.
func TestQuickCaptureFallsBackToTheDiffer(t *testing.T) {
	q := &quickCapture{beginNow: "ok", finishNow: "no"}
	for _, r := range runQuick(t, q) {
		assert.Equal(t, "by Finish", r.TurnDiff.Summary)
	}
	assert.Zero(t, q.count("Begin"))
	q.mu.Lock()
	assert.Equal(t, []diffcapture.Baseline{"quick base", "quick base"}, q.finishBases, "Finish diffed against the baseline taken at once")
	q.mu.Unlock()

	for _, how := range []string{"no", "panic", "nil"} {
		q = &quickCapture{beginNow: how, finishNow: "ok"}
		for _, r := range runQuick(t, q) {
			assert.Equal(t, "by Finish", r.TurnDiff.Summary, how)
			assert.Empty(t, r.TurnDiff.Warning, how)
		}
		assert.Equal(t, 2, q.count("Begin"), how)
		assert.Zero(t, q.count("FinishNow"), "%s: FinishNow is only for a baseline taken at once", how)
		q.mu.Lock()
		assert.Equal(t, []diffcapture.Baseline{"slow base", "slow base"}, q.finishBases, how)
		q.mu.Unlock()
	}

	q = &quickCapture{beginNow: "ok", finishNow: "panic"}
	for _, r := range runQuick(t, q) {
		assert.Equal(t, "by Finish", r.TurnDiff.Summary)
	}
}

// With diff capture off the core decides each turn's diff itself: the
// session starts no diff child at all (none idles for thousands of
// sessions), and its turns still come with their (empty) diff.
func TestCaptureOffStartsNoDiffChild(t *testing.T) {
	var mu sync.Mutex
	seen := map[bool]map[string]bool{} // capture on? -> the actors that got a message
	run := func(on bool, capture diffcapture.Factory) {
		sc := &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{script.Text("done")}}}}
		rt := newRuntime(t, testConfig(t), sc, WithDiffCapture(capture), withActorFault(func(_, actor string, _ any) {
			mu.Lock()
			defer mu.Unlock()
			if seen[on] == nil {
				seen[on] = map[string]bool{}
			}
			seen[on][actor] = true
		}))
		st, _ := startDiffed(t, rt)
		_, err := rt.Stop(ctxT(t), "s", messages.Stop{SessionID: st.SessionID})
		require.NoError(t, err)
	}
	run(false, diffcapture.NoopFactory)
	run(true, diffcapture.GitFactory)
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, seen[true]["diffcapture"], "with capture on, the diff child runs")
	assert.False(t, seen[false]["diffcapture"], "with capture off, no diff child")
	assert.True(t, seen[false]["persist"] && seen[false]["transport"], "%v", seen[false])
}

// startDiffed starts a session (scope "s") in a directory of its own and
// reads its first turn, which completes with a diff.
func startDiffed(t *testing.T, rt *Runtime) (messages.StartResult, messages.TurnResult) {
	t.Helper()
	st, err := rt.Start(ctxT(t), "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	r := readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	require.NotNil(t, r.TurnDiff)
	return st, r
}
