package filestore

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

const (
	sessionsDir = "sessions"
	metaName    = "meta.json"
	logName     = "events.jsonl"

	// MinMaxOpen is the least bound DefaultMaxOpen gives (the fixed bound
	// of before issue 35): where the descriptor limit is low or unknown.
	MinMaxOpen = 256
	// CapMaxOpen is the most DefaultMaxOpen gives, however high the limit.
	CapMaxOpen = 1 << 16
)

// DefaultMaxOpen is how many append handles a Store keeps open unless
// WithMaxOpen says otherwise: half the process's soft RLIMIT_NOFILE (which
// the Go runtime raises to the hard limit at start), the other half left
// to everything else the process opens (backends' pipes, connections, the
// WAL, checkpoints' files), within [MinMaxOpen, CapMaxOpen]. Read at each
// call; Open calls it once.
func DefaultMaxOpen() int {
	soft, ok := nofile()
	return maxOpenFor(soft, ok)
}

// maxOpenFor is DefaultMaxOpen for a soft RLIMIT_NOFILE (ok false: unknown).
func maxOpenFor(soft uint64, ok bool) int {
	if !ok {
		return MinMaxOpen
	}
	return int(min(max(soft/2, MinMaxOpen), CapMaxOpen))
}

// Option configures Open.
type Option func(*Store)

// WithMaxOpen bounds the append handles kept open (n < 1 counts as 1). A
// handle in use by an Append is closed when that Append finishes, so the
// bound can be exceeded by the number of Appends running at that moment.
func WithMaxOpen(n int) Option {
	return func(s *Store) { s.maxOpen = max(n, 1) }
}

// WithLogger sets where repairs and skipped records are reported
// (slog.Default() otherwise).
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) {
		if l != nil {
			s.log = l
		}
	}
}

// WithCheckpointBytes sets how large the write-ahead log grows before a
// checkpoint (DefaultCheckpointBytes otherwise; n < 1 checkpoints only at
// Open and Close).
func WithCheckpointBytes(n int64) Option {
	return func(s *Store) { s.checkpointBytes = n }
}

// Store is the file-backed store.Store. Build it with Open.
type Store struct {
	dir      string // <home>/sessions
	walPath  string
	log      *slog.Logger
	maxOpen  int
	noSync   bool         // tests only: skip fsyncs
	walFault func() error // tests only: fail WAL writes
	// logFault, tests only: consulted before each write to an
	// events.jsonl; landed says the write is made anyway (a write that
	// lands but reports an error)
	logFault func() (err error, landed bool)
	// metaFault, tests only: consulted before each meta.json the meta
	// writer writes (metawriter.go), as logFault; it may panic
	metaFault       func() (err error, landed bool)
	syncFault       func(syncPoint) error // tests only: fail fsyncs
	noSyncFS        bool                  // tests only: checkpoint file by file
	checkpointBytes int64
	// resync is set by a failed checkpoint (only checkpoints touch it, and
	// they never run concurrently): the next one writes the session files
	// again from the WAL before it syncs them (rewriteFromWAL).
	resync bool
	// carry is set for the checkpoints the WAL loop runs mid-load: the
	// records newer than their meta.json are carried forward into the
	// emptied WAL instead of written to ten thousand meta.json files
	// while every session waits for the loop.
	carry bool

	wal *wal
	// held is how many bytes of committed lines the sessions hold back
	// from their files (writeLines)
	held       atomic.Int64
	metaWrites atomic.Int64
	walCommits atomic.Int64
	// checkpoints the WAL loop ran mid-load, and the time the loop spent
	// in them (no group commit is made meanwhile)
	loopCheckpoints     atomic.Int64
	loopCheckpointNanos atomic.Int64
	// the longest single hold of the loop by a checkpoint
	loopCheckpointMax atomic.Int64

	closeMu sync.Mutex // serializes Close

	// metas writes meta.json at liveness changes off the applier
	// (metawriter.go); metaFileMu keeps its writes and the checkpoints
	// that decide from metaDirty after their sync (checkpoint) apart.
	metas      *metaWriter
	metaFileMu sync.Mutex

	mu       sync.Mutex // guards the fields below; never held across I/O
	closed   bool
	inflight sync.WaitGroup // writes in progress (they need the WAL)
	sessions map[string]*session
	dirty    map[*session]struct{} // touched since the last checkpoint
	// dirtyGen counts the dirty sets taken (written under mu): a session
	// whose dirtyIn is dirtyGen+1 is in the current one
	dirtyGen atomic.Uint64
	lru      *list.List // of *handle, most recently used first
	open     int        // append handles open, including evicted ones still in use
	repairs  []store.Repair
}

var _ store.Store = (*Store)(nil)

// session is the in-memory state of one session directory.
type session struct {
	id  string
	dir string

	// opMu serializes the writes of one session (Create, PutMeta, Append)
	// and is held across their WAL commit; mu is never held across one.
	opMu sync.Mutex

	mu      sync.Mutex // guards the fields below
	loaded  bool       // the log was scanned; the fields below are known
	exists  bool       // events.jsonl exists
	size    int64      // bytes of good lines in events.jsonl
	fileSeq uint64     // seq of the file's last line
	lastSeq uint64     // highest committed seq (fileSeq plus what is behind)
	// committed is the last seq the WAL committed (lastSeq once applied);
	// tail the last seq queued (committed or not): a batch must start
	// after it. A failed commit moves tail back to committed and epoch on,
	// which makes every batch queued after the failed one stale.
	committed uint64
	tail      uint64
	epoch     uint64
	index     []int64 // seq -> offset, every indexEvery lines
	corrupt   error   // a corrupt middle line: reads fail, appends are refused
	// behind holds committed lines not yet in events.jsonl: held back to
	// be written with the next ones (writeLines), or refused by the file.
	// They are written before anything else reads or syncs the file.
	behind []byte
	// walBase is where events.jsonl ended when the WAL was last emptied
	// (or when it was first loaded since): every line after it is in the
	// WAL, in order. based says it was set.
	walBase int64
	based   bool
	// cut is a torn tail cut off events.jsonl whose fsync failed: the next
	// load syncs the file before it reports the repair, whatever it finds.
	cut *store.Repair

	rec          *messages.SessionRecord // the latest committed record
	recJSON      []byte                  // its encoding, as meta.json holds it
	metaDirty    bool                    // rec is newer than meta.json
	recGen       uint64                  // counts the records applied: a meta.json write is of one of them
	metaQueued   bool                    // queued on the meta.json writer (metaWriter)
	dirtyIn      uint64                  // Store.dirtyGen+1 of the dirty set it was last added to (markDirty)
	metaUnsynced bool                    // meta.json written since the last checkpoint
	logUnsynced  bool                    // events.jsonl written since the last checkpoint

	h *handle // open append handle; guarded by Store.mu
}

func (s *session) metaPath() string { return filepath.Join(s.dir, metaName) }
func (s *session) logPath() string  { return filepath.Join(s.dir, logName) }

// handle is an open append handle of one session's log. Store.mu guards busy
// and elem; f is used only with the session's mu held.
type handle struct {
	s    *session
	f    *os.File
	busy bool          // an append is using it
	elem *list.Element // its place in the LRU; nil once evicted
}

