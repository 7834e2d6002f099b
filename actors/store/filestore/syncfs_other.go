//go:build !linux

package filestore

import "os"

// haveSyncFS: syncfs(2) is not available here; checkpoints fsync file by file.
const haveSyncFS = false

func syncFS(string) error { return nil }

// datasync is an fsync here.
func datasync(f *os.File) error { return f.Sync() }
