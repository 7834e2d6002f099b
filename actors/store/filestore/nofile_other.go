//go:build !unix

package filestore

// nofile reports no limit where there is no RLIMIT_NOFILE.
func nofile() (uint64, bool) { return 0, false }
