package actors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/script"
)

// tmpRecords are the TMPDIRs recorded with the runtime's processes
// (proc.Group.TempDir): what the next boot's sweep removes when the
// runtime that made them died.
func tmpRecords(t *testing.T, home string) []proc.Record {
	t.Helper()
	dir := filepath.Join(home, "run", "procs")
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []proc.Record
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		var rec proc.Record
		if json.Unmarshal(b, &rec) == nil && rec.Pgid == 0 && rec.Tmp != "" {
			out = append(out, rec)
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

	recs := tmpRecords(t, cfg.Home)
	require.NotEmpty(t, recs, "the capture's scratch folder is recorded")
	for _, rec := range recs {
		assert.Equal(t, st.SessionID, rec.SessionID)
		assert.DirExists(t, filepath.Join(rec.Tmp, "objects"), "the scratch folder holds the snapshot's objects")
	}

	_, err = rt.Stop(ctx, "", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	// the capture is closed as the session's actor stops, after the op
	// has answered: wait for it, bounded only against a hang
	require.Eventually(t, func() bool { return len(tmpRecords(t, cfg.Home)) == 0 }, time.Minute, 10*time.Millisecond,
		"the stop removes the records")
	for _, rec := range recs {
		assert.NoDirExists(t, rec.Tmp)
	}
}
