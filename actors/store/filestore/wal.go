package filestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
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
//
// While a checkpoint runs beside the load the log is two files: log, frozen
// at the checkpoint's cut, and log.next, which holds the records carried
// forward and then every frame committed since the cut. The checkpoint ends
// by renaming log.next over log. A replay reads log, then log.next when it
// exists: the two hold every frame since the last completed checkpoint, in
// commit order, so a crash at any point finds each acknowledged frame once.
const (
	walDir  = "wal"
	walName = "log"
	// walNext is the log that follows walName (see above)
	walNext = walName + ".next"

	frameEvents = 'E'
	frameRecord = 'M'
	// frameCarried is a record a checkpoint carried forward: the
	// session's record as of the cut, committed into log.next after the
	// cut, so some of the session's newer record frames may precede it
	// there. A replay takes it over the records of earlier files, never
	// over a record frame of its own file.
	frameCarried = 'C'

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
	// next says the frame is from log.next, which follows log
	next bool
}

// markNext marks frames as log.next's.
func markNext(frames []frame) []frame {
	for i := range frames {
		frames[i].next = true
	}
	return frames
}

func encodeFrame(kind byte, sid string, body []byte) []byte {
	return appendFrame(make([]byte, 0, frameHeader+2+len(sid)+len(body)), kind, sid, body)
}

// appendFrame appends one sealed frame to dst.
func appendFrame(dst []byte, kind byte, sid string, body []byte) []byte {
	at := len(dst)
	dst = append(dst, make([]byte, frameHeader)...)
	dst = append(dst, kind, byte(len(sid)))
	dst = append(dst, sid...)
	dst = append(dst, body...)
	sealFrame(dst[at:])
	return dst
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
		// grown as the bytes come, not sized by the header: a torn
		// header may claim up to maxFrame, and the file end it
		buf := bytes.NewBuffer(make([]byte, 0, min(n, 1<<20)))
		if m, err := buf.ReadFrom(io.LimitReader(r, int64(n))); err != nil {
			return nil, 0, err
		} else if m < int64(n) {
			return frames, good, nil
		}
		p := buf.Bytes()
		if crc32.Checksum(p, crcTable) != binary.LittleEndian.Uint32(hdr[4:8]) {
			return frames, good, nil
		}
		sl := int(p[1])
		if 2+sl > len(p) || (p[0] != frameEvents && p[0] != frameRecord && p[0] != frameCarried) {
			return frames, good, nil
		}
		frames = append(frames, frame{kind: p[0], sid: string(p[2 : 2+sl]), body: p[2+sl:]})
		good += int64(frameHeader) + int64(n)
	}
}

// walReq is one request waiting for its group commit: its frames, and
// what the store does around the commit (h).
type walReq struct {
	frame []byte
	// err is the loop's verdict for the applier (nil: committed)
	err error
	h   walHandler
}

// walHandler is what the store does around one request's commit. It is an
// interface, not four callbacks, so an append's request is one allocation
// (appendReq holds its walReq and is its handler): four closures and the
// request were five allocations per append on the sessions path.
type walHandler interface {
	// stale is asked by the loop before the group is written: true drops
	// the request with errStale (an earlier request it depends on failed
	// after it was queued).
	stale() bool
	// settle is told the outcome by the loop, in queue order, before the
	// next group is written.
	settle(ok bool)
	// apply applies a committed request to the session files; the applier
	// runs it, in commit order, before answering done.
	apply()
	// done is told the request's outcome, once, on the applier's
	// goroutine: nil once the frames are durable and apply has run. Every
	// request is answered there, a failed or stale one too, in the order
	// the loop took them from the queue, so a session's requests are
	// answered in the order they were queued and never before the ones
	// queued earlier are applied. It must not block: every session's
	// answers wait behind it.
	done(err error)
}

// waitHandler answers a request on a channel, applying fn (when set) once
// it is committed; it is never stale and settles nothing.
type waitHandler struct {
	ch chan error
	fn func()
}

