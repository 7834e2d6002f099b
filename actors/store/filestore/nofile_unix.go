//go:build unix

package filestore

import "syscall"

// nofile returns the process's soft RLIMIT_NOFILE.
func nofile() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return uint64(r.Cur), true //nolint:unconvert // int64 on the BSDs
}
