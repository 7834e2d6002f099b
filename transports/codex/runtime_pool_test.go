package codex_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/runtimetest"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/codex"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc/proctest"
)

// TestRuntimeWarmPoolAdoptsAndCloseDrains runs the warm pool through
// actors.Runtime and its containment: the second start adopts the
// app-server pooled after the first session's turn (its pooled CODEX_HOME
// now links to the second session's), and Runtime.Close leaves no process
// of any session or of the pool (checked by process group), no record and
// no pooled CODEX_HOME.
func TestRuntimeWarmPoolAdoptsAndCloseDrains(t *testing.T) {
	bin := codex.CodexBinaryForTest(t)
	root := t.TempDir()
	tr := codex.New(codex.WithBinary(bin), codex.WithHomeRoot(root), codex.WithWarmPool(1))
	t.Cleanup(func() { tr.DrainWarm(nil) })
	rig := runtimetest.New(t, "codex-warm", runtimetest.Config{
		Backend: tr,
		Env: func(mock *modelmock.Server) map[string]string {
			return map[string]string{codex.EnvBaseURL: mock.URL() + "/v1", codex.EnvAPIKey: "sk-mock"}
		},
	})
	turn := func(model string, p messages.Posture) string {
		t.Helper()
		sid := rig.StartWith(messages.Start{Brief: "hello", Model: model, InitialPosture: p, MaxPosture: messages.PostureFull})
		assert.Contains(t, rig.Read(sid, messages.KindTurnComplete, false).Text, "model="+model)
		return sid
	}

	first := turn("gpt-5.5", messages.PostureDefault)
	require.Eventually(t, func() bool { return tr.WarmReady() == 1 }, 3*time.Minute, 50*time.Millisecond, "the first turn refilled the pool")
	pooled := proctest.WarmGroups(t, rig.KitDir())
	require.Len(t, pooled, 1)
	warmHomes, _ := filepath.Glob(filepath.Join(root, ".warm-*"))
	require.Len(t, warmHomes, 1)

	second := turn("gpt-5.4", messages.PostureFull)
	link, err := os.Readlink(warmHomes[0])
	require.NoError(t, err, "the pooled CODEX_HOME was adopted")
	assert.Equal(t, filepath.Join(root, second), link, "by the second session")
	for p := range pooled {
		assert.True(t, proctest.GroupAlive(p), "the adopted process runs the second session")
	}
	require.Eventually(t, func() bool { return tr.WarmReady() == 1 }, 3*time.Minute, 50*time.Millisecond, "the second session's turn refilled the pool")

	rig.CloseLeavesNothing(3) // the first session's process, the adopted one and the pooled one
	assert.Equal(t, 0, tr.WarmReady())
	names, err := os.ReadDir(root)
	require.NoError(t, err)
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	assert.ElementsMatch(t, []string{first, second}, got, "the sessions' CODEX_HOMEs and nothing of the pool")
	for _, n := range got {
		assert.False(t, strings.HasPrefix(n, ".warm-"))
	}
}
