package diffcapture_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// gitRepo makes dir a repository with one commit (the package's TestMain
// has pointed HOME at a temporary directory).
func gitRepo(t *testing.T) string {
	t.Helper()
	subprocesstest.Git(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n"), 0o644))
	for _, args := range [][]string{
		{"init", "-q"}, {"config", "user.name", "E2E"}, {"config", "user.email", "e2e@test.invalid"},
		{"add", "-A"}, {"commit", "-q", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	return dir
}

func runtimeFor(t *testing.T, sc *script.Scenario, opts ...actors.Option) *actors.Runtime {
	t.Helper()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = "script"
	cfg.Supervision.ShutdownTimeout = config.Duration(5 * time.Second)
	opts = append([]actors.Option{actors.WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc))))}, opts...)
	rt, err := actors.New(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only stops a hang
		defer cancel()
		_ = rt.Close(ctx)
	})
	return rt
}

// ctxFor bounds a test's ops; it only stops a hang.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// The runtime's default capture is git: a scripted turn that writes a file
// in a work tree reports it as added, with its diff on request; the next
// turn shows only its own change to that (now untracked, dirty) file.
func TestRuntimeDefaultCaptureIsGit(t *testing.T) {
	repo := gitRepo(t)
	sc := &script.Scenario{Turns: []script.Turn{
		{Steps: []script.Step{script.Write("hello.txt", "hi\n"), script.Text("wrote it")}},
		{Steps: []script.Step{script.Edit("hello.txt", "hi\n", "hi\nthere\n"), script.Text("edited it")}},
	}}
	rt := runtimeFor(t, sc)
	ctx := ctxFor(t)
	const scope = "e2e"
	st, err := rt.Start(ctx, scope, messages.Start{Brief: "write hello", Cwd: repo, MaxPosture: messages.PostureAcceptEdits})
	require.NoError(t, err)

	r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID, IncludeDiff: true})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	require.NotNil(t, r.TurnDiff)
	assert.Equal(t, messages.DiffGit, r.TurnDiff.Source)
	assert.Empty(t, r.TurnDiff.Warning)
	assert.Equal(t, []messages.FileChange{{Path: "hello.txt", Status: "A", Insertions: 1}}, r.TurnDiff.Files)
	assert.Equal(t, "1 file changed, 1 insertion(+)", r.TurnDiff.Summary)
	assert.Contains(t, r.TurnDiff.UnifiedDiff, "+++ b/hello.txt\n@@ -0,0 +1 @@\n+hi\n")

	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: st.SessionID, Text: "edit it"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	require.NotNil(t, r.TurnDiff)
	assert.Equal(t, []messages.FileChange{{Path: "hello.txt", Status: "M", Insertions: 1}}, r.TurnDiff.Files,
		"turn 2 shows its own change, not the file turn 1 added")
	assert.Empty(t, r.TurnDiff.UnifiedDiff, "no diff unless asked for")

	evs, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
	require.NoError(t, err)
	var diffs []*messages.TurnDiff
	for _, ev := range evs {
		if ev.Event.Type == messages.EvTurnDiff {
			diffs = append(diffs, ev.Event.Diff)
		}
	}
	require.Len(t, diffs, 2, "each turn persists its turn_diff")
	assert.Contains(t, diffs[1].UnifiedDiff, "+there\n", "the persisted turn_diff keeps the unified diff")
}

type failingCapture struct{}

func (failingCapture) Begin(context.Context) (diffcapture.Baseline, error) { return nil, nil }

func (failingCapture) Finish(context.Context, diffcapture.Baseline, []string) messages.TurnDiff {
	return messages.TurnDiff{Source: messages.DiffNone, Files: []messages.FileChange{}, Summary: "no diff", Warning: "git exploded"}
}