// Open opens (creating if needed) the store rooted at home, replays the
// write-ahead log into the session files and checkpoints.
func Open(home string, opts ...Option) (*Store, error) {
	const op = "store.open"
	dir := filepath.Join(home, sessionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, messages.Wrap(messages.CodeInternal, op, err, "cannot create the sessions directory")
	}
	wdir := filepath.Join(home, walDir)
	if err := os.MkdirAll(wdir, 0o700); err != nil {
		return nil, messages.Wrap(messages.CodeInternal, op, err, "cannot create the write-ahead log directory")
	}
	st := &Store{
		dir:             dir,
		walPath:         filepath.Join(wdir, walName),
		log:             slog.Default(),
		maxOpen:         DefaultMaxOpen(),
		checkpointBytes: DefaultCheckpointBytes,
		sessions:        map[string]*session{},
		dirty:           map[*session]struct{}{},
		lru:             list.New(),
	}
	for _, o := range opts {
		o(st)
	}
	w, frames, torn, err := openWAL(st.walPath, st.noSync)
	if err != nil {
		return nil, messages.Wrap(messages.CodeInternal, op, err, "cannot open the write-ahead log")
	}
	st.wal = w
	w.syncFault = st.syncFault
	// the directories MkdirAll may just have made and the log's entry in
	// its own: without these a crash can lose the whole log where there is
	// no syncfs (the checkpoint below covers them where there is)
	if err := errors.Join(st.syncDirAs(atDir, home), st.syncDirAs(atWALDir, wdir)); err != nil {
		_ = w.closeFiles()
		return nil, messages.Wrap(messages.CodeInternal, op, err, "cannot sync the store's directories")
	}
	if torn > 0 {
		st.log.Warn("store: the write-ahead log ends in a torn frame (a crash mid-write); it was never acknowledged", "bytes", torn)
	}
	if err := st.replay(frames); err != nil {
		_ = w.closeFiles()
		return nil, messages.Wrap(messages.CodeInternal, op, err, "cannot replay the write-ahead log")
	}
	if err := st.checkpoint(); err != nil {
		_ = w.closeFiles()
		return nil, messages.Wrap(messages.CodeInternal, op, err, "cannot checkpoint after replaying the write-ahead log")
	}
	w.fault = st.walFault
	w.checkpointEvery = st.checkpointBytes
	w.checkpointAt = st.checkpointBytes
	w.checkpoint = func() error {
		st.carry = true
		defer func() { st.carry = false }()
		return st.checkpoint()
	}
	w.cut = st.cutCheckpoint
	w.onHold = st.noteLoopStall
	w.onCommit = func(int, int) { st.walCommits.Add(1) }
	if st.checkpointBytes > 0 {
		// the first checkpoint's walNext (see wal.spare); without it
		// that checkpoint makes its own
		if f, err := w.makeNext(w.spareSize(0)); err == nil {
			w.spare, w.spareZeroed = f, w.spareSize(0)
		}
	}
	// the log's own zeros ahead, laid before any caller waits on a
	// commit: the loop lays them after a group, and on a new or emptied
	// log the first 1 MiB (extending the file) held the loop 5-45 ms on
	// this machine's disk, which the first commits' callers (the first
	// sessions' starts and turns after a boot) waited behind. A failure
	// only leaves them to the loop, as there.
	w.zeroAhead()
	st.metas = newMetaWriter()
	go st.runMetaWriter(st.metas)
	w.start()
	return st, nil
}

// MetaFileWrites reports how many times a meta.json was written since Open
// (create, release, checkpoint): the figure the design keeps at two per
// session.
func (st *Store) MetaFileWrites() int64 { return st.metaWrites.Load() }

// WALCommits reports how many group commits (one write, one fsync each) the
// write-ahead log made since Open.
func (st *Store) WALCommits() int64 { return st.walCommits.Load() }

// LoopCheckpoints reports how many checkpoints the write-ahead log's loop
// started since Open (mid-load, on its size threshold) and how long they
// held the loop: time in which no group commit was made. A checkpoint
// holds it twice, briefly: at its cut and once its syncfs is done; the
// syncfs itself runs beside the commits.
func (st *Store) LoopCheckpoints() (n int64, spent time.Duration) {
	return st.loopCheckpoints.Load(), time.Duration(st.loopCheckpointNanos.Load())
}

// LoopCheckpointMax reports the longest time a checkpoint held the
// write-ahead log's loop at once since Open: the longest commit stall
// checkpoints caused.
func (st *Store) LoopCheckpointMax() time.Duration {
	return time.Duration(st.loopCheckpointMax.Load())
}

