//go:build unix

package filestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

// The tests here crash the store in every window of a checkpoint that runs
// beside the load (checkpoint.go): at its cut, while the commits go on into
// log.next and the syncfs waits, before, during and after the syncfs,
// before and after the rename of log.next over the log, and after a failed
// syncfs, a full disk at the cut or a failed rename. Writers append (with
// a record naming the seq) all along. The image of the disk at the crash
// (disk_test.go) is reopened: every event and record acknowledged by then
// must be back, each event once and in order.

// loadWriter appends one event at a time to its session from its own
// goroutine, each with the record (its Model names the seq), following the
// store's contract after a failure: re-read LastSeq, write what is missing.
type loadWriter struct {
	sid   string
	acked atomic.Uint64 // the last seq acknowledged (events and record)
}

type checkpointLoad struct {
	t       *testing.T
	st      *filestore.Store
	mu      sync.Mutex // guards ws (the disk's hooks read it)
	ws      []*loadWriter
	stop    chan struct{}
	wg      sync.WaitGroup
	commits atomic.Int64 // WAL commits seen by the disk
}

func newLoad(t *testing.T) *checkpointLoad {
	return &checkpointLoad{t: t, stop: make(chan struct{})}
}

// start creates the sessions, then runs one writer per session.
func (l *checkpointLoad) start(st *filestore.Store, writers int) {
	t := l.t
	ctx := context.Background()
	l.st = st
	recs := make([]messages.SessionRecord, writers)
	ws := make([]*loadWriter, writers)
	for i := range writers {
		recs[i] = storetest.NewRecord(time.Now())
		require.NoError(t, st.Create(ctx, recs[i]))
		ws[i] = &loadWriter{sid: recs[i].SessionID}
	}
	l.mu.Lock()
	l.ws = ws
	l.mu.Unlock()
	for i, w := range ws {
		rec := recs[i]
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				last, err := st.LastSeq(ctx, w.sid)
				if !assert.NoError(t, err) {
					return
				}
				rec.Model = strconv.FormatUint(last+1, 10)
				if err := st.AppendRecord(ctx, w.sid, storetest.NewEvents(last+1, 1), rec); err != nil {
					var e *messages.Error
					if !assert.ErrorAs(t, err, &e) || !assert.Equal(t, messages.CodeUnavailable, e.Code, "%v", err) {
						return
					}
					time.Sleep(time.Millisecond) // refused: the disk failed; try again
					continue
				}
				w.acked.Store(last + 1)
			}
		}()
	}
}

func (l *checkpointLoad) end() {
	close(l.stop)
	l.wg.Wait()
}

// acked is each writer's last acknowledged seq, at the instant it is read.
func (l *checkpointLoad) acked() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]uint64, len(l.ws))
	for i, w := range l.ws {
		out[i] = w.acked.Load()
	}
	return out
}

// requireBack opens the crashed home and checks each writer's events
// (gapless from 1, each once, at least up to what was acknowledged at the
// crash) and record (at least as new).
func (l *checkpointLoad) requireBack(home string, acked []uint64) {
	t := l.t
	t.Helper()
	ctx := context.Background()
	st := open(t, home)
	for i, w := range l.ws {
		evs, err := st.ReadEvents(ctx, w.sid, 0, 0)
		require.NoError(t, err, "session %d", i)
		require.GreaterOrEqual(t, len(evs), int(acked[i]), "session %d: every acknowledged event is back", i)
		require.Equal(t, storetest.NormalizeEvents(storetest.NewEvents(1, len(evs))), storetest.NormalizeEvents(evs),
			"session %d: gapless, each once", i)
		rec, err := st.GetMeta(ctx, w.sid)
		require.NoError(t, err)
		n, _ := strconv.ParseUint(rec.Model, 10, 64)
		require.GreaterOrEqual(t, n, acked[i], "session %d: the last acknowledged record is back (or a newer one)", i)
		require.LessOrEqual(t, n, uint64(len(evs)), "session %d: no record without its events", i)
	}
}

func isNext(p filestore.SyncPoint) bool { return strings.HasSuffix(p.Path, ".next") }

