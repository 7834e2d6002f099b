package filestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// The write-ahead log is one file, <home>/wal/log, shared by every session
// of the home. Each record is a frame:
//
//	uint32 payload length | uint32 CRC-32C of the payload | payload
//	payload: kind (1 byte) | session id length (1 byte) | session id | body
//
// kind 'E' (events) has as body the events.jsonl lines of one Append; kind
// 'M' (record) the record's JSON. A frame whose length or checksum does not
// hold ends the log: it is the torn tail of a crash mid-write, and nothing
// after it was acknowledged.
const (
	walDir  = "wal"
	walName = "log"

	frameEvents = 'E'
	frameRecord = 'M'

	frameHeader = 8
	// maxFrame bounds one frame: a batch of events is split by the store
	// into Appends well below it (an event is at most MaxEventBytes).
	maxFrame = 1 << 30

	// DefaultCheckpointBytes is how large the WAL grows before a
	// checkpoint makes the session files durable and truncates it.
	DefaultCheckpointBytes = 64 << 20

	// walAhead is how far past its committed end the log is kept
	// zero-filled (never past the checkpoint size). A group commit that
	// lands on zeros already on disk changes none of the file's metadata,
	// so fdatasync flushes the data alone. An append that grows the file
	// needs a journal commit on ext4, which other writers on the file
	// system can wait for: the agent CLI appending its own transcript
	// beside the session, on the turn's path.
	walAhead = 1 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// frame is one decoded WAL record.
type frame struct {
	kind byte
	sid  string
	body []byte
}

func encodeFrame(kind byte, sid string, body []byte) []byte {
	n := 2 + len(sid) + len(body)
	b := make([]byte, frameHeader+n)
	p := b[frameHeader:]
	p[0], p[1] = kind, byte(len(sid))
	copy(p[2:], sid)
	copy(p[2+len(sid):], body)
	sealFrame(b)
	return b
}

// sealFrame writes the length and checksum of the one frame b holds, its
// kind, session id and body already in place after the header.
func sealFrame(b []byte) {
	p := b[frameHeader:]
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(p, crcTable))
}

// frameBody returns the body of the first frame in b (a sealed frame).
func frameBody(b []byte) []byte {
	p := b[frameHeader : frameHeader+int(binary.LittleEndian.Uint32(b[0:4]))]
	return p[2+int(p[1]):]
}

// readFrames decodes the WAL's frames up to the first one that does not
// hold; good is where that one starts (the end of the good prefix).
func readFrames(r io.Reader) (frames []frame, good int64, err error) {
	var hdr [frameHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return frames, good, nil
			}
			return nil, 0, err
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n < 2 || n > maxFrame {
			// zeros here are the space the log keeps ahead (walAhead)
			return frames, good, nil
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return frames, good, nil
			}
			return nil, 0, err
		}
		if crc32.Checksum(p, crcTable) != binary.LittleEndian.Uint32(hdr[4:8]) {
			return frames, good, nil
		}
		sl := int(p[1])
		if 2+sl > len(p) || (p[0] != frameEvents && p[0] != frameRecord) {
			return frames, good, nil
		}
		frames = append(frames, frame{kind: p[0], sid: string(p[2 : 2+sl]), body: p[2+sl:]})
		good += int64(frameHeader) + int64(n)
	}
}

// walReq is one request waiting for its group commit: its frames, and
// what the store does around the commit.
type walReq struct {
	frame []byte
	done  chan error
	// stale, when set, is asked by the loop before the group is written:
	// true drops the request with errStale (an earlier request it depends
	// on failed after it was queued).
	stale func() bool
	// settle, when set, is told the outcome by the loop, in queue order,
	// before the next group is written.
	settle func(ok bool)
	// apply, when set, applies a committed request to the session files;
	// the applier runs it, in commit order, before answering done.
	apply func()
}