// noteLoopStall counts one hold of the WAL loop by a checkpoint; started
// says the hold began one.
func (st *Store) noteLoopStall(d time.Duration, started bool) {
	if started {
		st.loopCheckpoints.Add(1)
	}
	st.loopCheckpointNanos.Add(int64(d))
	for {
		m := st.loopCheckpointMax.Load()
		if int64(d) <= m || st.loopCheckpointMax.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// replay writes what the WAL holds into the session files: a record frame
// becomes meta.json; event frames are rewritten from their first seq on, so
// a session file is exact whatever a crash left in its unsynced tail.
func (st *Store) replay(frames []frame) error {
	if len(frames) == 0 {
		return nil
	}
	type pending struct {
		rec    []byte
		events [][]byte
		// where rec came from: log.next, and a carried frame
		recNext, recCarried bool
	}
	order := []string{}
	bySid := map[string]*pending{}
	for _, f := range frames {
		if !messages.ValidSessionID(f.sid) {
			continue
		}
		p := bySid[f.sid]
		if p == nil {
			p = &pending{}
			bySid[f.sid] = p
			order = append(order, f.sid)
		}
		switch f.kind {
		case frameRecord:
			p.rec, p.recNext, p.recCarried = f.body, f.next, false
		case frameCarried:
			// the record as of a cut: newer than every record of an
			// earlier file, older than every record frame of its own
			if p.rec == nil || p.recCarried || (f.next && !p.recNext) {
				p.rec, p.recNext, p.recCarried = f.body, f.next, true
			}
		default:
			p.events = append(p.events, f.body)
		}
	}
	replayed := 0
	for _, sid := range order {
		p := bySid[sid]
		s := &session{id: sid, dir: filepath.Join(st.dir, sid)}
		st.sessions[sid] = s
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return err
		}
		if p.rec != nil {
			var rec messages.SessionRecord
			if err := json.Unmarshal(p.rec, &rec); err == nil {
				s.rec, s.recJSON, s.metaDirty = &rec, p.rec, true
			}
		}
		st.dirty[s] = struct{}{}
		if len(p.events) == 0 {
			continue
		}
		n, err := st.replayEvents(s, p.events)
		if err != nil {
			return err
		}
		replayed += n
	}
	st.log.Info("store: replayed the write-ahead log", "sessions", len(order), "events", replayed)
	return nil
}

func (st *Store) replayEvents(s *session, bodies [][]byte) (int, error) {
	nl := bytes.IndexByte(bodies[0], '\n')
	first, ok := lineSeqOf(bodies[0][:max(nl, 0)])
	if nl < 0 || !ok {
		return 0, fmt.Errorf("session %s: a WAL frame does not start with an event", s.id)
	}
	f, err := os.OpenFile(s.logPath(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var sc scan // first == 1: the whole file is rewritten
	if first > 1 {
		if sc, err = scanLog(f, fi.Size(), first-1); err != nil {
			return 0, err
		}
	}
	if sc.lastSeq < first-1 {
		// the checkpointed part of the log is damaged: keep it as it is
		s.loaded, s.exists = true, true
		s.size, s.fileSeq, s.lastSeq, s.index = sc.size, sc.lastSeq, sc.lastSeq, sc.index
		s.committed, s.tail = max(s.committed, s.lastSeq), max(s.tail, s.lastSeq)
		s.corrupt = corruptLog(s.id, sc.badLine, fmt.Errorf("events before seq %d (checkpointed) are damaged: %v", first, sc.badReason))
		st.log.Error("store: an event log is corrupt before the part the write-ahead log holds", "session", s.id, "line", sc.badLine)
		return 0, nil
	}
	var buf []byte
	for _, b := range bodies {
		buf = append(buf, b...)
	}
	if err := f.Truncate(sc.size); err != nil {
		return 0, err
	}
	if _, err := f.WriteAt(buf, sc.size); err != nil {
		return 0, err
	}
	n := bytes.Count(buf, []byte{'\n'})
	s.loaded, s.exists = true, true
	s.walBase, s.based = sc.size, true
	s.index = indexLines(sc.index, buf, sc.size, first)
	s.size = sc.size + int64(len(buf))
	s.fileSeq = first - 1 + uint64(n)
	s.lastSeq = s.fileSeq
	s.committed, s.tail = max(s.committed, s.lastSeq), max(s.tail, s.lastSeq)
	s.logUnsynced = true
	return n, nil
}

// checkpoint makes every session file touched since the last checkpoint
// durable (fsync of events.jsonl, meta.json written or synced, directories
// synced), then empties the WAL. On a failure the WAL keeps everything.
//
// A failed checkpoint keeps every session it covered dirty, and the next
// one first writes their files again from the WAL: a failed fsync can drop
// the dirty pages it was to write (Linux marks them clean after a
// writeback error), and a second fsync of the same file then succeeds
// without them. Only the WAL still holds those lines, until it is emptied.
func (st *Store) checkpoint() error {
	// it reads metaDirty after its sync to choose the records it carries
	// forward: no meta.json write may clear it in between
	st.metaFileMu.Lock()
	defer st.metaFileMu.Unlock()
	st.mu.Lock()
	dirty := st.takeDirty()
	st.mu.Unlock()
	var err error
	if st.resync {
		err = st.rewriteFromWAL(dirty)
	}
	if err == nil {
		err = st.syncDirty(dirty)
	}
	if err != nil {
		st.mu.Lock()
		for s := range dirty {
			st.dirty[s] = struct{}{}
		}
		st.mu.Unlock()
		st.resync = true
		st.log.Warn("store: checkpoint failed; the write-ahead log keeps everything", "err", err)
		return err
	}
	st.resync = false
	var carried []byte
	var carriedBy []*session
	if st.carry {
		for s := range dirty {
			s.mu.Lock()
			if s.metaDirty && s.recJSON != nil {
				carried = appendFrame(carried, frameRecord, s.id, s.recJSON)
				carriedBy = append(carriedBy, s)
			}
			s.mu.Unlock()
		}
	}
	// the log may be two files (a checkpoint beside the load failed, or
	// a crash left them): every frame of both is durable now, so log.next
	// replaces the log first, and the emptying below is of one file
	if err := st.wal.collapse(); err != nil {
		st.mu.Lock()
		for s := range dirty {
			st.dirty[s] = struct{}{}
		}
		st.mu.Unlock()
		return err
	}
	emptied, err := st.wal.resetTo(carried)
	if len(carried) > 0 {
		// their records live in the WAL until meta.json is written
		st.mu.Lock()
		for _, s := range carriedBy {
			st.dirty[s] = struct{}{}
		}
		st.mu.Unlock()
	}
	if emptied {
		// emptied (even if its sync failed): the lines so far are durable
		// in the session files, and the WAL holds what follows
		for s := range dirty {
			s.mu.Lock()
			s.walBase, s.based = s.size, true
			s.mu.Unlock()
		}
	}
	return err
}

// syncDirty makes the files of the sessions in dirty durable: one syncfs
// where the system has it, else an fsync per file and directory.
func (st *Store) syncDirty(dirty map[*session]struct{}) error {
	if !st.noSync && haveSyncFS && !st.noSyncFS {
		return st.checkpointSyncFS(dirty)
	}
	var firstErr error
	for s := range dirty {
		if err := st.checkpointSession(s); err != nil && firstErr == nil {
			firstErr = err // the others are still synced: less to redo
		}
	}
	if firstErr != nil {
		return firstErr
	}
	return st.syncDir(st.dir)
}

// rewriteFromWAL writes again, at the same offsets, every line the WAL
// holds into its session's events.jsonl, and marks the records it holds to
// be written again, so the fsyncs that follow have all of it to write
// whatever a failed fsync dropped. The lines are the bytes the files
// already hold (a reader sees no change); sessions it touches join dirty.
func (st *Store) rewriteFromWAL(dirty map[*session]struct{}) error {
	frames, err := st.wal.readAll()
	if err != nil {
		return err
	}
	type pending struct {
		lines []byte
		rec   bool
	}
	order := []string{}
	bySid := map[string]*pending{}
	for _, f := range frames {
		p := bySid[f.sid]
		if p == nil {
			p = &pending{}
			bySid[f.sid] = p
			order = append(order, f.sid)
		}
		if f.kind == frameRecord || f.kind == frameCarried {
			p.rec = true
		} else {
			p.lines = append(p.lines, f.body...)
		}
	}
	for _, sid := range order {
		st.mu.Lock()
		s := st.sessions[sid]
		st.mu.Unlock()
		if s == nil {
			continue // not written since Open's replay, which wrote it
		}
		if err := st.rewriteSession(s, bySid[sid].lines, bySid[sid].rec); err != nil {
			return err
		}
		dirty[s] = struct{}{}
	}
	return nil
}

func (st *Store) rewriteSession(s *session, lines []byte, rec bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec && s.recJSON != nil {
		s.metaDirty = true
	}
	if len(lines) == 0 || s.corrupt != nil {
		return nil
	}
	if err := st.flushBehind(s); err != nil {
		return err
	}
	if !s.based || s.walBase+int64(len(lines)) != s.size {
		return fmt.Errorf("session %s: the write-ahead log's %d bytes of events do not end its log file at %d (from %d)",
			s.id, len(lines), s.size, s.walBase)
	}
	f, err := os.OpenFile(s.logPath(), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(lines, s.walBase)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	s.logUnsynced = true
	return nil
}

// checkpointSyncFS writes what the session files lack (lines held back,
// records newer than meta.json) without fsyncs, then makes all of it durable
// with one syncfs.
func (st *Store) checkpointSyncFS(dirty map[*session]struct{}) error {
	for s := range dirty {
		s.mu.Lock()
		err := st.flushBehind(s)
		if err == nil && s.metaDirty && s.recJSON != nil && !st.carry {
			err = st.writeMetaFile(s, s.recJSON, false)
		}
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if err := st.fsync(atSyncFS, st.dir, func() error { return syncFS(st.dir) }); err != nil {
		return err
	}
	for s := range dirty {
		s.mu.Lock()
		s.metaUnsynced, s.logUnsynced = false, false
		s.metaDirty = s.metaDirty && st.carry && s.recJSON != nil // carried forward
		s.mu.Unlock()
	}
	return nil
}

func (st *Store) checkpointSession(s *session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := st.flushBehind(s); err != nil {
		return err
	}
	if s.logUnsynced {
		if err := st.syncPath(atLog, s.logPath()); err != nil {
			return err
		}
		s.logUnsynced = false
	}
	switch {
	case s.metaDirty && s.recJSON != nil && !st.carry:
		if err := st.writeMetaFile(s, s.recJSON, true); err != nil {
			return err
		}
		s.metaDirty, s.metaUnsynced = false, false
	case s.metaUnsynced:
		if err := st.syncPath(atMeta, s.metaPath()); err != nil {
			return err
		}
		s.metaUnsynced = false
	}
	return st.syncDir(s.dir)
}

func (st *Store) syncPath(kind, path string) error {
	return st.fsync(kind, path, func() error {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// fsync runs do, an fsync of path, unless the store skips fsyncs; the
// tests' fault seam is consulted first, and a non-nil result stands for
// the fsync's failure.
func (st *Store) fsync(kind, path string, do func() error) error {
	if st.syncFault != nil {
		if err := st.syncFault(syncPoint{Kind: kind, Path: path}); err != nil {
			return err
		}
	}
	if st.noSync {
		return nil
	}
	return do()
}

// enter admits a write: it fails once Close has begun; leave ends it.
func (st *Store) enter(op string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return store.ErrClosed(op)
	}
	st.inflight.Add(1)
	return nil
}

func (st *Store) leave() { st.inflight.Done() }

func (st *Store) markDirty(s *session) {
	// (s.mu held) already in the current dirty set: nothing to take the
	// store-wide lock for. The applier marks a session at every commit,
	// and waiting for st.mu behind ten thousand sessions' appends, then
	// for a P once it was free, was most of the applier's time runnable
	// (an execution trace of bench sessions). A session found in the
	// current set here may be taken by a checkpoint right after: its
	// write came first, so that checkpoint covers it.
	if s.dirtyIn == st.dirtyGen.Load()+1 {
		return
	}
	st.mu.Lock()
	st.dirty[s] = struct{}{}
	s.dirtyIn = st.dirtyGen.Load() + 1
	st.mu.Unlock()
}

// takeDirty hands over the dirty set and starts a new one (st.mu held);
// the generation moves on, so markDirty adds each session to the new one.
func (st *Store) takeDirty() map[*session]struct{} {
	dirty := st.dirty
	st.dirty = map[*session]struct{}{}
	st.dirtyGen.Add(1)
	return dirty
}

// commitFrame puts one sealed frame through the WAL and waits: apply runs once it is
// durable, in commit order with every other request. A failure is
// unavailable (the disk refused: full, read-only, failing), and the frame
// is not in the log.
func (st *Store) commitFrame(op, sid string, frame []byte, apply func()) error {
	req, done := waitReq(frame, apply)
	if err := st.wal.enqueue(req); err != nil {
		return walError(op, sid, err)
	}
	return walError(op, sid, <-done)
}

func walError(op, sid string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errWALClosed):
		return store.ErrClosed(op)
	default:
		return unavailable(op, err, "the write-ahead log refused the write for session %s", sid)
	}
}

// unavailable wraps a failure of the disk: retryable, with the cause named
// (no space left, read-only filesystem) but no path.
func unavailable(op string, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg += ": " + errno.Error()
	}
	return &messages.Error{Code: messages.CodeUnavailable, Op: op, Message: msg, Retryable: true, Err: err}
}

func corruptLog(sid string, line int, why error) error {
	return &messages.Error{Code: messages.CodeCorrupt, Op: store.OpReadEvents,
		Message: fmt.Sprintf("session %s: line %d of %s is corrupt (%v); the log is kept as it is and not appended to", sid, line, logName, why)}
}

// encodeRecord encodes a record compactly, as its WAL frame holds it: a
// record rides with most appends, and MarshalIndent cost 3x Marshal (about
// a third of the store's CPU per append at 10,000 sessions) and doubled
// the frame. meta.json, written at create, release and checkpoints, is
// indented from it (writeMetaFile). The encoding is appendRecordJSON's
// (json.Marshal's bytes) in a slice of its own size: the session keeps it
// until the record changes again.
func encodeRecord(op string, rec *messages.SessionRecord) ([]byte, error) {
	var data []byte
	if err := recordJSON(rec, func(b []byte) { data = slices.Clone(b) }); err != nil {
		return nil, recordError(op, rec, err)
	}
	return data, nil
}

// encodeRecordFrame is a record's WAL frame for a commit of its own
// (Create, PutMeta) and its encoding, which is the frame's body: the
// session keeps that in place of a copy (the WAL only reads a frame).
func encodeRecordFrame(op string, rec *messages.SessionRecord) (frame, data []byte, err error) {
	if err := recordJSON(rec, func(b []byte) { frame = encodeFrame(frameRecord, rec.SessionID, b) }); err != nil {
		return nil, nil, recordError(op, rec, err)
	}
	return frame, frameBody(frame), nil
}

func recordError(op string, rec *messages.SessionRecord, err error) error {
	return messages.Wrap(messages.CodeInvalid, op, err, "cannot encode the record of session "+rec.SessionID)
}

// Create writes a new record; conflict if the session already has one.
func (st *Store) Create(ctx context.Context, rec messages.SessionRecord) error {
	const op = store.OpCreate
	if err := store.CheckContext(ctx, op); err != nil {
		return err
	}
	if err := store.CheckRecord(op, &rec); err != nil {
		return err
	}
	frame, data, err := encodeRecordFrame(op, &rec)
	if err != nil {
		return err
	}
	if err := st.enter(op); err != nil {
		return err
	}
	defer st.leave()
	s, err := st.session(op, rec.SessionID, true)
	if err != nil {
		return err
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	has := s.rec != nil
	s.mu.Unlock()
	if has {
		return messages.Errorf(messages.CodeConflict, op, "session %s already has a record", s.id)
	}
	if _, err := os.Lstat(s.metaPath()); err == nil {
		return messages.Errorf(messages.CodeConflict, op, "session %s already has a record", s.id)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return ioError(op, err, "cannot stat the record of session %s", s.id)
	}
	// the directory first: a failure here leaves nothing in the WAL
	if err := os.Mkdir(s.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return unavailable(op, err, "cannot create the directory of session %s", s.id)
	}
	// copied here, not by the applier, which answers every session's
	// appends
	c := rec.Clone()
	return st.commitFrame(op, s.id, frame, func() { st.applyRecord(s, &c, data, true) })
}

// applyRecord caches a committed record and has meta.json written (by the
// meta writer, off this goroutine: metawriter.go) when its liveness
// changes on an existing record (release, resume); other changes,
// a create included, wait for the next checkpoint. The record is durable
// in the WAL either way: GetMeta and List read it from memory, a crash
// replays it into meta.json, and the checkpoints mid-load carry it forward
// into the emptied WAL. So a create does not write the file: nothing reads
// it before the next checkpoint, and it would be written on the applier's
// goroutine, which every commit's answer waits behind (the create and
// release writes were a third of that goroutine's CPU in bench sessions).
// rec is the store's own copy (its caller cloned it off this goroutine):
// the session keeps it.
func (st *Store) applyRecord(s *session, rec *messages.SessionRecord, data []byte, create bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.rec
	s.rec, s.recJSON = rec, data
	s.recGen++
	s.metaDirty = true
	if !create && (prev == nil || prev.Status.Live() != rec.Status.Live()) && !s.metaQueued {
		// written by the meta.json writer, not here: every answer
		// queued behind this one waits for the applier
		s.metaQueued = true
		st.metas.add(s)
	}
	st.markDirty(s)
}

// PutMeta replaces an existing record; not_found if absent.
func (st *Store) PutMeta(ctx context.Context, rec messages.SessionRecord) error {
	const op = store.OpPutMeta
	if err := store.CheckContext(ctx, op); err != nil {
		return err
	}
	if err := store.CheckRecord(op, &rec); err != nil {
		return err
	}
	frame, data, err := encodeRecordFrame(op, &rec)
	if err != nil {
		return err
	}
	if err := st.enter(op); err != nil {
		return err
	}
	defer st.leave()
	s, err := st.session(op, rec.SessionID, false)
	if err != nil {
		return err
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	has := s.rec != nil
	s.mu.Unlock()
	if !has {
		if _, err := os.Lstat(s.metaPath()); errors.Is(err, fs.ErrNotExist) {
			return messages.Errorf(messages.CodeNotFound, op, "no record for session %s", s.id)
		} else if err != nil {
			return ioError(op, err, "cannot stat the record of session %s", s.id)
		}
	}
	c := rec.Clone() // as Create's
	return st.commitFrame(op, s.id, frame, func() { st.applyRecord(s, &c, data, false) })
}

// writeMetaFile replaces meta.json: temp file, rename; with sync, the temp
// file and the directory are fsynced too (a checkpoint; otherwise the WAL
// holds the record).
func (st *Store) writeMetaFile(s *session, data []byte, sync bool) error {
	tmp, err := os.CreateTemp(s.dir, metaName+".tmp-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	var indented bytes.Buffer
	if err := json.Indent(&indented, data, "", "  "); err != nil {
		return err
	}
	if _, err := tmp.Write(indented.Bytes()); err != nil {
		return err
	}
	if sync {
		if err := st.syncFile(atMeta, tmp); err != nil {
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.metaPath()); err != nil {
		return err
	}
	done = true
	st.metaWrites.Add(1)
	if sync {
		return st.syncDir(s.dir)
	}
	return nil
}

// GetMeta reads a record; not_found if absent, corrupt if it does not parse.
func (st *Store) GetMeta(ctx context.Context, sessionID string) (messages.SessionRecord, error) {
	const op = store.OpGetMeta
	if err := store.CheckContext(ctx, op); err != nil {
		return messages.SessionRecord{}, err
	}
	if err := store.CheckSessionID(op, sessionID); err != nil {
		return messages.SessionRecord{}, err
	}
	if err := st.checkOpen(op); err != nil {
		return messages.SessionRecord{}, err
	}
	return st.readMeta(op, sessionID)
}

// readMeta returns the cached record, else reads meta.json (no lock needed:
// it is only ever replaced by a rename).
func (st *Store) readMeta(op, sessionID string) (messages.SessionRecord, error) {
	st.mu.Lock()
	s := st.sessions[sessionID]
	st.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		rec := s.rec
		s.mu.Unlock()
		if rec != nil {
			return rec.Clone(), nil
		}
	}
	data, err := os.ReadFile(filepath.Join(st.dir, sessionID, metaName))
	if errors.Is(err, fs.ErrNotExist) {
		return messages.SessionRecord{}, messages.Errorf(messages.CodeNotFound, op, "no record for session %s", sessionID)
	}
	if err != nil {
		return messages.SessionRecord{}, ioError(op, err, "cannot read the record of session %s", sessionID)
	}
	var rec messages.SessionRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return messages.SessionRecord{}, messages.Wrap(messages.CodeCorrupt, op, err,
			fmt.Sprintf("the record of session %s does not parse", sessionID))
	}
	if rec.SessionID != sessionID {
		return messages.SessionRecord{}, messages.Errorf(messages.CodeCorrupt, op,
			"the record in the directory of session %s names another session", sessionID)
	}
	return rec, nil
}

// List returns every readable record, newest first. A record that cannot be
// read is skipped and logged, a directory with no record yet is skipped;
// only an unreadable sessions directory fails.
func (st *Store) List(ctx context.Context) ([]messages.SessionRecord, error) {
	const op = store.OpList
	if err := store.CheckContext(ctx, op); err != nil {
		return nil, err
	}
	if err := st.checkOpen(op); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, ioError(op, err, "cannot read the sessions directory")
	}
	recs := make([]messages.SessionRecord, 0, len(entries))
	for i, e := range entries {
		if i%256 == 255 {
			if err := store.CheckContext(ctx, op); err != nil {
				return nil, err
			}
		}
		if !e.IsDir() || !messages.ValidSessionID(e.Name()) {
			continue // not a session directory (nothing of ours is named otherwise)
		}
		rec, err := st.readMeta(op, e.Name())
		if messages.IsCode(err, messages.CodeNotFound) {
			// a start still provisioning its directory (curation makes it
			// before the record is created), or one refused after it: no
			// session yet, nothing to warn about
			continue
		}
		if err != nil {
			st.log.Warn("store: skipping a session without a readable record", "session", e.Name(), "err", err)
			continue
		}
		recs = append(recs, rec)
	}
	store.SortNewestFirst(recs)
	return recs, nil
}

// Append commits the batch to the WAL (group commit: one fsync for every
// batch that arrived while the previous one synced), then writes it to the
// session's events.jsonl without an fsync.
func (st *Store) Append(ctx context.Context, sessionID string, events []messages.PersistedEvent) error {
	const op = store.OpAppend
	if err := store.CheckContext(ctx, op); err != nil {
		return err
	}
	if err := store.CheckSessionID(op, sessionID); err != nil {
		return err
	}
	if len(events) == 0 {
		return st.checkOpen(op)
	}
	return st.waitAppend(op, sessionID, events, nil)()
}

// applyEvents writes a committed batch to the session (its last seq, its
// events.jsonl).
func (st *Store) applyEvents(s *session, events []messages.PersistedEvent, lines []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastSeq = events[len(events)-1].Seq
	st.writeLines(s, lines)
	st.markDirty(s)
}

// AppendRecord commits the batch and the record in one WAL group (one
// write, one fsync), then applies both as Append and PutMeta do. A crash
// in the middle of the write keeps the events frame and drops the torn
// record frame, or drops both: never the record without its events.
func (st *Store) AppendRecord(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec messages.SessionRecord) error {
	const op = store.OpAppend
	if err := store.CheckContext(ctx, op); err != nil {
		return err
	}
	if err := store.CheckSessionID(op, sessionID); err != nil {
		return err
	}
	if err := store.CheckRecordOf(op, sessionID, &rec); err != nil {
		return err
	}
	if len(events) == 0 {
		return st.PutMeta(ctx, rec)
	}
	return st.waitAppend(op, sessionID, events, &rec)()
}

// StartAppend is store.Pipeliner: it checks the batch (and rec, when not
// nil) as AppendRecord does, queues it on the WAL and returns; wait
// reports the outcome (nil: durable and applied). A batch may start right
// after one of the session still queued: they commit in the order they
// were started, and when one fails every later one of the session queued
// before the failure is known fails too, so a gap is never written.
func (st *Store) StartAppend(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord) (wait func() error) {
	ch := make(chan error, 1)
	st.StartAppendThen(ctx, sessionID, events, rec, func(err error) { ch <- err })
	return func() error {
		err := <-ch
		ch <- err // a second wait gets the same answer
		return err
	}
}

// StartAppendThen is store.Pipeliner: StartAppend with the outcome handed
// to done instead of waited for. done runs once: at once, before the call
// returns, when the batch is refused before it is queued; otherwise on the
// WAL's applier goroutine once the batch is durable and applied (or has
// failed), where a session's batches are answered in the order they were
// started. No goroutine waits for the batch meanwhile.
func (st *Store) StartAppendThen(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord, done func(error)) {
	const op = store.OpAppend
	if err := store.CheckContext(ctx, op); err != nil {
		done(err)
		return
	}
	if err := store.CheckSessionID(op, sessionID); err != nil {
		done(err)
		return
	}
	if rec != nil {
		if err := store.CheckRecordOf(op, sessionID, rec); err != nil {
			done(err)
			return
		}
	}
	if len(events) == 0 {
		st.startEmpty(ctx, op, rec, done)
		return
	}
	st.startAppend(op, sessionID, events, rec, done)
}

// startEmpty is StartAppendThen of no events; apart, so the record copied
// for PutMeta is not in the frame of every append's call (see
// encodeAppend).
//
//go:noinline
func (st *Store) startEmpty(ctx context.Context, op string, rec *messages.SessionRecord, done func(error)) {
	if rec != nil {
		done(st.PutMeta(ctx, *rec))
		return
	}
	done(st.checkOpen(op))
}

// waitAppend starts a checked batch (startAppend) and returns the wait
// for its outcome.
func (st *Store) waitAppend(op, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord) (wait func() error) {
	ch := make(chan error, 1)
	st.startAppend(op, sessionID, events, rec, func(err error) { ch <- err })
	return func() error { return <-ch }
}

// startAppend queues a checked batch on the WAL, with rec (when not nil)
// in the same request and after it, and returns the wait for it. The
// session's opMu is held only while the batch is checked against the
// session's tail (the last seq queued) and queued, never across the
// commit: a session's next batch can join the WAL's next group while this
// one is being synced. Once durable the applier writes the lines to the
// session's events.jsonl without an fsync and applies rec, in commit
// order. done is told the outcome once (see StartAppendThen): before
// startAppend returns when the batch is refused (no lock of the store's
// held), else on the applier.
func (st *Store) startAppend(op, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord, done func(error)) {
	if err := st.queueAppend(op, sessionID, events, rec, done); err != nil {
		done(err)
	}
}

// queueAppend is startAppend up to the queueing: an error means the batch
// was refused and done will not be called.
func (st *Store) queueAppend(op, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord, done func(error)) error {
	buf, data, recCopy, err := encodeAppend(op, sessionID, events, rec)
	if err != nil {
		return err
	}
	return st.queueEncoded(op, sessionID, events, buf, data, recCopy, done)
}

// encodeAppend encodes a batch (and rec, when not nil) into its WAL
// frames, and copies rec. It is called before queueEncoded, not from it:
// the encoding is the deepest part of an append, and queueEncoded's frame
// is large, so on a session's fresh goroutine (the actor library starts
// one per wake-up) the two together grew the stack, a copy of all of it,
// more often (runtime.newstack under queueAppend: 0.26-0.34 s of a
// 10,000-session turns phase).
//
//go:noinline
func encodeAppend(op, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord) (buf *bytes.Buffer, data []byte, recCopy *messages.SessionRecord, err error) {
	if rec != nil {
		if data, err = encodeRecord(op, rec); err != nil {
			return nil, nil, nil, err
		}
		// copied here, on the caller's goroutine, not by the applier,
		// which answers every session's appends: the copy is the record
		// data holds, whatever the caller does with rec once this returns
		recCopy = cloneRecord(rec)
	}
	// the events are encoded once, straight into their WAL frame, whose
	// body is also the lines the applier writes to events.jsonl
	if buf, err = encodeEventsFrame(op, sessionID, events, data); err != nil {
		return nil, nil, nil, err
	}
	return buf, data, recCopy, nil
}

// cloneRecord is rec's copy on the heap; apart, so the record is not
// built in encodeAppend's frame first.
//
//go:noinline
func cloneRecord(rec *messages.SessionRecord) *messages.SessionRecord {
	c := rec.Clone()
	return &c
}

// queueEncoded is queueAppend once the batch is encoded; rec is the store's copy of the batch's record (nil: none).
//
//go:noinline
func (st *Store) queueEncoded(op, sessionID string, events []messages.PersistedEvent, buf *bytes.Buffer, data []byte, rec *messages.SessionRecord, done func(error)) error {
	if err := st.enter(op); err != nil {
		putBuffer(buf)
		return err
	}
	defer st.leave()
	s, err := st.session(op, sessionID, false)
	if err != nil {
		putBuffer(buf)
		return err
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	has := s.rec != nil
	s.mu.Unlock()
	if rec != nil && !has {
		if _, err := os.Lstat(s.metaPath()); errors.Is(err, fs.ErrNotExist) {
			putBuffer(buf)
			return messages.Errorf(messages.CodeNotFound, op, "no record for session %s", s.id)
		} else if err != nil {
			putBuffer(buf)
			return ioError(op, err, "cannot stat the record of session %s", s.id)
		}
	}
	frames, lines := buf.Bytes(), frameBody(buf.Bytes())
	last := events[len(events)-1].Seq
	// check and reserve in one step: a failure of an earlier batch (which
	// moves the tail back and the epoch on) is either seen here or makes
	// this batch stale before it is written
	s.mu.Lock()
	err = st.loadLocked(op, s)
	if err == nil && s.corrupt != nil {
		err = withOp(s.corrupt, op)
	}
	if err == nil {
		err = store.CheckBatch(op, s.id, s.tail, events)
	}
	epoch := s.epoch
	prevTail := s.tail
	if err == nil {
		s.tail = last
	}
	s.mu.Unlock()
	if err != nil {
		putBuffer(buf)
		return err
	}
	req := &appendReq{st: st, s: s, op: op, buf: buf, lines: lines, events: events,
		rec: rec, data: data, epoch: epoch, last: last, answer: done}
	req.walReq = walReq{frame: frames, h: req}
	if err := st.wal.enqueue(&req.walReq); err != nil {
		s.mu.Lock()
		if s.epoch == epoch && s.tail == last {
			s.tail = prevTail
		}
		s.mu.Unlock()
		putBuffer(buf)
		return walError(op, s.id, err)
	}
	return nil
}

// appendReq is one queued append: its WAL request and everything done
// around the commit (walHandler), in one allocation.
type appendReq struct {
	walReq
	st     *Store
	s      *session
	op     string
	buf    *bytes.Buffer // the frames; lines is the events frame's body
	lines  []byte
	events []messages.PersistedEvent
	rec    *messages.SessionRecord // the store's own copy (applyRecord keeps it)
	data   []byte                  // rec's JSON
	epoch  uint64                  // the session's epoch when queued
	last   uint64                  // the batch's last seq
	answer func(error)
}

func (r *appendReq) stale() bool {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.s.epoch != r.epoch
}

func (r *appendReq) settle(ok bool) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case ok:
		s.committed = r.last
	case s.epoch == r.epoch:
		// the first failure: what was queued after it is stale
		s.epoch++
		s.tail = s.committed
	}
}

func (r *appendReq) apply() {
	r.st.applyEvents(r.s, r.events, r.lines)
	if r.rec != nil {
		r.st.applyRecord(r.s, r.rec, r.data, false)
	}
}

func (r *appendReq) done(err error) {
	putBuffer(r.buf) // written to the log and applied, or failed
	r.answer(walError(r.op, r.s.id, err))
}

func withOp(err error, op string) error {
	var e *messages.Error
	if errors.As(err, &e) {
		c := *e
		c.Op = op
		return &c
	}
	return err
}

// writeLines hands committed lines to events.jsonl (s.mu held). They are
// held in s.behind until the session has holdBytes of them (or the store
// holds maxHeldBytes in all), then written with one write: a write per
// session per group commit was most of the applier's time at 10,000
// sessions, for a page-cache copy of lines the WAL already holds durably.
// Everything that looks at the file writes the held lines first (reads,
// checkpoints, Close), so none sees it short; a crash loses only the
// file's copy, which replay rewrites from the WAL. If the file refuses
// the write the lines stay held, warned about, and go with the next.
func (st *Store) writeLines(s *session, b []byte) {
	// the first lines create the file, at once: held back, the creation
	// (the costly part of a first write) would land on a checkpoint's
	// flush, beside its syncfs
	if s.exists && len(s.behind)+len(b) < holdBytes && st.held.Load() < maxHeldBytes {
		st.hold(s, b)
		return
	}
	if len(s.behind) > 0 {
		// what is held goes first, on its own: appended to, the held
		// buffer would outgrow holdBytes and be reallocated, then not go
		// back to heldPool (two allocations each time a session's held
		// lines filled up, on the applier). b is then held in the emptied
		// buffer, or written if it is as large.
		if err := st.flushBehind(s); err != nil {
			st.log.Warn("store: cannot write events.jsonl (the events are safe in the write-ahead log)", "session", s.id, "err", err)
			st.hold(s, b) // after the lines still held, never before them
			return
		}
		if len(b) < holdBytes && st.held.Load() < maxHeldBytes {
			st.hold(s, b)
			return
		}
	}
	if err := st.writeFile(s, b); err != nil {
		st.log.Warn("store: cannot write events.jsonl (the events are safe in the write-ahead log)", "session", s.id, "err", err)
		st.hold(s, b)
	}
}

const (
	// holdBytes is how many bytes of lines a session holds before they
	// are written to its file: a few dozen events of a turn.
	holdBytes = 8 << 10
	// maxHeldBytes bounds the lines held by every session together:
	// past it each session writes what it holds at its next append.
	maxHeldBytes = 32 << 20
)

// heldPool recycles the buffers sessions hold lines in.
var heldPool = sync.Pool{New: func() any { b := make([]byte, 0, holdBytes); return &b }}

// hold adds b to the lines s holds back (s.mu held).
func (st *Store) hold(s *session, b []byte) {
	if s.behind == nil && len(b) < holdBytes {
		s.behind = (*heldPool.Get().(*[]byte))[:0]
	}
	s.behind = append(s.behind, b...)
	st.held.Add(int64(len(b)))
}

// flushBehind writes the lines s holds back (s.mu held).
func (st *Store) flushBehind(s *session) error {
	if len(s.behind) == 0 {
		return nil
	}
	if err := st.writeFile(s, s.behind); err != nil {
		return err
	}
	st.held.Add(-int64(len(s.behind)))
	if cap(s.behind) == holdBytes {
		b := s.behind[:0]
		heldPool.Put(&b)
	}
	s.behind = nil
	return nil
}

func (st *Store) writeFile(s *session, b []byte) error {
	h, err := st.acquire(store.OpAppend, s)
	if err != nil {
		return err
	}
	defer st.release(h)
	if err := st.writeLog(h.f, b); err != nil {
		if terr := h.f.Truncate(s.size); terr != nil {
			s.loaded = false // rescan on next use
		}
		return err
	}
	s.index = indexLines(s.index, b, s.size, s.fileSeq+1)
	s.size += int64(len(b))
	s.fileSeq += uint64(bytes.Count(b, []byte{'\n'}))
	s.exists, s.logUnsynced = true, true
	return nil
}

// writeLog writes b to an events.jsonl, through the tests' fault seam.
func (st *Store) writeLog(f *os.File, b []byte) error {
	var err error
	landed := true
	if st.logFault != nil {
		err, landed = st.logFault()
	}
	if err == nil || landed {
		if _, werr := f.Write(b); werr != nil {
			return werr
		}
	}
	return err
}

// ReadEvents returns the events with seq > afterSeq, at most limit of them
// (limit <= 0: all), starting from the index entry just before afterSeq+1.
func (st *Store) ReadEvents(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]messages.PersistedEvent, error) {
	const op = store.OpReadEvents
	if err := store.CheckContext(ctx, op); err != nil {
		return nil, err
	}
	if err := store.CheckSessionID(op, sessionID); err != nil {
		return nil, err
	}
	if err := st.checkOpen(op); err != nil {
		return nil, err
	}
	s, err := st.session(op, sessionID, false)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	err = st.loadLocked(op, s)
	if err == nil && len(s.behind) > 0 {
		if ferr := st.flushBehind(s); ferr != nil {
			err = unavailable(op, ferr, "events of session %s are not yet in its log file", s.id)
		}
	}
	// Lines before size are final: appends only add after it.
	size, last, corrupt := s.size, s.fileSeq, s.corrupt
	var from int64
	startSeq := uint64(1)
	if err == nil && afterSeq < last {
		k := int(afterSeq / indexEvery)
		if k < len(s.index) {
			from, startSeq = s.index[k], uint64(k)*indexEvery+1
		}
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if corrupt != nil && (limit <= 0 || afterSeq+uint64(limit) > last) {
		return nil, corrupt
	}
	if afterSeq >= last {
		return nil, nil
	}
	f, err := os.Open(s.logPath())
	if err != nil {
		return nil, ioError(op, err, "cannot open the event log of session %s", s.id)
	}
	defer f.Close()

	want := last - afterSeq
	if limit > 0 && uint64(limit) < want {
		want = uint64(limit)
	}
	out := make([]messages.PersistedEvent, 0, min(want, 4096))
	r := bufio.NewReaderSize(io.NewSectionReader(f, from, size-from), 64<<10)
	var line []byte
	for seq := startSeq; uint64(len(out)) < want; seq++ {
		if seq%1024 == 0 {
			if err := store.CheckContext(ctx, op); err != nil {
				return nil, err
			}
		}
		line, err = readLine(r, line[:0])
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the log ended before lastSeq
			}
			return nil, corruptLog(s.id, int(seq), err)
		}
		if seq <= afterSeq {
			continue
		}
		var ev messages.PersistedEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, corruptLog(s.id, int(seq), err)
		}
		if ev.Seq != seq {
			return nil, corruptLog(s.id, int(seq), fmt.Errorf("seq %d, want %d", ev.Seq, seq))
		}
		out = append(out, ev)
	}
	return out, nil
}

// LastSeq returns the highest committed seq, 0 for no log; corrupt for a
// log with a corrupt middle line.
func (st *Store) LastSeq(ctx context.Context, sessionID string) (uint64, error) {
	const op = store.OpLastSeq
	if err := store.CheckContext(ctx, op); err != nil {
		return 0, err
	}
	if err := store.CheckSessionID(op, sessionID); err != nil {
		return 0, err
	}
	if err := st.checkOpen(op); err != nil {
		return 0, err
	}
	s, err := st.session(op, sessionID, false)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := st.loadLocked(op, s); err != nil {
		return 0, err
	}
	if s.corrupt != nil {
		return 0, withOp(s.corrupt, op)
	}
	return s.lastSeq, nil
}

// Repairs lists the torn tails cut since Open, in the order they were cut.
func (st *Store) Repairs() []store.Repair {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]store.Repair(nil), st.repairs...)
}

