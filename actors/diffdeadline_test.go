package actors

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// stuckCapture's Finish ignores its context and never returns until the
// test ends: a hung git, a wedged disk.
type stuckCapture struct{ release <-chan struct{} }

func (stuckCapture) Begin(context.Context) (diffcapture.Baseline, error) { return nil, nil }

func (s stuckCapture) Finish(context.Context, diffcapture.Baseline, []string) messages.TurnDiff {
	<-s.release
	return messages.TurnDiff{Source: messages.DiffNone, Summary: "too late"}
}

func withDiffDeadline(d time.Duration) Option { return func(o *options) { o.diffDeadline = d } }

// A turn whose diff capture never answers ends at the diff deadline with a
// warning and the tool-event fallback diff (on main it never ended: the
// reader waited out its own deadline).
func TestStuckDiffCaptureEndsTheTurnAtItsDeadline(t *testing.T) {
	cfg := testConfig(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Write("a.txt", "x\n"), script.Text("done")}}}
	rt := newRuntime(t, cfg, sc,
		WithDiffCapture(func(string, messages.Descriptor) diffcapture.Capturer { return stuckCapture{release: release} }),
		withDiffDeadline(300*time.Millisecond))
	ctx := ctxT(t)
	st, r := startDiffed(t, rt)
	assert.Contains(t, r.TurnDiff.Warning, "did not answer within")
	assert.Equal(t, messages.DiffToolEvents, r.TurnDiff.Source, "the edit tools' paths stand in: %+v", r.TurnDiff)

	// the session goes on: the next turn's diff is cut short the same way
	_, err := rt.Guide(ctx, "s", messages.Guide{SessionID: st.SessionID, Text: "again"})
	require.NoError(t, err)
	r = readKind(t, rt, "s", st.SessionID)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
}
