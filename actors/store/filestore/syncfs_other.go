//go:build !linux

package filestore

import "os"

// syncFS is not available here: checkpoints fsync file by file.
func syncFS(string) (bool, error) { return false, nil }

// datasync is an fsync here.
func datasync(f *os.File) error { return f.Sync() }