// Close waits for the writes in flight, stops the WAL, checkpoints, closes
// every handle and makes later calls fail (a read already streaming
// finishes on its own descriptor). A concurrent Close waits for the first;
// a second returns nil.
func (st *Store) Close() error {
	st.closeMu.Lock()
	defer st.closeMu.Unlock()
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return nil
	}
	st.closed = true
	st.mu.Unlock()
	st.inflight.Wait()
	st.wal.stop()
	// after the applier, which queues its writes; what it leaves queued
	// is still metaDirty, and the checkpoint below writes it
	st.metas.stop()
	var errs []error
	if err := st.checkpoint(); err != nil {
		errs = append(errs, err)
	}
	st.wal.dropSpare()
	errs = append(errs, st.wal.closeFiles())

	st.mu.Lock()
	var hs []*handle
	for e := st.lru.Front(); e != nil; e = e.Next() {
		h := e.Value.(*handle)
		h.elem = nil
		h.s.h = nil
		hs = append(hs, h)
	}
	st.lru.Init()
	st.mu.Unlock()
	for _, h := range hs {
		errs = append(errs, st.closeHandle(h))
	}
	if err := errors.Join(errs...); err != nil {
		return messages.Wrap(messages.CodeInternal, store.OpClose, err, "cannot close the store cleanly (the write-ahead log keeps what was not checkpointed)")
	}
	return nil
}