// crashCase is one window: the fault and gate functions see every fsync
// (and the rename) from the first checkpoint after the load started on;
// crash says when to take the image (after the point is decided).
type crashCase struct {
	name string
	// hold keeps the checkpoint's syncfs (or its per-file fsyncs) back
	// until this many commits landed in log.next, so the window holds
	// acknowledged frames in both files
	hold int
	// holdCut is the checkpoint whose syncfs hold keeps back (1 unless set)
	holdCut int32
	// fault fails a point (the nth of its kind, counted from the first
	// checkpoint on)
	fault func(p filestore.SyncPoint, n map[string]int) error
	// crash decides, once each point is decided, whether to take the
	// image now; files says which log files it must hold (proof the
	// window was hit)
	crash func(p filestore.SyncPoint, err error, n map[string]int) bool
	files []string
	// syncfsOnly: the case fails or crashes at the syncfs itself
	syncfsOnly bool
}

var errNoSpace = &os.PathError{Op: "write", Path: "wal", Err: syscall.ENOSPC}

func checkpointCrashCases() []crashCase {
	commitsInNext := func(k int) func(p filestore.SyncPoint, _ error, n map[string]int) bool {
		return func(p filestore.SyncPoint, _ error, n map[string]int) bool {
			return p.Kind == filestore.SyncWALCommit && isNext(p) && n["next-commit"] == k
		}
	}
	return []crashCase{
		{name: "at the cut, before the carried records in log.next are synced",
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALReset && isNext(p)
			}, fault: func(p filestore.SyncPoint, n map[string]int) error {
				if p.Kind == filestore.SyncWALReset && isNext(p) {
					return errIO // the image is taken with it unsynced; the cut then fails
				}
				return nil
			}, files: []string{"log", "log.next"}}, // the one made ahead: zeros
		{name: "while the next log.next is made, before its entry is synced",
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALDir && n[filestore.SyncWALSwitch] == 1 && n[filestore.SyncWALDir] == 2
			}, fault: func(p filestore.SyncPoint, n map[string]int) error {
				if p.Kind == filestore.SyncWALDir && n[filestore.SyncWALSwitch] == 1 && n[filestore.SyncWALDir] == 2 {
					return errIO
				}
				return nil
			}, files: []string{"log"}},
		{name: "commits into the log.next made ahead, while the second syncfs waits", hold: 1 << 30, holdCut: 2,
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALCommit && isNext(p) && n[filestore.SyncWALReset] == 2 && n["commit-after-reset"] == 20
			}, files: []string{"log", "log.next"}},
		{name: "commits into log.next while the syncfs waits", hold: 1 << 30,
			crash: commitsInNext(20), files: []string{"log", "log.next"}},
		{name: "before the syncfs", syncfsOnly: true, hold: 20,
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncFS && n[filestore.SyncFS] == 1
			}, fault: func(p filestore.SyncPoint, n map[string]int) error {
				if p.Kind == filestore.SyncFS && n[filestore.SyncFS] == 1 {
					return errIO // not made (the image is taken without it)
				}
				return nil
			}, files: []string{"log", "log.next"}},
		{name: "during the syncfs", syncfsOnly: true, hold: 20,
			fault: func(p filestore.SyncPoint, n map[string]int) error {
				if p.Kind == filestore.SyncFS && n[filestore.SyncFS] == 1 {
					return errPartial
				}
				return nil
			},
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncFS && n[filestore.SyncFS] == 1
			}, files: []string{"log", "log.next"}},
		{name: "after the syncfs, before the rename", hold: 20,
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALSwitch
			}, files: []string{"log", "log.next"}},
		{name: "after the rename, before its directory's fsync", hold: 20,
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALDir && n[filestore.SyncWALSwitch] == 1
			}, fault: func(p filestore.SyncPoint, n map[string]int) error {
				if p.Kind == filestore.SyncWALDir && n[filestore.SyncWALSwitch] == 1 && n[filestore.SyncWALDir] == 1 {
					return errIO // the rename is not durable
				}
				return nil
			}, files: []string{"log", "log.next"}},
		{name: "after the rename is durable", hold: 20,
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALDir && n[filestore.SyncWALSwitch] == 1 && err == nil
			}, files: []string{"log"}},
		{name: "commits after the checkpoint", hold: 20,
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALCommit && n[filestore.SyncWALSwitch] == 1 && n["commit-after-switch"] == 20
			}, files: []string{"log", "log.next"}}, // the next one, made ahead
		{name: "syncfs fails, commits go on", syncfsOnly: true, hold: 20,
			fault: func(p filestore.SyncPoint, n map[string]int) error {
				if p.Kind == filestore.SyncFS && n[filestore.SyncFS] == 1 {
					return errIO
				}
				return nil
			},
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALCommit && n[filestore.SyncFS] == 1 && n["commit-after-syncfs"] == 10
			}, files: []string{"log", "log.next"}},
		{name: "syncfs fails, the retry empties the log", syncfsOnly: true, hold: 20,
			fault: func(p filestore.SyncPoint, n map[string]int) error {
				if p.Kind == filestore.SyncFS && n[filestore.SyncFS] == 1 {
					return errIO
				}
				return nil
			},
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALCommit && n[filestore.SyncFS] == 2 && n["commit-after-syncfs"] == 5
			}, files: []string{"log"}},
		{name: "no space for log.next at the cut",
			fault: func(p filestore.SyncPoint, n map[string]int) error {
				if p.Kind == filestore.SyncWALReset && isNext(p) && n[filestore.SyncWALReset] == 1 {
					return errNoSpace
				}
				return nil
			},
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALCommit && n[filestore.SyncWALReset] == 1 && n["commit-after-reset"] == 20
			}, files: []string{"log", "log.next"}}, // its removal not yet durable
		{name: "the rename fails", hold: 20,
			fault: func(p filestore.SyncPoint, n map[string]int) error {
				if p.Kind == filestore.SyncWALSwitch && n[filestore.SyncWALSwitch] == 1 {
					return errIO
				}
				return nil
			},
			crash: func(p filestore.SyncPoint, err error, n map[string]int) bool {
				return p.Kind == filestore.SyncWALCommit && n[filestore.SyncWALSwitch] == 1 && n["commit-after-switch"] == 20
			}, files: []string{"log", "log.next"}},
	}
}

