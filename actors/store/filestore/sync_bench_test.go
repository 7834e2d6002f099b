//go:build linux

package filestore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// syncWrite is the size of one group commit in the bench's native and
// sessions runs: a few events and a record, about 1.2 KiB.
const syncWrite = 1200

// BenchmarkSyncKinds measures what one durable WAL group commit costs on
// this disk, by the way the log is written and synced:
//
//   - append/fsync: the file grows by each write, fsync(2);
//   - append/fdatasync: the file grows, fdatasync(2) (the new size is
//     metadata a reader needs, so the journal commits anyway);
//   - fallocate/fdatasync: writes land in space fallocate(2) reserved:
//     the size is set, but the extents are unwritten and each first write
//     converts one (a journal commit);
//   - zeros/fdatasync: writes land on zeros already written and synced (the
//     WAL's walAhead): no metadata changes, no journal commit;
//   - zeros/fsync: the same writes, fsync(2) (commits the mtime change).
//
// Each iteration writes and syncs once in every kind, in turn, so the
// kinds share the machine's load minute by minute (the machine is shared:
// a block of one kind, then a block of the next, would compare two loads).
// The metrics are each kind's mean per write and sync and its ratio to
// append/fsync; ns/op is one round of all five
// (go test -run '^$' -bench SyncKinds -benchtime 2000x ./actors/store/filestore/).
func BenchmarkSyncKinds(b *testing.B) {
	data := make([]byte, syncWrite)
	for i := range data {
		data[i] = 'x'
	}
	const region = 64 << 20 // the checkpoint size: the WAL never grows past it
	fsync := func(f *os.File) error { return f.Sync() }
	fdatasync := func(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
	zeros := func(f *os.File) error {
		// written in 1 MiB pieces, as zeroAhead keeps them, then synced
		z := make([]byte, 1<<20)
		for off := int64(0); off < region; off += int64(len(z)) {
			if _, err := f.WriteAt(z, off); err != nil {
				return err
			}
		}
		return f.Sync()
	}
	fallocate := func(f *os.File) error {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, region); err != nil {
			return err
		}
		return f.Sync()
	}
	kinds := []struct {
		name    string
		prepare func(f *os.File) error
		sync    func(f *os.File) error
		f       *os.File
		spent   time.Duration
	}{
		{name: "append/fsync", sync: fsync},
		{name: "append/fdatasync", sync: fdatasync},
		{name: "fallocate/fdatasync", prepare: fallocate, sync: fdatasync},
		{name: "zeros/fdatasync", prepare: zeros, sync: fdatasync},
		{name: "zeros/fsync", prepare: zeros, sync: fsync},
	}
	dir := b.TempDir()
	for i := range kinds {
		k := &kinds[i]
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("log%d", i)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if k.prepare != nil {
			if err := k.prepare(f); err != nil {
				b.Skipf("%s: cannot prepare the file: %v", k.name, err)
			}
		}
		k.f = f
	}
	var off int64
	n := 0
	for b.Loop() {
		if off+syncWrite > region {
			b.Fatal("past the prepared region: lower -benchtime")
		}
		for i := range kinds {
			k := &kinds[i]
			t0 := time.Now()
			if _, err := k.f.WriteAt(data, off); err != nil {
				b.Fatal(err)
			}
			if err := k.sync(k.f); err != nil {
				b.Fatal(err)
			}
			k.spent += time.Since(t0)
		}
		off += syncWrite
		n++
	}
	base := kinds[0].spent
	for _, k := range kinds {
		b.ReportMetric(float64(k.spent.Nanoseconds())/float64(n), "ns/"+k.name)
		if k.name != kinds[0].name {
			b.ReportMetric(float64(k.spent)/float64(base), "x/"+k.name)
		}
	}
}
