package claudecode_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/runtimetest"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
)

// TestRuntimeDrivesClaudeCode runs a whole session through actors.Runtime
// on the real CLI: a Write asked and allowed (the file appears, the diff
// names it), a Bash asked and denied (the reason rides into the next turn),
// a posture change, an interrupted slow turn, and a stop with a verdict.
func TestRuntimeDrivesClaudeCode(t *testing.T) {
	bin := claudecode.ClaudeBinaryForTest(t)
	rig := runtimetest.New(t, "claude-e2e", runtimetest.Config{
		Backend: claudecode.New(claudecode.WithBinary(bin)),
		Env: func(mock *modelmock.Server) map[string]string {
			return map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test"}
		},
		SlowChunks: 60,
		Timeout:    3 * time.Minute,
	})

	hello := filepath.Join(rig.Work, "hello.txt")
	sid := rig.Start("TOOL:WRITE "+hello+" hi-from-claude", "claude-mock-1")
	r := rig.Allowed(sid, "Write", hello)
	assert.Contains(t, r.Text, "File created successfully")
	assert.Equal(t, 2, r.NumTurns)
	assert.Greater(t, r.CostUSD, 0.0)
	b, err := os.ReadFile(hello)
	require.NoError(t, err)
	assert.Equal(t, "hi-from-claude\n", string(b))
	require.Len(t, r.Actions, 1)
	assert.Equal(t, "Write", r.Actions[0].ToolName)
	runtimetest.DiffNames(t, r, "hello.txt")

	// a Bash call, denied with a reason
	denied := filepath.Join(rig.Work, "denied.txt")
	r = rig.Denied(sid, "TOOL:BASH echo no > "+denied, "Bash")
	assert.Equal(t, 2, r.Turn)
	assert.NoFileExists(t, denied)

	// posture acceptEdits, then a turn the reason rides into
	second := filepath.Join(rig.Work, "second.txt")
	rig.AcceptEdits(sid, "TOOL:WRITE "+second+" no-asking")
	assert.FileExists(t, second)
	rig.LastRequestHas("no shell in this repo", "the deny reason rode into turn 3")

	rig.SlowInterrupted(sid, "")

	// the record keeps Claude Code's own session id; resuming the record
	// resumes Claude Code's session with it (--resume)
	ext := rig.StopResumed(sid, "PONG(model=claude-mock-1): what did I ask first?", "hi-from-claude")
	assert.Regexp(t, `^[0-9a-f-]{36}$`, ext)

	lb, err := rig.RT.ListBackends(rig.Ctx, rig.Scope)
	require.NoError(t, err)
	require.Len(t, lb.Backends, 1)
	assert.True(t, lb.Backends[0].Availability.Available)
	assert.Equal(t, claudecode.PinnedVersion, lb.Backends[0].Availability.Version)
}