// errPartial stands for a syncfs cut short by the crash: the disk makes
// half the files durable (by name), then the image is taken.
var errPartial = &os.PathError{Op: "syncfs", Path: "partial", Err: syscall.EINTR}

func TestCheckpointCrashWindows(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []filestore.Option
	}{{"syncfs", nil}, {"per-file", []filestore.Option{filestore.WithoutSyncFS()}}} {
		t.Run(mode.name, func(t *testing.T) {
			for _, c := range checkpointCrashCases() {
				if mode.name == "per-file" && c.syncfsOnly {
					continue // the per-file fsyncs' failures are TestCrashAfterFailedCheckpoint's
				}
				t.Run(c.name, func(t *testing.T) { runCrashCase(t, c, mode.opts) })
			}
		})
	}
}

func runCrashCase(t *testing.T, c crashCase, opts []filestore.Option) {
	home := t.TempDir()
	d := newDisk(t, home)
	var (
		armed   atomic.Bool // from the first checkpoint after the load started
		n       = map[string]int{}
		image   string
		acked   []uint64
		release = make(chan struct{})
		once    sync.Once
		cuts    atomic.Int32
	)
	holdCut := max(c.holdCut, 1)
	load := newLoad(t)
	crashed := make(chan struct{})
	held := func(p filestore.SyncPoint) bool {
		switch p.Kind {
		case filestore.SyncFS, filestore.SyncLog, filestore.SyncMeta, filestore.SyncDir:
			return true
		}
		return false
	}
	d.setGate(func(p filestore.SyncPoint) {
		if c.hold > 0 && cuts.Load() >= holdCut && held(p) {
			<-release // the syncfs waits; the commits go on
		}
	})
	d.setFault(func(p filestore.SyncPoint) (error, bool) {
		if p.Kind == filestore.SyncWALReset && isNext(p) {
			armed.Store(true)
			cuts.Add(1)
		}
		if !armed.Load() {
			return nil, false
		}
		n[p.Kind]++
		if c.fault != nil {
			if err := c.fault(p, n); err != nil {
				if err == errPartial {
					d.syncSome(func(path string) bool { return len(path)%2 == 0 })
				}
				return err, false
			}
		}
		return nil, false
	})
	d.setAfter(func(p filestore.SyncPoint, err error) {
		if !armed.Load() {
			return
		}
		// the commits since the last point of each kind
		switch p.Kind {
		case filestore.SyncWALSwitch:
			n["commit-after-switch"] = 0
		case filestore.SyncFS:
			n["commit-after-syncfs"] = 0
		case filestore.SyncWALReset:
			n["commit-after-reset"] = 0
		}
		if p.Kind == filestore.SyncWALCommit && err == nil {
			if isNext(p) {
				n["next-commit"]++
			}
			for _, k := range []string{"switch", "syncfs", "reset"} {
				n["commit-after-"+k]++
			}
			if c.hold > 0 && cuts.Load() >= holdCut && n["commit-after-reset"] >= c.hold {
				once.Do(func() { close(release) })
			}
		}
		if image == "" && c.crash(p, err, n) {
			image = d.crashLocked()
			acked = load.acked()
			close(crashed)
			once.Do(func() { close(release) })
		}
	})
	st := crashStore(t, home, d, append(opts, filestore.WithCheckpointBytes(256<<10))...)
	load.start(st, 4)
	select {
	case <-crashed:
	case <-time.After(time.Minute):
		d.mu.Lock()
		seen := fmt.Sprint(n)
		d.mu.Unlock()
		once.Do(func() { close(release) })
		load.end()
		t.Fatalf("the crash point never came (points seen: %v)", seen)
	}
	load.end()
	var have []string
	for _, name := range []string{"log", "log.next"} {
		if _, err := os.Stat(filepath.Join(image, "wal", name)); err == nil {
			have = append(have, name)
		}
	}
	for i, a := range acked {
		require.Positive(t, a, "writer %d had acknowledged appends at the crash", i)
	}
	load.requireBack(image, acked)
	require.Equal(t, c.files, have, "the crash came in the window: the log files on disk")
}