// A capture problem is a warning event and a metric; the turn goes on.
func TestRuntimeReportsCaptureFailures(t *testing.T) {
	sc := &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{script.Text("done")}}}}
	reg := prometheus.NewRegistry()
	rt := runtimeFor(t, sc, actors.WithMetrics(reg),
		actors.WithDiffCapture(func(string, messages.Descriptor) diffcapture.Capturer { return failingCapture{} }))
	ctx := ctxFor(t)
	st, err := rt.Start(ctx, "e2e", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	r, err := rt.ReadTurn(ctx, "e2e", messages.ReadTurn{SessionID: st.SessionID})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, "git exploded", r.TurnDiff.Warning)

	require.Eventually(t, func() bool {
		evs, err := rt.Store().ReadEvents(ctx, st.SessionID, 0, 0)
		require.NoError(t, err)
		for i, ev := range evs {
			if ev.Event.Type == messages.EvWarning && ev.Event.Text == "diff capture: git exploded" {
				return i > 0 && evs[i-1].Event.Type == messages.EvTurnDiff
			}
		}
		return false
	}, time.Minute, 10*time.Millisecond, "a warning event follows the turn_diff")

	// The metric counts durable turn_diff events: it follows the store's
	// acknowledgement, so it may trail the event the reader just saw.
	require.Eventually(t, func() bool { return captureFailures(t, reg) == 1 }, time.Minute, 10*time.Millisecond,
		"the failure is counted once")
}

func captureFailures(t *testing.T, reg *prometheus.Registry) float64 {
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == "code_session_diff_capture_failures_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// countingCapture is the runtime's git capture, counting which way each
// stage was answered.
type countingCapture struct {
	*diffcapture.Git
	mu                                    sync.Mutex
	begins, finishes, beginNow, finishNow int
	running                               int // Settles and Prepares
}

func (c *countingCapture) Settle(ctx context.Context) {
	c.mu.Lock()
	c.running++
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.running--; c.mu.Unlock() }()
	c.Git.Settle(ctx)
}

func (c *countingCapture) Prepare(ctx context.Context, b diffcapture.Baseline) {
	c.mu.Lock()
	c.running++
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.running--; c.mu.Unlock() }()
	c.Git.Prepare(ctx, b)
}

// quiet says no Settle or Prepare runs and the witness holds.
func (c *countingCapture) quiet() bool {
	c.mu.Lock()
	running := c.running
	c.mu.Unlock()
	_, _, ok := c.Git.BeginNow()
	return running == 0 && ok
}

func (c *countingCapture) Begin(ctx context.Context) (diffcapture.Baseline, error) {
	c.mu.Lock()
	c.begins++
	c.mu.Unlock()
	return c.Git.Begin(ctx)
}

func (c *countingCapture) Finish(ctx context.Context, b diffcapture.Baseline, editPaths []string) messages.TurnDiff {
	c.mu.Lock()
	c.finishes++
	c.mu.Unlock()
	return c.Git.Finish(ctx, b, editPaths)
}

func (c *countingCapture) BeginNow() (diffcapture.Baseline, bool, bool) {
	b, settle, ok := c.Git.BeginNow()
	if ok {
		c.mu.Lock()
		c.beginNow++
		c.mu.Unlock()
	}
	return b, settle, ok
}

func (c *countingCapture) FinishNow(b diffcapture.Baseline, editPaths []string) (messages.TurnDiff, bool, bool) {
	d, settle, ok := c.Git.FinishNow(b, editPaths)
	if ok {
		c.mu.Lock()
		c.finishNow++
		c.mu.Unlock()
	}
	return d, settle, ok
}

func (c *countingCapture) counts() [4]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return [4]int{c.begins, c.finishes, c.beginNow, c.finishNow}
}

