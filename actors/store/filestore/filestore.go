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
	"sync"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

const (
	sessionsDir = "sessions"
	metaName    = "meta.json"
	logName     = "events.jsonl"

	// DefaultMaxOpen is how many append handles a Store keeps open by default.
	DefaultMaxOpen = 256
)

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

// Store is the file-backed store.Store. Build it with Open.
type Store struct {
	dir     string // <home>/sessions
	log     *slog.Logger
	maxOpen int
	noSync  bool // tests only: skip fsyncs

	mu       sync.Mutex // guards the fields below; never held across I/O
	closed   bool
	sessions map[string]*session
	lru      *list.List // of *handle, most recently used first
	open     int        // append handles open, including evicted ones still in use
	repairs  []store.Repair
}

var _ store.Store = (*Store)(nil)

// session is the in-memory state of one session directory.
type session struct {
	id  string
	dir string

	metaMu sync.Mutex // serializes writes of meta.json

	logMu     sync.Mutex // serializes appends and guards the fields below
	loaded    bool       // the tail was checked; size and lastSeq are known
	logExists bool       // events.jsonl exists and its directory entry is synced
	size      int64      // bytes of good lines; the next append lands here
	lastSeq   uint64

	h *handle // open append handle; guarded by Store.mu
}

func (s *session) metaPath() string { return filepath.Join(s.dir, metaName) }
func (s *session) logPath() string  { return filepath.Join(s.dir, logName) }

// handle is an open append handle of one session's log. Store.mu guards busy
// and elem; f is used only by the Append holding the session's logMu.
type handle struct {
	s    *session
	f    *os.File
	busy bool          // an Append is using it
	elem *list.Element // its place in the LRU; nil once evicted
}

// Open opens (creating if needed) the store rooted at home.
func Open(home string, opts ...Option) (*Store, error) {
	dir := filepath.Join(home, sessionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, messages.Wrap(messages.CodeInternal, "store.open", err, "cannot create the sessions directory")
	}
	st := &Store{
		dir:      dir,
		log:      slog.Default(),
		maxOpen:  DefaultMaxOpen,
		sessions: map[string]*session{},
		lru:      list.New(),
	}
	for _, o := range opts {
		o(st)
	}
	return st, nil
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
	s, err := st.session(op, rec.SessionID, true)
	if err != nil {
		return err
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := st.checkOpen(op); err != nil {
		return err
	}
	if _, err := os.Lstat(s.metaPath()); err == nil {
		return messages.Errorf(messages.CodeConflict, op, "session %s already has a record", s.id)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return ioError(op, err, "cannot stat the record of session %s", s.id)
	}
	if err := os.Mkdir(s.dir, 0o700); err == nil {
		if err := st.syncDir(st.dir); err != nil {
			return ioError(op, err, "cannot sync the sessions directory")
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return ioError(op, err, "cannot create the directory of session %s", s.id)
	}
	return st.writeMeta(op, s, rec)
}

// PutMeta atomically replaces an existing record; not_found if absent.
func (st *Store) PutMeta(ctx context.Context, rec messages.SessionRecord) error {
	const op = store.OpPutMeta
	if err := store.CheckContext(ctx, op); err != nil {
		return err
	}
	if err := store.CheckRecord(op, &rec); err != nil {
		return err
	}
	s, err := st.session(op, rec.SessionID, false)
	if err != nil {
		return err
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := st.checkOpen(op); err != nil {
		return err
	}
	if _, err := os.Lstat(s.metaPath()); errors.Is(err, fs.ErrNotExist) {
		return messages.Errorf(messages.CodeNotFound, op, "no record for session %s", s.id)
	} else if err != nil {
		return ioError(op, err, "cannot stat the record of session %s", s.id)
	}
	return st.writeMeta(op, s, rec)
}

// writeMeta replaces meta.json: temp file, fsync, rename, fsync directory.
func (st *Store) writeMeta(op string, s *session, rec messages.SessionRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return messages.Wrap(messages.CodeInvalid, op, err, "cannot encode the record of session "+s.id)
	}
	data = append(data, '\n')
	tmp, err := os.CreateTemp(s.dir, metaName+".tmp-*")
	if err != nil {
		return ioError(op, err, "cannot write the record of session %s", s.id)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return ioError(op, err, "cannot write the record of session %s", s.id)
	}
	if err := st.syncFile(tmp); err != nil {
		return ioError(op, err, "cannot sync the record of session %s", s.id)
	}
	if err := tmp.Close(); err != nil {
		return ioError(op, err, "cannot write the record of session %s", s.id)
	}
	if err := os.Rename(tmp.Name(), s.metaPath()); err != nil {
		return ioError(op, err, "cannot replace the record of session %s", s.id)
	}
	done = true
	if err := st.syncDir(s.dir); err != nil {
		return ioError(op, err, "cannot sync the directory of session %s", s.id)
	}
	return nil
}

// GetMeta reads a record; not_found if absent, internal if it does not parse.
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

// readMeta needs no lock: meta.json is only ever replaced by a rename.
func (st *Store) readMeta(op, sessionID string) (messages.SessionRecord, error) {
	data, err := os.ReadFile(filepath.Join(st.dir, sessionID, metaName))
	if errors.Is(err, fs.ErrNotExist) {
		return messages.SessionRecord{}, messages.Errorf(messages.CodeNotFound, op, "no record for session %s", sessionID)
	}
	if err != nil {
		return messages.SessionRecord{}, ioError(op, err, "cannot read the record of session %s", sessionID)
	}
	var rec messages.SessionRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return messages.SessionRecord{}, messages.Wrap(messages.CodeInternal, op, err,
			fmt.Sprintf("the record of session %s does not parse", sessionID))
	}
	if rec.SessionID != sessionID {
		return messages.SessionRecord{}, messages.Errorf(messages.CodeInternal, op,
			"the record in the directory of session %s names another session", sessionID)
	}
	return rec, nil
}

// List returns every readable record, newest first. A record that cannot be
// read is skipped and logged; only an unreadable sessions directory fails.
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
		if err != nil {
			st.log.Warn("store: skipping a session without a readable record", "session", e.Name(), "err", err)
			continue
		}
		recs = append(recs, rec)
	}
	store.SortNewestFirst(recs)
	return recs, nil
}

