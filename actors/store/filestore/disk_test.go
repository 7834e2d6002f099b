//go:build unix

package filestore_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/filestore"
)

// disk models what of a home has reached the disk, driven by the store's
// fsync seam (filestore.WithSyncFault): a crash keeps exactly what the
// fsyncs made durable and nothing the process only held in its page cache
// or its memory.
//
//   - A file's content is durable as of its last successful fsync (by
//     inode, so a meta.json renamed over keeps its temp file's content).
//   - A directory's entries are durable as of its last successful fsync; a
//     file whose entry never was is gone after the crash.
//   - syncfs makes everything under the home durable.
//   - A failed fsync loses what it was to write: the bytes that differ from
//     the durable content read back as zeros from then on, the file's size
//     kept (a failed writeback can drop the dirty pages, and a later fsync
//     of the same file then succeeds without them: "fsyncgate"). A fault
//     can instead land: the fsync's data reaches the disk, and the error is
//     reported anyway.
//   - A failed syncfs loses the unsynced bytes of every file the same way,
//     and the next fsync of a file it lost bytes of fails (Linux reports a
//     writeback error to each open file once): a WAL commit whose pages it
//     dropped is refused, never acknowledged without them.
//   - The rename that ends a checkpoint (SyncWALSwitch, not an fsync) is
//     durable with its directory's next fsync, as any entry is.
//
// Everything present when newDisk runs counts as durable.
type disk struct {
	t    *testing.T
	home string
	// fault decides each fsync: nil lets it succeed; lands says the data
	// reached the disk although err is returned.
	fault func(p filestore.SyncPoint) (err error, lands bool)
	// gate, when set, runs before each fsync is decided, without d.mu:
	// it may hold one back while the others go on.
	gate func(p filestore.SyncPoint)
	// after, when set, runs once each fsync is decided, with d.mu held.
	after func(p filestore.SyncPoint, err error)

	mu       sync.Mutex
	poisoned map[uint64]bool             // lost bytes to a failed syncfs: the next fsync fails
	files    map[uint64][]byte           // inode -> durable content
	dirs     map[string]map[string]entry // directory -> durable entries
	calls    []filestore.SyncPoint       // every fsync asked for, in order
}

type entry struct {
	ino uint64
	dir bool
}

func newDisk(t *testing.T, home string) *disk {
	d := &disk{t: t, home: home, files: map[uint64][]byte{}, dirs: map[string]map[string]entry{}}
	d.snapshotAll()
	return d
}

// option is the store option that routes every fsync through d.
func (d *disk) option() filestore.Option { return filestore.WithSyncFault(d.sync) }

// setFault, setGate and setAfter set d's hooks while the store may be
// syncing: the WAL writes its zeros ahead on a goroutine of its own, whose
// fsyncs can come at any time.
func (d *disk) setFault(fn func(p filestore.SyncPoint) (err error, lands bool)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fault = fn
}

func (d *disk) setGate(fn func(p filestore.SyncPoint)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gate = fn
}

func (d *disk) setAfter(fn func(p filestore.SyncPoint, err error)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.after = fn
}

func (d *disk) sync(p filestore.SyncPoint) error {
	d.mu.Lock()
	gate := d.gate
	d.mu.Unlock()
	if gate != nil {
		gate(p)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, p)
	var err error
	lands := false
	if d.fault != nil {
		err, lands = d.fault(p)
	}
	if err == nil && d.takePoison(p) {
		err = errIO
	}
	if d.after != nil {
		defer func() { d.after(p, err) }()
	}
	switch {
	case err == nil || lands:
		d.record(p)
	default:
		d.lose(p)
	}
	return err
}

// count reports how many fsyncs of kind were asked for.
func (d *disk) count(kind string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.countLocked(kind)
}

// countLocked is count for a fault function (d.mu held).
func (d *disk) countLocked(kind string) int {
	n := 0
	for _, c := range d.calls {
		if c.Kind == kind {
			n++
		}
	}
	return n
}

// takePoison reports (once) that p fsyncs a file a failed syncfs lost
// bytes of.
func (d *disk) takePoison(p filestore.SyncPoint) bool {
	switch p.Kind {
	case filestore.SyncFS, filestore.SyncDir, filestore.SyncWALDir, filestore.SyncWALSwitch:
		return false
	}
	fi, err := os.Stat(p.Path)
	if err != nil || !d.poisoned[inode(fi)] {
		return false
	}
	delete(d.poisoned, inode(fi))
	return true
}

