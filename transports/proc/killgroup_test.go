package proc_test

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
)

// Group.Kill kills the session's recorded groups, and only the session's.
func TestGroupKillKillsOnlyTheSessionsGroups(t *testing.T) {
	kit, err := proc.NewKit(filepath.Join(t.TempDir(), "procs"), "rt-kill")
	require.NoError(t, err)
	defer kit.Close()
	mine, other := marker(), marker()
	start := func(g *proc.Group, m string) *proc.Handle {
		cmd := exec.Command("sleep", m)
		h, err := g.Start(cmd, proc.Options{})
		require.NoError(t, err)
		go func() { _ = cmd.Wait() }()
		t.Cleanup(func() { h.Kill(false); h.Release() })
		return h
	}
	start(kit.Group("abandoned"), mine)
	start(kit.Group("other"), other)

	assert.Equal(t, 1, kit.Group("abandoned").Kill())
	require.Eventually(t, func() bool { return len(proctest.WithMarker(mine)) == 0 }, time.Minute, 10*time.Millisecond)
	assert.NotEmpty(t, proctest.WithMarker(other), "another session's group is left alone")
	assert.Zero(t, (*proc.Group)(nil).Kill())
}