func (h *waitHandler) stale() bool  { return false }
func (h *waitHandler) settle(bool)  {}
func (h *waitHandler) done(e error) { h.ch <- e }
func (h *waitHandler) apply() {
	if h.fn != nil {
		h.fn()
	}
}

// waitReq is a request whose caller waits for its answer on the channel.
func waitReq(frame []byte, apply func()) (*walReq, chan error) {
	ch := make(chan error, 1)
	return &walReq{frame: frame, h: &waitHandler{ch: ch, fn: apply}}, ch
}

// wal is the group-committing writer: callers queue frames and wait; one
// goroutine writes everything queued with one write and one fsync, then
// answers them all. A failed write or sync is cut back off the file, so a
// frame is either committed and acknowledged or not in the log at all.
type wal struct {
	base string // <home>/wal/log: the log's name once no checkpoint is under way
	// pathMu guards path against the rename that ends a checkpoint, which
	// runs off the loop: the loop holds it across each fsync it names.
	pathMu sync.Mutex
	path   string // where f is (base, or base's walNext while a checkpoint runs)
	f      *os.File
	// old is the log frozen at a checkpoint's cut (named base) while f,
	// named walNext, takes the commits; nil when the log is one file.
	// oldSize is the end of its frames.
	old     *os.File
	oldSize int64
	// spare is the next checkpoint's walNext, made ahead off the loop:
	// zeros up to spareZeroed, fsynced, its directory entry durable. The
	// cut then writes the carried records over its zeros with an
	// fdatasync, and the commits after it land on zeros too: no metadata
	// changes on the loop, so no journal commit, which waits behind the
	// session files' writeback. Only the loop touches it.
	spare       *os.File
	spareZeroed int64
	size        int64  // end of the committed frames
	zeroed      int64  // the file is zeros from size to here (none when <= size)
	zeros       []byte // zeroAhead's source, kept: it is only ever read
	noSync      bool
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
	// checkpoint runs a whole checkpoint on the loop (the retry after a
	// failed one); cut starts one: it runs on the loop, switches the log
	// to walNext and returns what the applier runs once it has applied
	// every frame before the cut (atCut), the part that runs beside the
	// load (bg) and the part the loop runs with bg's outcome (finish).
	checkpoint func() error
	cut        func() (atCut func(), bg func() error, finish func(error), err error)
	// onHold is told how long each checkpoint step held the loop; started
	// says the step began a checkpoint.
	onHold   func(d time.Duration, started bool)
	onCommit func(frames, bytes int)
	// running is the finish of the checkpoint running beside the load;
	// the loop alone touches it.
	running func(error)

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*walReq
	closing bool
	// ckDone says the running checkpoint's bg has returned ckErr
	ckDone  bool
	ckErr   error
	broken  error // the file could not be cut back after a failed write
	stopped chan struct{}
	// applying counts committed requests whose session files are not yet
	// written; a checkpoint waits for them.
	applying sync.WaitGroup
	// committed carries committed groups from the loop to the applier,
	// which applies them in order and answers their callers, while the
	// loop writes and syncs the next group.
	committed chan []*walReq
	// spent carries the groups' slices back from the applier, emptied, so
	// the queue of the next groups grows into them instead of from nil
	// (at ten thousand sessions a group is thousands of requests, and
	// growing its slice anew each time showed in the profile)
	spent chan []*walReq
}