// session returns the state of a session, creating it if create is set or
// the session's directory exists (so unknown ids leave nothing behind).
func (st *Store) session(op, id string, create bool) (*session, error) {
	st.mu.Lock()
	s, closed := st.sessions[id], st.closed
	st.mu.Unlock()
	if closed {
		return nil, store.ErrClosed(op)
	}
	if s != nil {
		return s, nil
	}
	dir := filepath.Join(st.dir, id)
	if !create {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, messages.Errorf(messages.CodeNotFound, op, "no session %s", id)
		} else if err != nil {
			return nil, ioError(op, err, "cannot stat the directory of session %s", id)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, store.ErrClosed(op)
	}
	if s = st.sessions[id]; s == nil {
		s = &session{id: id, dir: dir}
		st.sessions[id] = s
	}
	return s, nil
}

// loadLocked scans a session's log once (s.mu held): a torn tail is cut, a
// corrupt middle line is remembered. A session with neither a log nor a
// record is not_found.
func (st *Store) loadLocked(op string, s *session) error {
	if s.loaded {
		return nil
	}
	f, err := os.OpenFile(s.logPath(), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if s.rec == nil {
			if _, err := os.Lstat(s.metaPath()); errors.Is(err, fs.ErrNotExist) {
				return messages.Errorf(messages.CodeNotFound, op, "no session %s", s.id)
			} else if err != nil {
				return ioError(op, err, "cannot stat the record of session %s", s.id)
			}
		}
		s.loaded, s.exists, s.size, s.fileSeq, s.lastSeq, s.index = true, false, 0, 0, 0, nil
		s.committed, s.tail = max(s.committed, s.lastSeq), max(s.tail, s.lastSeq)
		if !s.based {
			s.walBase, s.based = 0, true
		}
		return nil
	}
	if err != nil {
		return ioError(op, err, "cannot open the event log of session %s", s.id)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ioError(op, err, "cannot stat the event log of session %s", s.id)
	}
	sc, err := scanLog(f, fi.Size(), 0)
	if err != nil {
		return ioError(op, err, "cannot read the event log of session %s", s.id)
	}
	s.corrupt = nil
	cut := s.cut
	if sc.badLine != 0 && sc.intactAft {
		s.corrupt = corruptLog(s.id, sc.badLine, sc.badReason)
		st.log.Error("store: an event log has a corrupt line before intact ones; it is kept as it is and not appended to",
			"session", s.id, "line", sc.badLine, "reason", sc.badReason)
	} else if sc.size < sc.end || cut != nil {
		if err := f.Truncate(sc.size); err != nil {
			return ioError(op, err, "cannot cut the torn tail of session %s", s.id)
		}
		r := store.Repair{SessionID: s.id, Offset: sc.size, Bytes: sc.end - sc.size}
		if cut != nil {
			r = *cut // the file was cut already; its cut was not durable
		}
		if err := st.syncFile(atRepair, f); err != nil {
			// cut in the page cache but maybe not on disk: a crash can
			// bring the tail back, so the cut is not done until synced
			s.cut = &r
			return ioError(op, err, "cannot sync the event log of session %s", s.id)
		}
		s.cut = nil
		st.mu.Lock()
		st.repairs = append(st.repairs, r)
		st.mu.Unlock()
		st.log.Warn("store: cut a torn tail from an event log",
			"session", s.id, "offset", r.Offset, "bytes", r.Bytes, "lastSeq", sc.lastSeq)
	}
	s.loaded, s.exists = true, true
	s.size, s.fileSeq, s.lastSeq, s.index = sc.size, sc.lastSeq, sc.lastSeq, sc.index
	s.committed, s.tail = max(s.committed, s.lastSeq), max(s.tail, s.lastSeq)
	if !s.based {
		s.walBase, s.based = sc.size, true
	}
	return nil
}

