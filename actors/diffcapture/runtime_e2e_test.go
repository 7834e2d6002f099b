package diffcapture_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
)

// gitRepo makes dir a repository with one commit (the package's TestMain
// has pointed HOME at a temporary directory).
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
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
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	})
	return rt
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
	}, 10*time.Second, 10*time.Millisecond, "a warning event follows the turn_diff")

	// The metric counts durable turn_diff events: it follows the store's
	// acknowledgement, so it may trail the event the reader just saw.
	require.Eventually(t, func() bool { return captureFailures(t, reg) == 1 }, 10*time.Second, 10*time.Millisecond,
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
