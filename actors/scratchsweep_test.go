package actors

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
	"github.com/codesession/codesession/transports/script"
)

// sessionTmps are the session TMPDIRs recorded in home's process
// records (Pgid 0: no process).
func sessionTmps(t *testing.T, home string) []proc.Record {
	t.Helper()
	var out []proc.Record
	for _, r := range proctest.Tmps(t, filepath.Join(home, "run", "procs")) {
		if r.Pgid == 0 {
			out = append(out, r)
		}
	}
	return out
}

// TestDiffScratchIsRecordedForTheBootSweep: a session's diff capture
// keeps its snapshot in a scratch folder between turns; the runtime has
// it made through the session's process group, so it is recorded beside
// the session's processes (a daemon that dies leaves it to the next
// boot's sweep), and the session's stop removes the folder and the record.
func TestDiffScratchIsRecordedForTheBootSweep(t *testing.T) {
	work, _ := gitRepo(t, "scratch\n")
	cfg := testConfig(t)
	rt := newRuntime(t, cfg, &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{
		script.Write("hello.txt", "hi\n"), script.Text("done")}}}})
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "", messages.Start{Brief: "write", Cwd: work})
	require.NoError(t, err)
	res, err := rt.ReadTurn(ctx, "", messages.ReadTurn{SessionID: st.SessionID})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, res.Kind)
	require.NotNil(t, res.TurnDiff)
	assert.Equal(t, messages.DiffGit, res.TurnDiff.Source)

	recs := sessionTmps(t, cfg.Home)
	require.NotEmpty(t, recs, "the capture's scratch folder is recorded")
	for _, rec := range recs {
		assert.Equal(t, st.SessionID, rec.SessionID)
		assert.DirExists(t, filepath.Join(rec.Tmp, "objects"), "the scratch folder holds the snapshot's objects")
	}

	_, err = rt.Stop(ctx, "", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	// the capture is closed as the session's actor stops, after the op
	// has answered: wait for it, bounded only against a hang
	require.Eventually(t, func() bool { return len(sessionTmps(t, cfg.Home)) == 0 }, time.Minute, 10*time.Millisecond,
		"the stop removes the records")
	for _, rec := range recs {
		assert.NoDirExists(t, rec.Tmp)
	}
}