// TestReplayCarriedRecords: a checkpoint commits the records it carries
// into log.next after the cut, so a session's newer record frames can
// precede its carried one there. A replay takes the carried record over
// the records of log (an earlier file), never over a record frame of its
// own file, whatever the order.
func TestReplayCarriedRecords(t *testing.T) {
	ctx := context.Background()
	recAt := func(sid, model string) []byte {
		rec := storetest.NewRecord(time.Now())
		rec.SessionID, rec.Model = sid, model
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		return append(b, '\n')
	}
	for _, c := range []struct {
		name      string
		log, next []string // frames: "M:<model>" or "C:<model>"
		want      string
	}{
		{"carried over an earlier file", []string{"M:0"}, []string{"C:1"}, "1"},
		{"a newer frame before the carried one", []string{"M:0"}, []string{"M:2", "C:1"}, "2"},
		{"a newer frame after the carried one", []string{"M:0"}, []string{"C:1", "M:2"}, "2"},
		{"the carried of the later file", []string{"C:0", "M:1"}, []string{"C:2"}, "2"},
		{"one file, a newer frame first", []string{"M:2", "C:1"}, nil, "2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			sid := seed(t, home, 0)
			write := func(name string, frames []string) {
				var b []byte
				for _, f := range frames {
					b = append(b, filestore.EncodeRecordFrame(sid, recAt(sid, f[2:]), f[0] == 'C')...)
				}
				require.NoError(t, os.WriteFile(filepath.Join(home, "wal", name), b, 0o600))
			}
			write("log", c.log)
			if c.next != nil {
				write("log.next", c.next)
			}
			st := open(t, home)
			rec, err := st.GetMeta(ctx, sid)
			require.NoError(t, err)
			assert.Equal(t, c.want, rec.Model)
		})
	}
}
