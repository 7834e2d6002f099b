package diffcapture

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// A panic anywhere in diff capture is a bug the turn's diff reports as an
// internal error (the session turns a diff's warning into a warning event),
// never a quiet fallback to git's way, and never a crash. Before, Settle,
// Prepare, BeginNow and FinishNow recovered into silence: every case but
// Finish fails on the old code.
func TestPanicsInDiffCaptureReachTheDiff(t *testing.T) {
	for _, where := range []string{"Settle", "Prepare", "BeginNow", "FinishNow", "Finish"} {
		t.Run(where, func(t *testing.T) {
			r := witnessRepo(t)
			cg := newCountingGit(t)
			g := witnessed(t, r, cg)
			ctx := testCtx(t)
			g.panicAt = where
			b, settle, ok := g.BeginNow()
			if !ok {
				require.Equal(t, "BeginNow", where, "the witness holds")
				var err error
				b, err = g.Begin(ctx)
				require.NoError(t, err)
			}
			_ = settle
			g.Settle(ctx) // the differ settles after each answer
			r.write("a.txt", "changed\n")
			g.Prepare(ctx, b)
			var d messages.TurnDiff
			if where != "Finish" {
				d, _, ok = g.FinishNow(b, nil)
			}
			if !ok || where == "Finish" {
				d = g.Finish(ctx, b, nil)
			}
			assert.Contains(t, d.Warning, where+" panicked", "the panic is in the turn's diff")
			assert.Contains(t, d.Warning, "internal")
			g.panicAt = ""
			g.Settle(ctx)
			_, d = countedTurn(t, g, cg, nil)
			assert.Empty(t, d.Warning, "a panic is reported once")
		})
	}
}