// wal is the group-committing writer: callers queue frames and wait; one
// goroutine writes everything queued with one write and one fsync, then
// answers them all. A failed write or sync is cut back off the file, so a
// frame is either committed and acknowledged or not in the log at all.
type wal struct {
	path   string // where the log is (f may have been opened under another name and renamed)
	f      *os.File
	size   int64  // end of the committed frames
	zeroed int64  // the file is zeros from size to here (none when <= size)
	zeros  []byte // zeroAhead's source, kept: it is only ever read
	noSync bool
	// fault, when set (tests), is consulted before each group's write.
	fault func() error
	// syncFault, when set (tests), is consulted before each fsync of the
	// log: a non-nil result fails that fsync, which is then not made.
	syncFault func(syncPoint) error
	// checkpointEvery is how much the log grows between checkpoints;
	// checkpointAt the size past which the loop checkpoints: it moves
	// checkpointEvery past the end after a failed checkpoint, and back to
	// checkpointEvery once one succeeds.
	checkpointEvery int64
	checkpointAt    int64
	checkpoint      func() error
	onCommit        func(frames, bytes int)

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*walReq
	closing bool
	broken  error // the file could not be cut back after a failed write
	stopped chan struct{}
	// applying counts committed requests whose session files are not yet
	// written; a checkpoint waits for them.
	applying sync.WaitGroup
	// committed carries committed groups from the loop to the applier,
	// which applies them in order and answers their callers, while the
	// loop writes and syncs the next group.
	committed chan []*walReq
}

func openWAL(path string, noSync bool) (*wal, []frame, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, 0, err
	}
	frames, good, err := readFrames(io.NewSectionReader(f, 0, 1<<62))
	if err != nil {
		_ = f.Close()
		return nil, nil, 0, err
	}
	torn, err := tornBytes(f, good)
	if err != nil {
		_ = f.Close()
		return nil, nil, 0, err
	}
	// what follows the good frames is not counted as zeroed: a torn frame
	// may be there (Open's checkpoint empties the file anyway)
	w := &wal{path: path, f: f, size: good, zeroed: good, noSync: noSync, stopped: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	return w, frames, torn, nil
}

// tornBytes is how much of the file after good holds anything but zeros:
// the torn frame of a crash mid-write (zeros are the space kept ahead).
func tornBytes(f *os.File, good int64) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var torn int64
	buf := make([]byte, 64<<10)
	for off := good; off < fi.Size(); {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), fi.Size()-off)], off)
		for i := n - 1; i >= 0; i-- {
			if buf[i] != 0 {
				torn = off + int64(i) + 1 - good
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if n == 0 {
			break
		}
		off += int64(n)
	}
	return torn, nil
}

func (w *wal) start() {
	w.committed = make(chan []*walReq, 64)
	applied := make(chan struct{})
	go w.applier(applied)
	go w.loop(applied)
}

// enqueue queues a request and returns at once; req.done answers it. Once
// queued, a request is never cancelled by a timer: its fate is decided by
// the disk.
func (w *wal) enqueue(req *walReq) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return errWALClosed
	}
	w.queue = append(w.queue, req)
	w.cond.Signal()
	return nil
}

var (
	errWALClosed = errors.New("the write-ahead log is closed")
	errStale     = errors.New("an earlier write of the session failed after this one was queued")
)

// applier applies committed groups in commit order and answers them.
func (w *wal) applier(done chan<- struct{}) {
	defer close(done)
	for batch := range w.committed {
		for _, r := range batch {
			if r.apply != nil {
				r.apply()
			}
			w.applying.Done()
			r.done <- nil
		}
	}
}

func (w *wal) loop(applied <-chan struct{}) {
	defer close(w.stopped)
	defer func() { close(w.committed); <-applied }()
	var buf []byte
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closing {
			w.cond.Wait()
		}
		queued := w.queue
		w.queue = nil
		closing := w.closing
		w.mu.Unlock()
		if len(queued) == 0 && closing {
			return
		}
		batch := queued[:0]
		for _, r := range queued {
			if r.stale != nil && r.stale() {
				r.done <- errStale
				continue
			}
			batch = append(batch, r)
		}
		if len(batch) == 0 {
			continue
		}
		buf = buf[:0]
		for _, r := range batch {
			buf = append(buf, r.frame...)
		}
		err := w.write(buf)
		for _, r := range batch {
			if r.settle != nil {
				r.settle(err == nil)
			}
		}
		if err == nil {
			w.applying.Add(len(batch))
			if w.onCommit != nil {
				w.onCommit(len(batch), len(buf))
			}
			w.committed <- batch
		} else {
			for _, r := range batch {
				r.done <- err
			}
		}
		if err == nil && w.checkpoint != nil && w.checkpointAt > 0 && w.size >= w.checkpointAt {
			w.applying.Wait()
			if cerr := w.checkpoint(); cerr != nil {
				// the WAL keeps everything; the next checkpoint tries again
				w.checkpointAt = w.size + w.checkpointEvery
			} else {
				w.checkpointAt = w.checkpointEvery
			}
		}
		if err == nil {
			// between groups, never on a waiting caller's write
			w.zeroAhead()
		}
	}
}