// openWAL opens the log at path, and the log that follows it (walNext)
// when a crash left one: frames are both's, in replay order.
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
	w := &wal{base: path, path: path, f: f, size: good, noSync: noSync, stopped: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	next := filepath.Join(filepath.Dir(path), walNext)
	if nf, err := os.OpenFile(next, os.O_RDWR, 0); err == nil {
		// a crash during a checkpoint: log holds what came before its
		// cut, log.next what came after (or, from a checkpoint of Open
		// or Close, the records carried forward, which are the latest)
		more, ngood, err := readFrames(io.NewSectionReader(nf, 0, 1<<62))
		switch {
		case err != nil:
			_ = f.Close()
			_ = nf.Close()
			return nil, nil, 0, err
		case ngood == 0:
			// no frame: the one made ahead for the next checkpoint (or
			// a cut whose carried records never became durable, so
			// nothing after them was acknowledged): log is the log
			_ = nf.Close()
		default:
			frames = append(frames, markNext(more)...)
			w.old, w.oldSize = f, good
			w.f, w.path, w.size = nf, next, ngood
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		_ = f.Close()
		return nil, nil, 0, err
	}
	torn, err := tornBytes(w.f, w.size)
	if err != nil {
		w.closeFiles()
		return nil, nil, 0, err
	}
	// what follows the good frames is not counted as zeroed: a torn frame
	// may be there (Open's checkpoint empties the file anyway)
	w.zeroed = w.size
	return w, frames, torn, nil
}

// closeFiles closes the log's files.
func (w *wal) closeFiles() error {
	err := w.f.Close()
	if w.spare != nil {
		_ = w.spare.Close()
		w.spare = nil
	}
	if w.old != nil {
		err = errors.Join(err, w.old.Close())
		w.old = nil
	}
	return err
}

// readAll reads every frame the log holds, both files' while a checkpoint
// runs. Only the loop (or Open and Close, with the loop stopped) calls it.
func (w *wal) readAll() ([]frame, error) {
	var frames []frame
	if w.old != nil {
		old, _, err := readFrames(io.NewSectionReader(w.old, 0, w.oldSize))
		if err != nil {
			return nil, err
		}
		frames = old
	}
	cur, _, err := readFrames(io.NewSectionReader(w.f, 0, w.size))
	if err != nil {
		return nil, err
	}
	if w.old != nil {
		cur = markNext(cur)
	}
	return append(frames, cur...), nil
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
	w.spent = make(chan []*walReq, 4)
	applied := make(chan struct{})
	go w.applier(applied)
	go w.loop(applied)
}

// enqueue queues a request and returns at once; req.h.done answers it. Once
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

// applier applies committed requests in commit order and answers every
// request the loop took, in the order it took them (walHandler.done).
func (w *wal) applier(done chan<- struct{}) {
	defer close(done)
	for batch := range w.committed {
		for _, r := range batch {
			if r.err == nil {
				r.h.apply()
				w.applying.Done()
			}
			r.h.done(r.err)
		}
		clear(batch) // the requests, their frames and callbacks, go
		select {
		case w.spent <- batch[:0]:
		default:
		}
	}
}

func (w *wal) loop(applied <-chan struct{}) {
	defer close(w.stopped)
	defer func() { close(w.committed); <-applied }()
	var buf []byte
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.ckDone && (!w.closing || w.running != nil) {
			// closing waits for a running checkpoint to finish
			w.cond.Wait()
		}
		queued := w.queue
		w.queue = nil
		select {
		case w.queue = <-w.spent:
		default:
		}
		closing := w.closing
		done, ckErr := w.ckDone, w.ckErr
		w.ckDone, w.ckErr = false, nil
		w.mu.Unlock()
		if done {
			w.finishCheckpoint(ckErr)
		}
		if len(queued) == 0 && closing && w.running == nil {
			return
		}
		// queued goes to the applier whole, each request with its
		// verdict: the stale ones are answered in their place, not ahead
		// of the commits queued before them
		n, size := 0, 0
		for _, r := range queued {
			if r.h.stale() {
				r.err = errStale
				continue
			}
			size += len(r.frame)
			n++
		}
		if size > cap(buf) {
			// one allocation with room to spare, not a doubling chain
			// (each step zeroed and copied) while the groups grow
			buf = make([]byte, 0, size+size/2)
		}
		buf = buf[:0]
		for _, r := range queued {
			if r.err == nil {
				buf = append(buf, r.frame...)
			}
		}
		if n == 0 {
			if len(queued) > 0 {
				w.committed <- queued
			}
			continue
		}
		err := w.write(buf)
		for _, r := range queued {
			if r.err != nil {
				continue
			}
			r.h.settle(err == nil)
			r.err = err
		}
		if err == nil {
			w.applying.Add(n)
			if w.onCommit != nil {
				w.onCommit(n, len(buf))
			}
		}
		w.committed <- queued
		if err == nil && w.checkpointAt > 0 && w.size >= w.checkpointAt && w.running == nil {
			w.startCheckpoint()
		}
		if err == nil {
			// between groups, never on a waiting caller's write
			w.zeroAhead()
		}
	}
}