// Append writes the batch with one write and one fsync.
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
	buf, err := encodeBatch(op, events)
	if err != nil {
		return err
	}
	defer putBuffer(buf)

	s, err := st.lockLog(op, sessionID)
	if err != nil {
		return err
	}
	defer s.logMu.Unlock()
	if err := store.CheckBatch(op, s.id, s.lastSeq, events); err != nil {
		return err
	}
	h, err := st.acquire(op, s)
	if err != nil {
		return err
	}
	defer st.release(h)

	_, err = h.f.Write(buf.Bytes())
	if err == nil {
		err = st.syncFile(h.f)
	}
	if err == nil && !s.logExists {
		err = st.syncDir(s.dir) // the file is new: make its name durable too
	}
	if err != nil {
		st.rollback(s, h)
		return ioError(op, err, "cannot append to the event log of session %s", s.id)
	}
	s.logExists = true
	s.size += int64(buf.Len())
	s.lastSeq = events[len(events)-1].Seq
	return nil
}

// rollback cuts a failed append back to the last good size. If even that
// fails, the session's cached state is dropped, so the next call reloads it
// from disk and repairs the tail. s.logMu is held and h is busy.
func (st *Store) rollback(s *session, h *handle) {
	err := h.f.Truncate(s.size)
	if err == nil {
		err = st.syncFile(h.f)
	}
	if err == nil {
		return
	}
	st.log.Error("store: cannot roll back a failed append; the log will be checked again on next use",
		"session", s.id, "err", err)
	s.loaded = false
	st.mu.Lock()
	if h.elem != nil {
		st.lru.Remove(h.elem)
		h.elem = nil
		s.h = nil
	}
	st.mu.Unlock()
}

// ReadEvents streams the log up to its last good line, returning the events
// with seq > afterSeq, at most limit of them (limit <= 0: all).
func (st *Store) ReadEvents(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]messages.PersistedEvent, error) {
	const op = store.OpReadEvents
	if err := store.CheckContext(ctx, op); err != nil {
		return nil, err
	}
	if err := store.CheckSessionID(op, sessionID); err != nil {
		return nil, err
	}
	s, err := st.lockLog(op, sessionID)
	if err != nil {
		return nil, err
	}
	// Lines before size are final: appends only add after it, and a rollback
	// only cuts back to it.
	size, last := s.size, s.lastSeq
	s.logMu.Unlock()
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
	r := bufio.NewReaderSize(io.LimitReader(f, size), 64<<10)
	var line []byte
	for lineNo, next := 1, uint64(1); uint64(len(out)) < want; lineNo, next = lineNo+1, next+1 {
		if lineNo%1024 == 0 {
			if err := store.CheckContext(ctx, op); err != nil {
				return nil, err
			}
		}
		line, err = readLine(r, line[:0])
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the log ended before lastSeq
			}
			return nil, st.corrupt(op, s.id, lineNo, err)
		}
		var ev messages.PersistedEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, st.corrupt(op, s.id, lineNo, err)
		}
		if ev.Seq != next {
			return nil, st.corrupt(op, s.id, lineNo, fmt.Errorf("seq %d, want %d", ev.Seq, next))
		}
		if ev.Seq > afterSeq {
			out = append(out, ev)
		}
	}
	return out, nil
}

