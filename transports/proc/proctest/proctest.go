// Package proctest finds processes the way the containment tests assert on
// them: by a marker in argv and by process group, zombies left out (a
// killed process whose parent is gone may wait for a reaper, but it runs
// nothing). It reads /proc through github.com/prometheus/procfs.
package proctest

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"

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
