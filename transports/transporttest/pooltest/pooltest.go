// Package pooltest holds the live checks of a CLI backend's warm pool
// that codex's, droid's and claudecode's tests had copied: the one pooled
// process found (and killed, to show a dead one is never adopted), a drain
// that kills what is pooled and leaves an adopted session's process alone,
// and what an adopting session's containment record must name (the pooled
// process's private TMPDIR and its group's cgroup). The process groups are
// read from a process kit's records (proctest).
package pooltest

import (
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
)

// Wait bounds every wait here: it only stops a hang.
const Wait = 3 * time.Minute

// One requires exactly one pooled process group under kitDir and returns
// it with its record.
func One(t testing.TB, kitDir string) (int, prockit.Record) {
	t.Helper()
	pooled := proctest.WarmGroups(t, kitDir)
	require.Len(t, pooled, 1, "one pooled process group: %v", pooled)
	for pgid, rec := range pooled {
		return pgid, rec
	}
	return 0, prockit.Record{}
}

// KillOne kills the one pooled process group under kitDir while it idles
// and waits until it is gone; it returns the dead group.
func KillOne(t testing.TB, kitDir string) int {
	t.Helper()
	dead, _ := One(t, kitDir)
	require.NoError(t, syscall.Kill(-dead, syscall.SIGKILL))
	require.Eventually(t, func() bool { return !proctest.GroupAlive(dead) }, Wait, 20*time.Millisecond)
	return dead
}

// Drained asserts, after a drain, every group of pooled but adopted killed
// and adopted (a session's process taken from the pool) alive.
func Drained(t testing.TB, pooled map[int]prockit.Record, adopted int) {
	t.Helper()
	for p := range pooled {
		if p == adopted {
			assert.True(t, proctest.GroupAlive(p), "draining the pool leaves an adopted session alone")
			continue
		}
		assert.Eventually(t, func() bool { return !proctest.GroupAlive(p) }, Wait, 20*time.Millisecond, "the pooled process group %d was killed", p)
	}
}

// TmpdirOf is the private TMPDIR (symlinks resolved) proc gave the
// processes of group pgid, from their environment.
func TmpdirOf(t testing.TB, kitDir string, pgid int) string {
	t.Helper()
	envs := proctest.Environs(t, kitDir)
	for _, pid := range proctest.InGroup(pgid) {
		for _, kv := range envs[pid] {
			if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok && strings.Contains(v, "codesession-tmp-") {
				real, err := filepath.EvalSymlinks(v)
				require.NoError(t, err)
				return real
			}
		}
	}
	t.Fatalf("no process of group %d has a private TMPDIR", pgid)
	return ""
}

// AdoptedRecord asserts what the containment record of a session that
// adopted the pooled group pgid (its record rec) names beside its own:
// the pooled process's private TMPDIR tmp and, where the kit has cgroups,
// the pooled group's cgroup. Their rules were built in the pool's group,
// so the session's own group had seen no start: before, its record said
// only what the runtime knew before any start.
func AdoptedRecord(t testing.TB, kit *prockit.Kit, writable []string, tmp string, rec prockit.Record) {
	t.Helper()
	assert.Contains(t, writable, tmp, "the adopting session's record names the pooled process's private TMPDIR")
	if cg := kit.Cgroups().Root; cg != "" {
		assert.True(t, slices.ContainsFunc(writable, func(p string) bool {
			return strings.HasPrefix(p, cg+"/") && filepath.Base(p) == rec.SessionID
		}), "the adopting session's record names the pooled group's cgroup: %v", writable)
	}
}
