package claudecode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/gate"
	"github.com/codesession/codesession/transports/gate/gatetest"
)

// TestGateCheck runs seed 002's gate table through the permission
// questions claude-code asks: the paths each file tool names.
func TestGateCheck(t *testing.T) {
	t.Parallel()
	f := gatetest.New(t)
	ws := f.Workspace(t, true)
	in := func(kv ...string) json.RawMessage {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		tool   string
		input  json.RawMessage
		refuse string
	}{
		{"Write", in("file_path", filepath.Join(f.Real, "new.txt")), ""},
		{"Write", in("file_path", filepath.Join(f.Given, "sub", "new.txt")), ""},
		{"Edit", in("file_path", "file.txt"), ""},
		{"Write", in("file_path", filepath.Join(f.Root, "outside", "x.txt")), gate.ReasonEscapes},
		{"Write", in("file_path", filepath.Join(f.Real, "..", "other", "x.txt")), gate.ReasonEscapes},
		{"Write", in("file_path", filepath.Join(f.Real, "link-out", "new.txt")), gate.ReasonEscapes},
		{"Edit", in("file_path", filepath.Join(f.Real, "escape.txt")), gate.ReasonEscapes},
		{"Write", in("file_path", filepath.Join(f.Real, "dangling.txt")), gate.ReasonDangling},
		{"Write", in("file_path", filepath.Join(f.Real, "deep-chain", "x")), gate.ReasonDangling},
		{"Read", in("file_path", "/etc/passwd"), gate.ReasonEscapes},
		{"Read", in("file_path", filepath.Join(f.Real, "loop1")), gate.ReasonLoop},
		{"NotebookEdit", in("notebook_path", filepath.Join(f.Root, "outside", "n.ipynb")), gate.ReasonEscapes},
		{"Glob", in("pattern", "/etc/*.conf"), gate.ReasonEscapes},
		{"Glob", in("pattern", "**/*.go", "path", f.Real), ""},
		{"Grep", in("pattern", "x", "path", filepath.Join(f.Real, "sub", "upup")), gate.ReasonEscapes},
		{"Write", in("file_path", ""), gate.ReasonEmpty},
		{"Bash", in("command", "touch /tmp/x"), ""}, // not a file tool: the gate does not decide it
	}
	for _, c := range cases {
		err := gateCheck(ws, c.tool, c.input)
		if c.refuse == "" {
			assert.NoError(t, err, "%s %s", c.tool, c.input)
			continue
		}
		var r *gate.Refusal
		if assert.ErrorAs(t, err, &r, "%s %s", c.tool, c.input) {
			assert.Contains(t, r.Error(), c.refuse, "%s %s", c.tool, c.input)
		}
	}
}

// TestLiveGateAtEveryPosture drives the real CLI: a Write outside the
// workspace is refused by the gate before anyone is asked, at default and
// at full (which no longer bypasses the prompts), and the agent sees the
// reason as the tool's result; at full a Write inside runs without a
// question.
func TestLiveGateAtEveryPosture(t *testing.T) {
	t.Parallel()
	f := gatetest.New(t)
	l := newLive(t, nil, liveOpts{posture: messages.PostureFull})
	l.spec.Cwd = f.Given
	l.sess.Close(ctxFor(t, 20*time.Second))
	l.open() // reopen in the fixture's workspace, through its symlink
	ctx := ctxFor(t, 3*time.Minute)

	// Claude Code refuses to write through a symlink by itself, before it
	// asks (its own message); the gate answers every other question.
	outside := []struct {
		path, refusal string
	}{
		{filepath.Join(f.Root, "outside", "from-claude.txt"), "workspace gate refused"},
		{filepath.Join(f.Real, "link-out", "through-link.txt"), "workspace gate refused"},
		{filepath.Join(f.Real, "dangling.txt"), "symbolic link"},
	}
	turn := 0
	for _, posture := range []messages.Posture{messages.PostureFull, messages.PostureDefault} {
		require.NoError(t, l.sess.(*session).SetPosture(ctx, posture))
		for _, o := range outside {
			target := o.path
			turn++
			require.NoError(t, l.sess.StartTurn(ctx, turn, "TOOL:WRITE "+target+" escaped"))
			end := l.rec.turnEnd(t, turn)
			require.Equal(t, messages.TurnCompleted, end.State, dump(l.rec.all()))
			assert.Empty(t, l.rec.ofType(turn, messages.EvClarification), "%s at %s: nobody is asked", target, posture)
			results := l.rec.ofType(turn, messages.EvToolResult)
			require.Len(t, results, 1, dump(l.rec.all()))
			assert.True(t, results[0].IsError)
			assert.Contains(t, results[0].Output, o.refusal, "the agent sees the reason")
			_, err := os.Lstat(filepath.Join(f.Root, "outside", filepath.Base(target)))
			assert.True(t, os.IsNotExist(err), "%s at %s was written", target, posture)
		}
	}
	assert.NoFileExists(t, filepath.Join(f.Real, "missing.txt"), "the dangling link's target was not created")

	// full: inside the workspace, nobody is asked and the write happens
	require.NoError(t, l.sess.(*session).SetPosture(ctx, messages.PostureFull))
	turn++
	inside := filepath.Join(f.Given, "sub", "from-claude.txt")
	require.NoError(t, l.sess.StartTurn(ctx, turn, "TOOL:WRITE "+inside+" inside"))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, turn).State, dump(l.rec.all()))
	assert.Empty(t, l.rec.ofType(turn, messages.EvClarification))
	b, err := os.ReadFile(filepath.Join(f.Real, "sub", "from-claude.txt"))
	require.NoError(t, err)
	assert.Equal(t, "inside", strings.TrimSpace(string(b)))
}