// acquire returns the session's append handle, opening it if needed and
// evicting the least recently used ones beyond maxOpen. s.mu is held.
func (st *Store) acquire(op string, s *session) (*handle, error) {
	// no closed check: writes are fenced by enter, and Close's checkpoint
	// may still need a handle; Close closes every handle last
	st.mu.Lock()
	if h := s.h; h != nil {
		h.busy = true
		st.lru.MoveToFront(h.elem)
		st.mu.Unlock()
		return h, nil
	}
	st.mu.Unlock()

	f, err := os.OpenFile(s.logPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, ioError(op, err, "cannot open the event log of session %s", s.id)
	}
	st.mu.Lock()
	h := &handle{s: s, f: f, busy: true}
	h.elem = st.lru.PushFront(h)
	s.h = h
	st.open++
	var idle []*handle
	for st.lru.Len() > st.maxOpen {
		v := st.lru.Remove(st.lru.Back()).(*handle)
		v.elem = nil
		v.s.h = nil
		if !v.busy {
			idle = append(idle, v) // a busy one is closed by its release
		}
	}
	st.mu.Unlock()
	for _, v := range idle {
		if err := st.closeHandle(v); err != nil {
			st.log.Warn("store: cannot close an evicted event log", "session", v.s.id, "err", err)
		}
	}
	return h, nil
}

