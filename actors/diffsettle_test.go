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