// startCheckpoint begins a checkpoint at the log's committed end (the
// cut): on the loop only what must not race the next commits (the files
// applied up to the cut, the switch to walNext); the syncfs and the
// rename run beside the load, and finishCheckpoint takes their outcome.
// After a failed one the log is still two files and the retry runs here
// whole, as it did before checkpoints left the loop: failures are rare
// and the retry rewrites the session files from both.
func (w *wal) startCheckpoint() {
	if w.checkpoint == nil && w.cut == nil {
		return
	}
	t0 := time.Now()
	var err error
	if w.old != nil || w.cut == nil {
		w.applying.Wait() // the session files hold every frame
		err = w.checkpoint()
	} else {
		var atCut func()
		var bg func() error
		var finish func(error)
		if atCut, bg, finish, err = w.cut(); err == nil {
			// the applier runs atCut between the last group before the
			// cut and the first after it; the loop does not wait for it
			w.applying.Add(1)
			w.committed <- []*walReq{{h: &waitHandler{ch: make(chan error, 1), fn: atCut}}}
			w.running = finish
			go func() {
				err := bg()
				w.mu.Lock()
				w.ckDone, w.ckErr = true, err
				w.cond.Signal()
				w.mu.Unlock()
			}()
		}
	}
	if w.onHold != nil {
		w.onHold(time.Since(t0), true)
	}
	if err != nil {
		// the WAL keeps everything; the next checkpoint tries again
		w.checkpointAt = w.size + w.checkpointEvery
	} else if w.running == nil {
		w.checkpointAt = w.checkpointEvery
	}
}

// finishCheckpoint runs on the loop once the checkpoint running beside the
// load has returned err.
func (w *wal) finishCheckpoint(err error) {
	t0 := time.Now()
	finish := w.running
	w.running = nil
	finish(err)
	if err != nil {
		w.checkpointAt = w.size + w.checkpointEvery
	} else {
		w.checkpointAt = w.checkpointEvery
	}
	if w.onHold != nil {
		w.onHold(time.Since(t0), false)
	}
}

// zeroAhead keeps zeros on disk ahead of the committed end, so the groups
// that land on them need only an fdatasync. It runs at Open and on the
// loop between groups when less than half of walAhead is left; a failure
// (no space) only means the next groups grow the file, with an fsync
// each, as they would without it.
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
	if w.old != nil {
		return errTwoLogs
	}
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
		return w.size == 0 && w.old == nil, err
	}
	if w.old != nil {
		return false, errTwoLogs
	}
	w.dropSpare() // its name is taken below
	// named as the log that follows: a crash before the rename finds it
	// beside the log, and it holds only records newer than the log's
	path := w.path
	next := filepath.Join(filepath.Dir(path), walNext)
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

var errTwoLogs = errors.New("the write-ahead log is two files (a checkpoint is under way): it cannot be emptied")

// beginNext is a checkpoint's cut: it makes walNext, holding frames (the
// records carried forward), durable with its directory entry, and moves
// the commits to it; the log so far stays as w.old. Only the loop calls
// it, between groups. On failure nothing changed.
func (w *wal) beginNext(frames []byte) error {
	// frames is empty for the cuts beside the load: their records are
	// carried by a commit after the cut
	if w.old != nil {
		return errTwoLogs
	}
	next := filepath.Join(filepath.Dir(w.base), walNext)
	f, zeroed := w.spare, w.spareZeroed
	w.spare, w.spareZeroed = nil, 0
	var err error
	if f == nil {
		// none made ahead (the first after a failure): made here
		if f, err = w.makeNext(0); err != nil {
			return err
		}
	}
	nw := &wal{path: next, f: f, noSync: w.noSync, syncFault: w.syncFault}
	if len(frames) > 0 {
		_, err = f.WriteAt(frames, 0)
	}
	if err == nil {
		// over zeros already on disk: its data alone
		err = nw.sync(atWALReset, int64(len(frames)) <= zeroed)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(next)
		return err
	}
	w.pathMu.Lock()
	w.old, w.oldSize = w.f, w.size
	w.f, w.path = f, next
	w.pathMu.Unlock()
	w.size, w.zeroed, w.broken = int64(len(frames)), max(zeroed, int64(len(frames))), nil
	return nil
}

