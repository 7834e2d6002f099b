// Package proctest finds processes the way the containment tests assert on
// them: by a marker in argv and by process group, zombies left out (a
// killed process whose parent is gone may wait for a reaper, but it runs
// nothing). It reads /proc through github.com/prometheus/procfs.
package proctest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/codesession/codesession/transports/proc"
)

func live() []procfs.Proc {
	ps, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	var out []procfs.Proc
	for _, p := range ps {
		st, err := p.Stat()
		if err != nil || st.State == "Z" || st.State == "X" || p.PID == os.Getpid() {
			continue
		}
		out = append(out, p)
	}
	return out
}

// WithMarker lists the live processes whose argv contains marker.
func WithMarker(marker string) []int {
	var out []int
	for _, p := range live() {
		argv, err := p.CmdLine()
		if err != nil {
			continue
		}
		if strings.Contains(strings.Join(argv, " "), marker) {
			out = append(out, p.PID)
		}
	}
	return out
}

// InGroup lists the live processes of process group pgid.
func InGroup(pgid int) []int {
	var out []int
	for _, p := range live() {
		if st, err := p.Stat(); err == nil && st.PGRP == pgid {
			out = append(out, p.PID)
		}
	}
	return out
}

// Pgid is pid's process group, 0 when it is gone.
func Pgid(pid int) int {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return st.PGRP
}

// KillMarker SIGKILLs every live process with marker in argv (cleanup of
// what a test expected to escape).
func KillMarker(marker string) {
	for _, pid := range WithMarker(marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// WriteRecord writes a process record as the kit would.
func WriteRecord(path string, rec proc.Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// GroupAlive says whether a process of group pgid still runs.
func GroupAlive(pgid int) bool { return len(InGroup(pgid)) > 0 }

// Records reads the records a kit keeps in dir (one per live process
// group, and one per session TMPDIR: Pgid 0); one that cannot be decoded
// fails t (the kit writes them whole, by rename), one released while being
// read is left out.
func Records(t testing.TB, dir string) []proc.Record {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatalf("process records in %s: %v", dir, err)
	}
	var out []proc.Record
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // released meanwhile
		}
		var r proc.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("process record %s: %v", f, err)
		}
		out = append(out, r)
	}
	return out
}

// ByPgid is Records of process groups by process group (a session
// TMPDIR's record has none).
func ByPgid(t testing.TB, dir string) map[int]proc.Record {
	t.Helper()
	out := map[int]proc.Record{}
	for _, r := range Records(t, dir) {
		if r.Pgid != 0 {
			out[r.Pgid] = r
		}
	}
	return out
}

// Tmps are the temporary folders the records in dir name (a process
// group's own TMPDIR, a session's TempDir): what the boot sweep removes
// when the runtime that made them died.
func Tmps(t testing.TB, dir string) []proc.Record {
	t.Helper()
	var out []proc.Record
	for _, r := range Records(t, dir) {
		if r.Tmp != "" {
			out = append(out, r)
		}
	}
	return out
}

// WarmGroups is ByPgid of the groups warm pools booted (adopted since or
// not): the pools name their groups "warm-...".
func WarmGroups(t testing.TB, dir string) map[int]proc.Record {
	t.Helper()
	out := ByPgid(t, dir)
	for pgid, r := range out {
		if !strings.HasPrefix(r.SessionID, "warm-") {
			delete(out, pgid)
		}
	}
	return out
}