func (st *Store) corrupt(op, sessionID string, lineNo int, err error) error {
	return messages.Wrap(messages.CodeInternal, op, err,
		fmt.Sprintf("session %s: line %d of %s is corrupt", sessionID, lineNo, logName))
}

var errLineTooLong = fmt.Errorf("line longer than %d bytes", store.MaxEventBytes)

// readLine appends the next line, without its newline, to buf. A final line
// without a newline is returned with io.EOF.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > store.MaxEventBytes+1 {
			return nil, errLineTooLong
		}
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, err
		}
	}
}

// LastSeq returns the seq of the log's last good line, 0 for no log.
func (st *Store) LastSeq(ctx context.Context, sessionID string) (uint64, error) {
	const op = store.OpLastSeq
	if err := store.CheckContext(ctx, op); err != nil {
		return 0, err
	}
	if err := store.CheckSessionID(op, sessionID); err != nil {
		return 0, err
	}
	s, err := st.lockLog(op, sessionID)
	if err != nil {
		return 0, err
	}
	defer s.logMu.Unlock()
	return s.lastSeq, nil
}

// Repairs lists the torn tails cut since Open, in the order they were cut.
func (st *Store) Repairs() []store.Repair {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]store.Repair(nil), st.repairs...)
}

// Close waits for the appends and record writes in flight, closes every
// handle and makes later calls fail (a read already streaming finishes on
// its own descriptor). A second Close returns nil.
func (st *Store) Close() error {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return nil
	}
	st.closed = true
	sessions := make([]*session, 0, len(st.sessions))
	for _, s := range st.sessions {
		sessions = append(sessions, s)
	}
	st.mu.Unlock()

	var errs []error
	for _, s := range sessions {
		s.metaMu.Lock()
		s.logMu.Lock()
		st.mu.Lock()
		h := s.h
		if h != nil {
			st.lru.Remove(h.elem)
			h.elem = nil
			s.h = nil
		}
		st.mu.Unlock()
		if h != nil {
			errs = append(errs, st.closeHandle(h))
		}
		s.logMu.Unlock()
		s.metaMu.Unlock()
	}
	if err := errors.Join(errs...); err != nil {
		return messages.Wrap(messages.CodeInternal, store.OpClose, err, "cannot close the event logs")
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

// lockLog returns the session with its logMu held and its log loaded.
func (st *Store) lockLog(op, id string) (*session, error) {
	s, err := st.session(op, id, false)
	if err != nil {
		return nil, err
	}
	s.logMu.Lock()
	if err := st.checkOpen(op); err != nil {
		s.logMu.Unlock()
		return nil, err
	}
	if !s.loaded {
		if err := st.load(op, s); err != nil {
			s.logMu.Unlock()
			return nil, err
		}
	}
	return s, nil
}

// load checks a log's tail, cutting a torn one, and caches its size and
// last seq. A session with neither a log nor a record is not_found.
func (st *Store) load(op string, s *session) error {
	f, err := os.OpenFile(s.logPath(), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Lstat(s.metaPath()); errors.Is(err, fs.ErrNotExist) {
			return messages.Errorf(messages.CodeNotFound, op, "no session %s", s.id)
		} else if err != nil {
			return ioError(op, err, "cannot stat the record of session %s", s.id)
		}
		s.loaded, s.logExists, s.size, s.lastSeq = true, false, 0, 0
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
	size := fi.Size()
	good, lastSeq, err := goodEnd(f, size)
	if err != nil {
		return ioError(op, err, "cannot read the event log of session %s", s.id)
	}
	if good < size {
		if err := f.Truncate(good); err != nil {
			return ioError(op, err, "cannot cut the torn tail of session %s", s.id)
		}
		if err := st.syncFile(f); err != nil {
			return ioError(op, err, "cannot sync the event log of session %s", s.id)
		}
		r := store.Repair{SessionID: s.id, Offset: good, Bytes: size - good}
		st.mu.Lock()
		st.repairs = append(st.repairs, r)
		st.mu.Unlock()
		st.log.Warn("store: cut a torn tail from an event log",
			"session", s.id, "offset", r.Offset, "bytes", r.Bytes, "lastSeq", lastSeq)
	}
	s.loaded, s.logExists, s.size, s.lastSeq = true, true, good, lastSeq
	return nil
}

// goodEnd finds the end of the log's last good line, scanning back from the
// end: a line is good when it decodes as an event and the line before it
// decodes with the seq just before (or it is the first line and holds seq 1).
// It returns that offset (0 when no line is good) and the line's seq.
func goodEnd(f io.ReaderAt, size int64) (int64, uint64, error) {
	buf := make([]byte, 64<<10)
	nl, err := lastNewline(f, size, buf)
	if err != nil {
		return 0, 0, err
	}
	for end := nl + 1; end > 0; { // end is just past a '\n'
		start, err := lineStart(f, end-1, buf)
		if err != nil {
			return 0, 0, err
		}
		seq, ok, err := lineSeq(f, start, end-1)
		if err != nil {
			return 0, 0, err
		}
		if ok && start == 0 && seq == 1 {
			return end, seq, nil
		}
		if ok && start > 0 {
			pstart, err := lineStart(f, start-1, buf)
			if err != nil {
				return 0, 0, err
			}
			pseq, pok, err := lineSeq(f, pstart, start-1)
			if err != nil {
				return 0, 0, err
			}
			if pok && pseq+1 == seq {
				return end, seq, nil
			}
		}
		end = start
	}
	return 0, 0, nil
}

// lastNewline returns the offset of the last '\n' in f[0:end), or -1.
func lastNewline(f io.ReaderAt, end int64, buf []byte) (int64, error) {
	for end > 0 {
		n := min(int64(len(buf)), end)
		start := end - n
		if _, err := f.ReadAt(buf[:n], start); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i), nil
		}
		end = start
	}
	return -1, nil
}