// makeNext creates walNext holding size zeros, durable with its directory
// entry: a crash must never find log without the log.next that follows it
// once a frame in it is acknowledged. A leftover one holds nothing a
// replay reads. It runs off the loop (after a checkpoint's rename, which
// frees the name) or in Open.
func (w *wal) makeNext(size int64) (*os.File, error) {
	next := filepath.Join(filepath.Dir(w.base), walNext)
	f, err := os.OpenFile(next, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if size > 0 {
		_, err = f.WriteAt(make([]byte, size), 0)
	}
	if err == nil {
		nw := &wal{path: next, f: f, noSync: w.noSync, syncFault: w.syncFault}
		err = nw.sync(atWALZeros, false)
	}
	if err == nil {
		err = w.syncDir(filepath.Dir(next))
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(next)
		return nil, err
	}
	return f, nil
}

// spareSize is how many zeros a spare walNext is made with: room for the
// records the last cut carried forward, twice, and the zeros a log keeps
// ahead (never past the checkpoint size, unless the records need it);
// none without syncs.
func (w *wal) spareSize(carried int64) int64 {
	if w.noSync {
		return 0 // without syncs zeros save nothing (the tests' stores)
	}
	ahead := int64(walAhead)
	if w.checkpointEvery > 0 {
		ahead = min(ahead, w.checkpointEvery)
	}
	return 2*carried + ahead
}

// switchNext ends a checkpoint once the session files hold durably every
// frame of w.old: it renames walNext over the log, which drops w.old in one
// step. It runs beside the loop (the rename waits for a commit's fsync in
// progress, which names the file by its path). The directory's fsync after
// it may fail without harm: a crash then finds both files, and replays
// both.
func (w *wal) switchNext() error {
	w.pathMu.Lock()
	next := w.path
	var err error
	if w.syncFault != nil {
		err = w.syncFault(syncPoint{Kind: atWALSwitch, Path: next})
	}
	if err == nil {
		err = os.Rename(next, w.base)
	}
	if err == nil {
		w.path = w.base
	}
	w.pathMu.Unlock()
	if err != nil {
		return err
	}
	_ = w.syncDir(filepath.Dir(w.base))
	return nil
}

// dropSpare closes the spare walNext and removes it (Close, or before
// its name is used otherwise).
func (w *wal) dropSpare() {
	if w.spare != nil {
		_ = w.spare.Close()
		_ = os.Remove(filepath.Join(filepath.Dir(w.base), walNext))
		w.spare, w.spareZeroed = nil, 0
	}
}

// dropOld closes the log a completed checkpoint dropped (switchNext).
// Only the loop calls it.
func (w *wal) dropOld() {
	if w.old != nil {
		_ = w.old.Close()
		w.old, w.oldSize = nil, 0
	}
}

// collapse makes the log one file again after a checkpoint made every
// frame of both durable in the session files, as switchNext does, but on
// the loop (or in Open and Close): the retry of a failed checkpoint, and
// the checkpoints of Open and Close after a crash or a failure left two.
func (w *wal) collapse() error {
	if w.old == nil {
		return nil
	}
	if w.path == w.base {
		w.dropOld() // renamed already
		return nil
	}
	if err := w.switchNext(); err != nil {
		return err
	}
	w.dropOld()
	return nil
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
	w.pathMu.Lock()
	defer w.pathMu.Unlock()
	if w.syncFault != nil {
		if err := w.syncFault(syncPoint{Kind: kind, Path: w.path, DataOnly: data}); err != nil {
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
