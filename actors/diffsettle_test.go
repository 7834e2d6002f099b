package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// settlingCapture has work to do after each answer (diffcapture.Settler)
// that does not end until the test releases it.
type settlingCapture struct {
	release <-chan struct{}
	settled *atomic.Int32
}

func (settlingCapture) Begin(context.Context) (diffcapture.Baseline, error) { return "base", nil }

func (settlingCapture) Finish(_ context.Context, b diffcapture.Baseline, _ []string) messages.TurnDiff {
	return messages.TurnDiff{Source: messages.DiffGit, Files: []messages.FileChange{}, Summary: "from " + b.(string)}
}

func (s settlingCapture) Settle(context.Context) {
	<-s.release
	s.settled.Add(1)
}

// The turn's result is handed out as soon as its diff is ready: the work
// the capture left for after its answers (Settle) runs beside the turn and
// the driver's read, and is still called.
func TestDiffCaptureSettlesOffTheTurnsPath(t *testing.T) {
	cfg := testConfig(t)
	release := make(chan struct{})
	var settled atomic.Int32
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("done")}}}
	rt := newRuntime(t, cfg, sc,
		WithDiffCapture(func(string, messages.Descriptor) diffcapture.Capturer {
			return settlingCapture{release: release, settled: &settled}
		}))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)

	r := readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	require.NotNil(t, r.TurnDiff)
	assert.Equal(t, "from base", r.TurnDiff.Summary)
	assert.Zero(t, settled.Load(), "the result did not wait for Settle")

	close(release)
	require.Eventually(t, func() bool { return settled.Load() == 2 }, time.Minute, 10*time.Millisecond,
		"Settle ran after the baseline and after the diff")
}

// closingCapture counts Close calls.
type closingCapture struct {
	diffcapture.Noop
	closed *atomic.Int32
}

func (c closingCapture) Close() error { c.closed.Add(1); return nil }

// A capture that keeps per-session state (git's scratch snapshot) is
// closed once the session's diff child has stopped for good at its end.
func TestDiffCaptureIsClosedWhenTheSessionEnds(t *testing.T) {
	cfg := testConfig(t)
	var closed atomic.Int32
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Text("done")}}}
	rt := newRuntime(t, cfg, sc,
		WithDiffCapture(func(string, messages.Descriptor) diffcapture.Capturer {
			return closingCapture{closed: &closed}
		}))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: t.TempDir()})
	require.NoError(t, err)
	readKind(t, rt, "s", st.SessionID)
	assert.Zero(t, closed.Load(), "not while the session lives")
	_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return closed.Load() == 1 }, time.Minute, 10*time.Millisecond)
}

// preparingCapture records its Prepare calls: how many, how many at once,
// and with which baseline; the second one does not end until released.
type preparingCapture struct {
	diffcapture.Noop
	release          <-chan struct{}
	calls, now, most *atomic.Int32
	bases            chan diffcapture.Baseline
	starts           chan time.Time
}

func (p preparingCapture) Begin(context.Context) (diffcapture.Baseline, error) { return "base", nil }

func (p preparingCapture) Prepare(_ context.Context, b diffcapture.Baseline) {
	p.starts <- time.Now()
	n := p.now.Add(1)
	defer p.now.Add(-1)
	for m := p.most.Load(); n > m && !p.most.CompareAndSwap(m, n); m = p.most.Load() {
	}
	if p.calls.Add(1) == 2 {
		<-p.release
	}
	p.bases <- b
}

// Tool results let diff capture diff ahead (a Preparer), with the turn's
// baseline, once the turn has gone prepareQuiet without one (it is then
// most likely waiting for its model): a burst of results asks for one
// Prepare, not one each; one at a time, results that come while one runs
// asking for one more after it; and a turn that ends right after its last
// result has none for it (Finish diffs it with the CPU to itself). In
// virtual time.
func TestToolResultsLetDiffCapturePrepareOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		release := make(chan struct{})
		var calls, now, most atomic.Int32
		bases := make(chan diffcapture.Baseline, 16)
		starts := make(chan time.Time, 16)
		dir := t.TempDir()
		write := func(name string) script.Step { return script.Write(dir+"/"+name, name) }
		pause := script.Delay(10 * time.Millisecond)
		think := script.Delay(time.Minute) // the model's turn: quiet
		sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{
			write("a"), pause, write("b"), pause, write("c"), think, // Prepare 1
			write("d"), pause, write("e"), think, // Prepare 2, held until 150 s
			write("f"), think, // asks while 2 runs: Prepare 3 after it
			write("g"), script.Text("done"), // the end at once: none
		}}}
		rt, err := New(cfg, WithStore(store.NewMemory()), WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc)))),
			WithDiffCapture(func(string, messages.Descriptor) diffcapture.Capturer {
				return preparingCapture{release: release, calls: &calls, now: &now, most: &most, bases: bases, starts: starts}
			}))
		require.NoError(t, err)
		ctx := context.Background()
		t0 := time.Now()
		time.AfterFunc(150*time.Second, func() { close(release) })
		st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: dir})
		require.NoError(t, err)
		r, err := rt.ReadTurn(ctx, "s", messages.ReadTurn{SessionID: st.SessionID})
		require.NoError(t, err)
		require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
		time.Sleep(time.Minute) // (a late Prepare would show here)
		assert.Equal(t, int32(3), calls.Load())
		assert.Equal(t, int32(1), most.Load(), "never two at once")
		require.Len(t, starts, 3)
		assert.Greater(t, (<-starts).Sub(t0), 20*time.Millisecond, "the first waited for the burst to end")
		assert.Greater(t, (<-starts).Sub(t0), time.Minute, "the second, for the second burst")
		assert.GreaterOrEqual(t, (<-starts).Sub(t0), 150*time.Second, "the third, for the second to return")
		require.Len(t, bases, 3)
		for range 3 {
			assert.Equal(t, diffcapture.Baseline("base"), <-bases)
		}
		require.NoError(t, rt.Close(ctx))
	})
}