// lineStart returns where the line ending at end (the offset of its '\n')
// begins.
func lineStart(f io.ReaderAt, end int64, buf []byte) (int64, error) {
	nl, err := lastNewline(f, end, buf)
	return nl + 1, err
}

// lineSeq decodes f[start:end) as an event; ok is false when it does not
// decode, holds seq 0 or is longer than an event may be.
func lineSeq(f io.ReaderAt, start, end int64) (seq uint64, ok bool, err error) {
	n := end - start
	if n <= 0 || n > store.MaxEventBytes {
		return 0, false, nil
	}
	line := make([]byte, n)
	if _, err := f.ReadAt(line, start); err != nil {
		return 0, false, err
	}
	var ev messages.PersistedEvent
	if json.Unmarshal(line, &ev) != nil || ev.Seq == 0 {
		return 0, false, nil
	}
	return ev.Seq, true, nil
}

// acquire returns the session's append handle, opening it if needed and
// evicting the least recently used ones beyond maxOpen. s.logMu is held.
func (st *Store) acquire(op string, s *session) (*handle, error) {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return nil, store.ErrClosed(op)
	}
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
	if st.closed {
		st.mu.Unlock()
		_ = f.Close()
		return nil, store.ErrClosed(op)
	}
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

func (st *Store) syncFile(f *os.File) error {
	if st.noSync {
		return nil
	}
	return f.Sync()
}

func (st *Store) syncDir(dir string) error {
	if st.noSync {
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

// ioError wraps a filesystem failure; the path stays in the cause, out of the
// safe message.
func ioError(op string, err error, format string, args ...any) error {
	return messages.Wrap(messages.CodeInternal, op, err, fmt.Sprintf(format, args...))
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// encodeBatch encodes events as events.jsonl lines into a pooled buffer.
func encodeBatch(op string, events []messages.PersistedEvent) (*bytes.Buffer, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	for _, ev := range events {
		before := buf.Len()
		if err := enc.Encode(ev); err != nil {
			putBuffer(buf)
			return nil, messages.Wrap(messages.CodeInvalid, op, err, fmt.Sprintf("cannot encode event seq %d", ev.Seq))
		}
		if err := store.CheckEventSize(op, ev.Seq, buf.Len()-before-1); err != nil {
			putBuffer(buf)
			return nil, err
		}
	}
	return buf, nil
}

func putBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= 1<<20 {
		bufPool.Put(buf)
	}
}

// MetaPath is where a session's record lives under home.
func MetaPath(home, sessionID string) string {
	return filepath.Join(home, sessionsDir, sessionID, metaName)
}

// EventsPath is where a session's event log lives under home.
func EventsPath(home, sessionID string) string {
	return filepath.Join(home, sessionsDir, sessionID, logName)
}
