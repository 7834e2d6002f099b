//go:build !linux

package filestore

// syncFS is not available here: checkpoints fsync file by file.
func syncFS(string) (bool, error) { return false, nil }
