package claudecode_test

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
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
)

// TestRuntimeDrivesClaudeCode runs a whole session through actors.Runtime
// on the real CLI: a Write asked and allowed (the file appears, the diff
// names it), a Bash asked and denied (the reason rides into the next turn),
// a posture change, an interrupted slow turn, and a stop with a verdict.
func TestRuntimeDrivesClaudeCode(t *testing.T) {
	bin := claudecode.ClaudeBinaryForTest(t)
	slow := &modelmock.Scenario{Rules: append(modelmock.Reference().Rules, modelmock.Rule{
		Match: modelmock.Match{Text: "TAKE YOUR TIME"},
		Steps: []modelmock.Step{{Text: strings.Repeat("slow ", 60), Chunks: 60, ChunkDelay: modelmock.Duration(time.Second)}},
	})}
	mock, err := modelmock.Start(t, slow)
	require.NoError(t, err)
	work := t.TempDir()

	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = claudecode.ID
	cfg.Supervision.ShutdownTimeout = config.Duration(10 * time.Second)
	cfg.Env = map[string]string{
		"ANTHROPIC_BASE_URL": mock.URL(),
		"ANTHROPIC_API_KEY":  "sk-ant-test",
		"HOME":               t.TempDir(), // never the real ~/.claude
	}
	rt, err := actors.New(cfg, actors.WithBackends(transports.NewRegistry(claudecode.New(claudecode.WithBinary(bin)))))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, rt.Close(ctx))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const scope = "claude-e2e"

	hello := filepath.Join(work, "hello.txt")
	st, err := rt.Start(ctx, scope, messages.Start{Brief: "TOOL:WRITE " + hello + " hi-from-claude", Cwd: work, Model: "claude-mock-1"})
	require.NoError(t, err)
	sid := st.SessionID

	r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindClarification, r.Kind, "%+v", r)
	assert.Equal(t, "Write", r.ToolName)
	_, err = rt.Answer(ctx, scope, messages.Answer{SessionID: sid, ClarificationID: r.ClarificationID, Decision: messages.DecisionAllowOnce})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid, IncludeDiff: true})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Contains(t, r.Text, "File created successfully")
	assert.Equal(t, 2, r.NumTurns)
	assert.Greater(t, r.CostUSD, 0.0)
	b, err := os.ReadFile(hello)
	require.NoError(t, err)
	assert.Equal(t, "hi-from-claude\n", string(b))
	require.Len(t, r.Actions, 1)
	assert.Equal(t, "Write", r.Actions[0].ToolName)
	require.NotNil(t, r.TurnDiff)
	var files []string
	for _, f := range r.TurnDiff.Files {
		files = append(files, f.Path)
	}
	assert.Contains(t, strings.Join(files, " "), "hello.txt", "the diff names the written file: %+v", r.TurnDiff)

	// a Bash call, denied with a reason
	denied := filepath.Join(work, "denied.txt")
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "TOOL:BASH echo no > " + denied})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindClarification, r.Kind, "%+v", r)
	assert.Equal(t, "Bash", r.ToolName)
	_, err = rt.Answer(ctx, scope, messages.Answer{SessionID: sid, ClarificationID: r.ClarificationID, Decision: messages.DecisionDeny, Reason: "no shell in this repo"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, 2, r.Turn)
	assert.NoFileExists(t, denied)
	assert.True(t, mock.Saw("no shell in this repo"), "the model received the deny message")

	// posture acceptEdits, then a turn the reason rides into
	_, err = rt.SetPosture(ctx, scope, messages.SetPosture{SessionID: sid, Posture: messages.PostureAcceptEdits})
	require.NoError(t, err)
	second := filepath.Join(work, "second.txt")
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "TOOL:WRITE " + second + " no-asking"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "no clarification under acceptEdits: %+v", r)
	assert.FileExists(t, second)
	last := mock.MainRequests()
	assert.Contains(t, string(last[len(last)-1].Body), "no shell in this repo", "the deny reason rode into turn 3")

	// an interrupted slow turn
	_, err = rt.Guide(ctx, scope, messages.Guide{SessionID: sid, Text: "TAKE YOUR TIME"})
	require.NoError(t, err)
	n := len(mock.MainRequests())
	require.Eventually(t, func() bool { return len(mock.MainRequests()) > n }, time.Minute, 20*time.Millisecond)
	_, err = rt.Interrupt(ctx, scope, messages.Interrupt{SessionID: sid})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, messages.TurnInterrupted, r.State)

	stop, err := rt.Stop(ctx, scope, messages.Stop{SessionID: sid, Outcome: messages.OutcomeSuccess})
	require.NoError(t, err)
	assert.Equal(t, messages.OutcomeSuccess, stop.Outcome)

	// the record keeps Claude Code's own session id; resuming the record
	// resumes Claude Code's session with it
	rec, err := rt.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	require.Len(t, rec.Runs, 1)
	ext := rec.Runs[0].ExternalSessionID
	assert.Regexp(t, `^[0-9a-f-]{36}$`, ext)
	_, err = rt.Resume(ctx, scope, messages.Resume{SessionID: sid, Brief: "what did I ask first?"})
	require.NoError(t, err)
	r, err = rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, messages.KindTurnComplete, r.Kind, "%+v", r)
	assert.Equal(t, "PONG(model=claude-mock-1): what did I ask first?", r.Text)
	last = mock.MainRequests()
	assert.Contains(t, string(last[len(last)-1].Body), "hi-from-claude", "the history came back with --resume")
	_, err = rt.Stop(ctx, scope, messages.Stop{SessionID: sid})
	require.NoError(t, err)
	rec, err = rt.Store().GetMeta(ctx, sid)
	require.NoError(t, err)
	require.Len(t, rec.Runs, 2)
	assert.Equal(t, ext, rec.Runs[1].ExternalSessionID)

	lb, err := rt.ListBackends(ctx, scope)
	require.NoError(t, err)
	require.Len(t, lb.Backends, 1)
	assert.True(t, lb.Backends[0].Availability.Available)
	assert.Equal(t, claudecode.PinnedVersion, lb.Backends[0].Availability.Version)
}
