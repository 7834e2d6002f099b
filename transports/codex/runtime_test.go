package codex_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/codex"
	"github.com/codesession/codesession/transports/modelmock"
)

// TestRuntimeDrivesCodex runs a whole session through actors.Runtime on
// the real CLI: an apply_patch asked and allowed (the file appears, the
// runtime's diff names it, Codex's own diff rides beside it), a command
// asked and denied (the reason reaches the model), acceptEdits, steering
// and an interrupt of a slow turn, a stop, and a resume of the record on
// the same Codex thread.
func TestRuntimeDrivesCodex(t *testing.T) {
	bin := codex.CodexBinaryForTest(t)
	slow := &modelmock.Scenario{Rules: append(modelmock.Reference().Rules, modelmock.Rule{
		Match: modelmock.Match{Text: "TAKE YOUR TIME"},
		Steps: []modelmock.Step{{Text: strings.Repeat("slow ", 120), Chunks: 120, ChunkDelay: modelmock.Duration(time.Second)}},
	})}
	mock, err := modelmock.Start(t, slow)
	require.NoError(t, err)
	work := t.TempDir()

	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = codex.ID
	cfg.Supervision.ShutdownTimeout = config.Duration(10 * time.Second)
	cfg.Env = map[string]string{codex.EnvBaseURL: mock.URL() + "/v1", codex.EnvAPIKey: "sk-mock", "HOME": t.TempDir()}
	var events []messages.PersistedEvent
	evCh := make(chan messages.PersistedEvent, 4096)
	rt, err := actors.New(cfg,
		actors.WithBackends(transports.NewRegistry(codex.New(codex.WithBinary(bin), codex.WithHomeRoot(t.TempDir())))),
		actors.WithEventListener(func(_ string, ev messages.PersistedEvent) {
			select {
			case evCh <- ev:
			default:
			}
		}))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, rt.Close(ctx))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const scope = "codex-e2e"

	st, err := rt.Start(ctx, scope, messages.Start{Brief: "TOOL:PATCH hello.txt hi-from-codex", Cwd: work, Model: "gpt-5.5"})
	require.NoError(t, err)
	sid := st.SessionID

	r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindClarification, r.Kind, "%+v", r)
	assert.Equal(t, codex.ToolApplyPatch, r.ToolName)
	assert.NoFileExists(t, filepath.Join(work, "hello.txt"))
	_, err = rt.Answer(ctx, scope, messages.Answer{SessionID: sid, ClarificationID: r.ClarificationID, Decision: messages.DecisionAllowOnce})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid, IncludeDiff: true})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	b, err := os.ReadFile(filepath.Join(work, "hello.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hi-from-codex\n", string(b))
	require.NotNil(t, r.TurnDiff)
	var files []string
	for _, f := range r.TurnDiff.Files {
		files = append(files, f.Path)
	}
	assert.Contains(t, strings.Join(files, " "), "hello.txt", "the runtime's diff names the patched file: %+v", r.TurnDiff)
	assert.Zero(t, r.CostUSD, "codex reports no USD")

	// Codex's own diff is kept on the turn's end, beside the runtime's
	// (the listener sees an event once it is durable, which may be after
	// the read-turn answer: wait for turn 1's end, a long bound only
	// stopping a hang)
	var own *messages.TurnDiff
	for seen := false; !seen; {
		select {
		case ev := <-evCh:
			events = append(events, ev)
			if ev.Event.Type == messages.EvTurnEnd && ev.Turn == 1 {
				own, seen = ev.Event.Diff, true
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("turn 1's end never reached the listener")
		}
	}
	// Known limit (issue 33's notes): under the runtime's Landlock domain
	// codex 0.169 sends no turn/diff/updated (shown: the same run with the
	// confinement off gets one; neither the write rules nor the read
	// denials nor the private TMPDIR are the cause). The runtime's own diff
	// above still names the file; codex's, when it comes, must be right.
	if own != nil {
		assert.Equal(t, codex.DiffSourceBackend, own.Source)
		assert.Contains(t, own.UnifiedDiff, "+hi-from-codex")
	} else {
		t.Log("codex sent no diff of its own under the confinement (known limit)")
	}

	// a command, denied with a reason
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "TOOL:SHELL touch denied.txt"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindClarification, r.Kind, "%+v", r)
	assert.Equal(t, codex.ToolShell, r.ToolName)
	_, err = rt.Answer(ctx, scope, messages.Answer{SessionID: sid, ClarificationID: r.ClarificationID, Decision: messages.DecisionDeny, Reason: "no shell in this repo"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.NoFileExists(t, filepath.Join(work, "denied.txt"))
	assert.True(t, mock.Saw("no shell in this repo"), "the model received the deny reason")

	// acceptEdits: a patch runs without asking
	_, err = rt.SetPosture(ctx, scope, messages.SetPosture{SessionID: sid, Posture: messages.PostureAcceptEdits})
	require.NoError(t, err)
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "TOOL:PATCH second.txt no-asking"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "no clarification under acceptEdits: %+v", r)
	assert.FileExists(t, filepath.Join(work, "second.txt"))

	// a slow turn: steered, then interrupted
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "TAKE YOUR TIME"})
	require.NoError(t, err)
	n := len(mock.MainRequests())
	require.Eventually(t, func() bool { return len(mock.MainRequests()) > n }, time.Minute, 20*time.Millisecond)
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "steered: keep it short", Mode: messages.GuideSteer})
	require.NoError(t, err)
	_, err = rt.Interrupt(ctx, scope, messages.Interrupt{SessionID: sid})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, messages.TurnInterrupted, r.State)

	stop, err := rt.Stop(ctx, scope, messages.Stop{SessionID: sid, Outcome: messages.OutcomeSuccess})
	require.NoError(t, err)
	assert.Equal(t, messages.OutcomeSuccess, stop.Outcome)

	// the record keeps Codex's thread id; resuming the record resumes it
	rec, err := rt.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	require.Len(t, rec.Runs, 1)
	ext := rec.Runs[0].ExternalSessionID
	require.NotEmpty(t, ext)
	_, err = rt.Resume(ctx, scope, messages.Resume{SessionID: sid, Brief: "what did I ask first?"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, "PONG(model=gpt-5.5): what did I ask first?", r.Text)
	last := mock.MainRequests()
	assert.Contains(t, string(last[len(last)-1].Body), "hi-from-codex", "the thread's history came back with thread/resume")
	_, err = rt.Stop(ctx, scope, messages.Stop{SessionID: sid})
	require.NoError(t, err)
	rec, err = rt.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	require.Len(t, rec.Runs, 2)
	assert.Equal(t, ext, rec.Runs[1].ExternalSessionID)
}