// Through the runtime, a turn whose work tree is as the last capture left
// it starts without the differ (the session asks the capture at once), and
// a clean turn ends the same way; a turn after a change made between
// turns, or one that changed something, takes the differ's way. Every
// turn's diff is what it changed, whichever way it went.
func TestRuntimeAsksTheCaptureAtOnce(t *testing.T) {
	repo := gitRepo(t)
	sc := &script.Scenario{Turns: []script.Turn{
		{Steps: []script.Step{script.Write("hello.txt", "hi\n"), script.Text("wrote it")}},
		{Steps: []script.Step{script.Text("nothing to do")}},
		{Steps: []script.Step{script.Edit("hello.txt", "hi\n", "hi\nthere\n"), script.Text("edited it")}},
	}}
	rt, st, capture, read := countedSession(t, sc, repo)
	ctx := ctxFor(t)
	const scope = "e2e"
	// the next turn: once the capture's Settle has made the witness and
	// nothing of the last turn's runs any more
	guide := func(text string) {
		t.Helper()
		require.Eventually(t, capture.quiet, time.Minute, 10*time.Millisecond)
		_, err := rt.Guide(ctx, scope, messages.Guide{SessionID: st.SessionID, Text: text})
		require.NoError(t, err)
	}

	assert.Equal(t, []messages.FileChange{{Path: "hello.txt", Status: "A", Insertions: 1}}, read().Files)
	assert.Equal(t, [4]int{1, 1, 0, 0}, capture.counts(), "the first turn finds the repository: the differ's way")

	guide("nothing")
	assert.Empty(t, read().Files)
	assert.Equal(t, [4]int{1, 1, 1, 1}, capture.counts(), "a clean turn: both stages at once")

	guide("edit it")
	assert.Equal(t, []messages.FileChange{{Path: "hello.txt", Status: "M", Insertions: 1}}, read().Files)
	n := capture.counts()
	assert.Equal(t, [2]int{1, 2}, [2]int{n[0], n[2]}, "at once at its start")
	assert.Equal(t, 3, n[1]+n[3], "its end at once when the Prepare after its edit was done by then, else the differ's Finish")
	_, err := rt.Stop(ctx, scope, messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
}

// A session in a directory with no repository: the first turn asks git
// (the differ's way); the next turns are answered at once, from the edit
// tools' paths, as the differ would.
func TestRuntimeAnswersANonRepositoryAtOnce(t *testing.T) {
	dir := t.TempDir()
	sc := &script.Scenario{Turns: []script.Turn{
		{Steps: []script.Step{script.Write("hello.txt", "hi\n"), script.Text("wrote it")}},
		{Steps: []script.Step{script.Edit("hello.txt", "hi\n", "hi\nthere\n"), script.Text("edited it")}},
		{Steps: []script.Step{script.Text("nothing to do")}},
	}}
	rt, st, capture, read := countedSession(t, sc, dir)
	ctx := ctxFor(t)
	const scope = "e2e"
	d := read()
	assert.Equal(t, messages.DiffToolEvents, d.Source)
	assert.Equal(t, []messages.FileChange{{Path: "hello.txt", Status: "M"}}, d.Files)
	assert.Equal(t, [4]int{1, 1, 0, 0}, capture.counts(), "the first turn asks git: the differ's way")

	_, err := rt.Guide(ctx, scope, messages.Guide{SessionID: st.SessionID, Text: "edit it"})
	require.NoError(t, err)
	d = read()
	assert.Equal(t, messages.DiffToolEvents, d.Source)
	assert.Equal(t, []messages.FileChange{{Path: "hello.txt", Status: "M"}}, d.Files, "the edit's path, as Finish gives it")
	assert.Equal(t, [4]int{1, 1, 1, 1}, capture.counts(), "both stages at once")

	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: st.SessionID, Text: "nothing"})
	require.NoError(t, err)
	d = read()
	assert.Equal(t, messages.DiffNone, d.Source)
	assert.Equal(t, [4]int{1, 1, 2, 2}, capture.counts())
	_, err = rt.Stop(ctx, scope, messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
}

// countedSession starts a session of sc in cwd (scope "e2e") with the git
// capture counted, and returns a reader of its turns' diffs.
func countedSession(t *testing.T, sc *script.Scenario, cwd string) (*actors.Runtime, messages.StartResult, *countingCapture, func() *messages.TurnDiff) {
	t.Helper()
	var capture *countingCapture
	rt := runtimeFor(t, sc, actors.WithDiffCapture(func(cwd string, _ messages.Descriptor) diffcapture.Capturer {
		capture = &countingCapture{Git: diffcapture.NewGit(cwd)}
		return capture
	}))
	ctx := ctxFor(t)
	st, err := rt.Start(ctx, "e2e", messages.Start{Brief: "write hello", Cwd: cwd, MaxPosture: messages.PostureAcceptEdits})
	require.NoError(t, err)
	read := func() *messages.TurnDiff {
		t.Helper()
		r, err := rt.ReadTurn(ctx, "e2e", messages.ReadTurn{SessionID: st.SessionID})
		require.NoError(t, err)
		require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
		require.NotNil(t, r.TurnDiff)
		require.Empty(t, r.TurnDiff.Warning)
		return r.TurnDiff
	}
	return rt, st, capture, read
}