// release ends an Append's use of h, closing it if it was evicted meanwhile.
func (st *Store) release(h *handle) {
	st.mu.Lock()
	h.busy = false
	evicted := h.elem == nil
	st.mu.Unlock()
	if evicted {
		if err := st.closeHandle(h); err != nil {
			st.log.Warn("store: cannot close an evicted event log", "session", h.s.id, "err", err)
		}
	}
}

func (st *Store) closeHandle(h *handle) error {
	err := h.f.Close()
	st.mu.Lock()
	st.open--
	st.mu.Unlock()
	return err
}

func (st *Store) checkOpen(op string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return store.ErrClosed(op)
	}
	return nil
}

func (st *Store) syncFile(kind string, f *os.File) error {
	return st.fsync(kind, f.Name(), f.Sync)
}

func (st *Store) syncDir(dir string) error { return st.syncDirAs(atDir, dir) }

func (st *Store) syncDirAs(kind, dir string) error {
	return st.fsync(kind, dir, func() error {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// ioError wraps a filesystem failure; the path stays in the cause, out of the
// safe message.
func ioError(op string, err error, format string, args ...any) error {
	return messages.Wrap(messages.CodeInternal, op, err, fmt.Sprintf(format, args...))
}

// encodeEventsFrame encodes events as one WAL events frame of session sid
// into a pooled buffer, the frame of rec (its JSON, when not nil) after it:
// the events frame first, so a torn tail can only cut the record. The
// frame's body is the events.jsonl lines (frameBody finds them), so an
// event is encoded once and not copied into its frame afterwards.
func encodeEventsFrame(op, sid string, events []messages.PersistedEvent, rec []byte) (*bytes.Buffer, error) {
	// a buffer of about the size the frames take: one grown from empty
	// would take several allocations, one much larger holds memory in
	// every append in flight
	frame := frameHeader + 2 + len(sid)
	buf := getBuffer(frame + lineEstimate.room(len(events)) + len(rec) + frame)
	var head [frameHeader + 2]byte
	head[frameHeader], head[frameHeader+1] = frameEvents, byte(len(sid))
	buf.Write(head[:])
	buf.WriteString(sid)
	var enc *json.Encoder // for the events appendEventLine leaves to it
	for i := range events {
		ev := &events[i] // a pointer: the event is not copied into an interface
		before := buf.Len()
		if line, ok := appendEventLine(buf.AvailableBuffer(), ev); ok {
			buf.Write(line) // in place when it fit the room grown for it
		} else {
			if enc == nil {
				enc = json.NewEncoder(buf)
				enc.SetEscapeHTML(false)
			}
			if err := enc.Encode(ev); err != nil {
				putBuffer(buf)
				return nil, messages.Wrap(messages.CodeInvalid, op, err, fmt.Sprintf("cannot encode event seq %d", ev.Seq))
			}
		}
		if err := store.CheckEventSize(op, ev.Seq, buf.Len()-before-1); err != nil {
			putBuffer(buf)
			return nil, err
		}
	}
	sealFrame(buf.Bytes())
	lineEstimate.observe(buf.Len()-frame, len(events)) // the lines alone
	if rec != nil {
		at := buf.Len()
		head[frameHeader] = frameRecord
		buf.Write(head[:])
		buf.WriteString(sid)
		buf.Write(rec)
		sealFrame(buf.Bytes()[at:])
	}
	return buf, nil
}

// MetaPath is where a session's record lives under home.
func MetaPath(home, sessionID string) string {
	return filepath.Join(home, sessionsDir, sessionID, metaName)
}

// EventsPath is where a session's event log lives under home.
func EventsPath(home, sessionID string) string {
	return filepath.Join(home, sessionsDir, sessionID, logName)
}

var _ store.Pipeliner = (*Store)(nil)
