package filestore

import (
	"os"

	"golang.org/x/sys/unix"
)

// haveSyncFS: checkpoints make every file durable with one syncfs(2).
const haveSyncFS = true

// syncFS flushes every dirty file and directory of the filesystem holding
// dir with one syncfs(2): a checkpoint of ten thousand session files costs
// one call instead of an fsync per file while the WAL waits.
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

// datasync flushes f's data and only the metadata needed to read it back
// (fdatasync(2)): a write over blocks already allocated and on disk
// commits no journal transaction.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
