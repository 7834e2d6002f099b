package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/messages"
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
	_, r := startDiffed(t, rt)
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
// and with which baseline; the first one does not end until released.
type preparingCapture struct {
	diffcapture.Noop
	first            <-chan struct{}
	calls, now, most *atomic.Int32
	bases            chan diffcapture.Baseline
}

func (p preparingCapture) Begin(context.Context) (diffcapture.Baseline, error) { return "base", nil }

func (p preparingCapture) Prepare(_ context.Context, b diffcapture.Baseline) {
	n := p.now.Add(1)
	defer p.now.Add(-1)
	for m := p.most.Load(); n > m && !p.most.CompareAndSwap(m, n); m = p.most.Load() {
	}
	if p.calls.Add(1) == 1 {
		<-p.first
	}
	p.bases <- b
}

// Each tool result lets diff capture diff ahead (a Preparer), with the
// turn's baseline, one Prepare at a time: results that come while one runs
// ask for one more after it, not one each, and none once the turn is
// finishing.
func TestToolResultsLetDiffCapturePrepareOneAtATime(t *testing.T) {
	cfg := testConfig(t)
	first := make(chan struct{})
	var calls, now, most atomic.Int32
	bases := make(chan diffcapture.Baseline, 16)
	dir := t.TempDir()
	ask := script.Tool("Bash", map[string]string{"command": "true"}, "ok")
	ask.Tool.Ask = true
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{
		script.Write(dir+"/a.txt", "a"), script.Write(dir+"/b.txt", "b"), script.Write(dir+"/c.txt", "c"),
		ask, // the turn waits here for the driver's answer
		script.Text("done"),
	}}}
	rt := newRuntime(t, cfg, sc,
		WithDiffCapture(func(string, messages.Descriptor) diffcapture.Capturer {
			return preparingCapture{first: first, calls: &calls, now: &now, most: &most, bases: bases}
		}))
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "go", Cwd: dir})
	require.NoError(t, err)
	r := readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindClarification, r.Kind, "%+v", r)
	// the differ runs Prepare on a goroutine of its own, which need not
	// have started by the time the clarification is read: wait for the
	// first (it cannot end before first is closed, nor a second start)
	require.Eventually(t, func() bool { return calls.Load() == 1 }, time.Minute, 5*time.Millisecond,
		"the first Prepare still runs; the other results wait for it")

	close(first)
	require.Eventually(t, func() bool { return calls.Load() == 2 }, time.Minute, 10*time.Millisecond,
		"one more Prepare for the results that came meanwhile")
	assert.Equal(t, diffcapture.Baseline("base"), <-bases)
	assert.Equal(t, diffcapture.Baseline("base"), <-bases)
	time.Sleep(50 * time.Millisecond) // (a third would show here; none is asked for)
	assert.Equal(t, int32(2), calls.Load())

	_, err = rt.Answer(ctx, "s", messages.Answer{SessionID: st.SessionID, ClarificationID: r.ClarificationID, Decision: messages.DecisionAllowOnce})
	require.NoError(t, err)
	r = readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, int32(1), most.Load(), "never two at once")
}