func (d *disk) record(p filestore.SyncPoint) {
	switch p.Kind {
	case filestore.SyncWALSwitch:
		// a rename: durable with the directory's next fsync
	case filestore.SyncFS:
		d.snapshotAll()
	case filestore.SyncDir, filestore.SyncWALDir:
		d.snapshotDir(p.Path)
	default:
		d.snapshotFile(p.Path)
	}
}

func (d *disk) lose(p filestore.SyncPoint) {
	switch p.Kind {
	case filestore.SyncWALSwitch:
		// the rename is not made
	case filestore.SyncFS:
		d.walk(func(path string, dir bool) {
			if !dir && d.dropUnsynced(path) {
				fi, err := os.Stat(path)
				require.NoError(d.t, err)
				if d.poisoned == nil {
					d.poisoned = map[uint64]bool{}
				}
				d.poisoned[inode(fi)] = true
			}
		})
	case filestore.SyncDir, filestore.SyncWALDir:
		// the entries keep their last durable state
	default:
		d.dropUnsynced(p.Path)
	}
}

func (d *disk) walk(fn func(path string, dir bool)) {
	err := filepath.WalkDir(d.home, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fn(path, e.IsDir())
		return nil
	})
	require.NoError(d.t, err)
}

func (d *disk) snapshotAll() {
	d.walk(func(path string, dir bool) {
		if dir {
			d.snapshotDir(path)
		} else {
			d.snapshotFile(path)
		}
	})
}

func inode(fi fs.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }

func (d *disk) snapshotFile(path string) {
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return
	}
	require.NoError(d.t, err)
	b, err := os.ReadFile(path)
	require.NoError(d.t, err)
	d.files[inode(fi)] = b
}

func (d *disk) snapshotDir(path string) {
	es, err := os.ReadDir(path)
	if os.IsNotExist(err) {
		return
	}
	require.NoError(d.t, err)
	m := map[string]entry{}
	for _, e := range es {
		fi, err := e.Info()
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(d.t, err)
		m[e.Name()] = entry{ino: inode(fi), dir: e.IsDir()}
	}
	d.dirs[path] = m
}

// dropUnsynced zeroes the bytes of path that differ from its durable
// content, keeping its size; it reports whether there were any.
func (d *disk) dropUnsynced(path string) (dropped bool) {
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return false
	}
	require.NoError(d.t, err)
	cur, err := os.ReadFile(path)
	require.NoError(d.t, err)
	durable := d.files[inode(fi)]
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(d.t, err)
	defer f.Close()
	for i := 0; i < len(cur); {
		if i < len(durable) && cur[i] == durable[i] {
			i++
			continue
		}
		j := i
		for j < len(cur) && (j >= len(durable) || cur[j] != durable[j]) {
			j++
		}
		_, err := f.WriteAt(make([]byte, j-i), int64(i))
		require.NoError(d.t, err)
		dropped = true
		i = j
	}
	return dropped
}

// crash returns a new home holding only what had reached the disk: the
// store that ran on d.home is simply never used again.
func (d *disk) crash() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crashLocked()
}

// crashLocked is crash for a fault or after function (d.mu held): the
// image of the disk at that instant, while the store runs on.
func (d *disk) crashLocked() string {
	to := d.t.TempDir()
	d.materialize(d.home, to)
	return to
}

// syncSome makes the files under the home for which keep says so durable,
// as a syncfs interrupted partway would have (d.mu held).
func (d *disk) syncSome(keep func(path string) bool) {
	d.walk(func(path string, dir bool) {
		if !keep(path) {
			return
		}
		if dir {
			d.snapshotDir(path)
		} else {
			d.snapshotFile(path)
		}
	})
}

func (d *disk) materialize(from, to string) {
	for name, e := range d.dirs[from] {
		src, dst := filepath.Join(from, name), filepath.Join(to, name)
		if e.dir {
			require.NoError(d.t, os.Mkdir(dst, 0o700))
			d.materialize(src, dst)
			continue
		}
		require.NoError(d.t, os.WriteFile(dst, d.files[e.ino], 0o600))
	}
}