// zeroAhead keeps zeros on disk ahead of the committed end, so the groups
// that land on them need only an fdatasync. It runs when less than half
// of walAhead is left; a failure (no space) only means the next groups
// grow the file, with an fsync each, as they would without it.
func (w *wal) zeroAhead() {
	if w.noSync || w.broken != nil {
		return
	}
	ahead := int64(walAhead)
	if w.checkpointEvery > 0 {
		ahead = min(ahead, w.checkpointEvery)
	}
	from := max(w.zeroed, w.size)
	if from-w.size >= ahead/2 {
		return
	}
	to := w.size + ahead
	if int64(len(w.zeros)) < to-from {
		w.zeros = make([]byte, to-from)
	}
	if _, err := w.f.WriteAt(w.zeros[:to-from], from); err != nil {
		_ = w.f.Truncate(from)
		return
	}
	if err := w.sync(atWALZeros, false); err != nil {
		_ = w.f.Truncate(from)
		return
	}
	w.zeroed = to
}

// write appends buf at the committed end and syncs; on failure it cuts the
// file back so the frames are not in the log.
func (w *wal) write(buf []byte) error {
	if w.broken != nil {
		if err := w.cutBack(); err != nil {
			return err
		}
	}
	var err error
	if w.fault != nil {
		err = w.fault()
	}
	end := w.size + int64(len(buf))
	if err == nil {
		_, err = w.f.WriteAt(buf, w.size)
	}
	if err == nil {
		// on zeros already on disk no metadata changes: fdatasync
		err = w.sync(atWALCommit, end <= w.zeroed)
	}
	if err != nil {
		if cerr := w.cutBack(); cerr != nil {
			w.broken = cerr
		}
		return err
	}
	w.size = end
	return nil
}

func (w *wal) cutBack() error {
	w.zeroed = w.size // the zeros ahead go with the failed write
	err := w.f.Truncate(w.size)
	if err == nil {
		err = w.sync(atWALCut, false)
	}
	if err != nil {
		return fmt.Errorf("cannot cut a failed write off the write-ahead log: %w", err)
	}
	w.broken = nil
	return nil
}

// reset empties the log after a checkpoint made everything in it durable
// elsewhere. Only the loop (or Open and Close, with the loop stopped) calls it.
func (w *wal) reset() error {
	if err := w.f.Truncate(0); err != nil {
		return err
	}
	// the file is empty now, whether or not the sync below succeeds: the
	// next frames go at its start, never after a hole a replay stops at
	w.size, w.zeroed = 0, 0
	return w.sync(atWALReset, false)
}

// resetTo empties the log after a checkpoint as reset does, but leaves
// frames (records carried forward) in it: they are written to a new file
// beside the log, synced, and renamed over it, so a crash finds either the
// old log (which holds them too) or the new one. Only the loop (or Open and
// Close, with the loop stopped) calls it.
//
// emptied says the log now holds frames alone (even when a sync after that
// failed).
func (w *wal) resetTo(frames []byte) (emptied bool, err error) {
	if len(frames) == 0 {
		err = w.reset()
		return w.size == 0, err
	}
	path := w.path
	next := path + ".next"
	f, err := os.OpenFile(next, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return false, err
	}
	nw := &wal{path: next, f: f, noSync: w.noSync, syncFault: w.syncFault}
	if _, err = f.WriteAt(frames, 0); err == nil {
		err = nw.sync(atWALReset, false)
	}
	if err == nil {
		err = os.Rename(next, path)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(next)
		return false, err // the old log is intact and holds everything
	}
	_ = w.f.Close()
	w.f, w.size, w.zeroed, w.broken = f, int64(len(frames)), int64(len(frames)), nil
	return true, w.syncDir(filepath.Dir(path))
}

func (w *wal) syncDir(dir string) error {
	if w.syncFault != nil {
		if err := w.syncFault(syncPoint{Kind: atWALDir, Path: dir}); err != nil {
			return err
		}
	}
	if w.noSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// sync makes the log durable: its data alone (fdatasync) when data is
// set, else with its metadata. The tests' fault seam comes first.
func (w *wal) sync(kind string, data bool) error {
	if w.syncFault != nil {
		if err := w.syncFault(syncPoint{Kind: kind, Path: w.path}); err != nil {
			return err
		}
	}
	if w.noSync {
		return nil
	}
	if data {
		return datasync(w.f)
	}
	return w.f.Sync()
}

// stop answers what is queued, then stops the loop.
func (w *wal) stop() {
	w.mu.Lock()
	w.closing = true
	w.cond.Signal()
	w.mu.Unlock()
	<-w.stopped
}
