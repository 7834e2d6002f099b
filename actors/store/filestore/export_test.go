package filestore

// WithoutSync skips every fsync, for tests whose subject is not durability
// (the fuzz test, ten thousand sessions).
func WithoutSync() Option { return func(s *Store) { s.noSync = true } }

// WithoutSyncFS makes checkpoints fsync file by file, as on systems
// without syncfs(2), so that path is tested on Linux too.
func WithoutSyncFS() Option { return func(s *Store) { s.noSyncFS = true } }

// OpenHandles reports how many append handles are open.
func (st *Store) OpenHandles() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.open
}

// WithWALFault consults fn before each group commit's write: a non-nil
// result fails the whole group as a disk would (ENOSPC, EROFS).
func WithWALFault(fn func() error) Option { return func(s *Store) { s.walFault = fn } }

// WithLogWriteFault consults fn before each write to a session's
// events.jsonl: a non-nil error fails the write, which is made anyway when
// landed is set (it reached the file but reported the failure).
func WithLogWriteFault(fn func() (err error, landed bool)) Option {
	return func(s *Store) { s.logFault = fn }
}

// WithMetaWriteFault consults fn before each meta.json the store writes
// at a liveness change (release, resume): a non-nil error fails the write,
// which is made anyway when landed is set; fn may also panic or block.
func WithMetaWriteFault(fn func() (err error, landed bool)) Option {
	return func(s *Store) { s.metaFault = fn }
}

// HeldBytes reports how many bytes of committed lines the sessions hold
// back from their events.jsonl.
func (st *Store) HeldBytes() int64 { return st.held.Load() }

// HoldBytes is how many bytes of lines a session holds before writing.
const HoldBytes = holdBytes

// SyncPoint names one fsync the store is about to make (see syncPoint).
type SyncPoint = syncPoint

// The kinds of fsync a SyncPoint names.
const (
	SyncWALCommit = atWALCommit
	SyncWALCut    = atWALCut
	SyncWALZeros  = atWALZeros
	SyncWALReset  = atWALReset
	SyncWALSwitch = atWALSwitch
	SyncWALDir    = atWALDir
	SyncFS        = atSyncFS
	SyncLog       = atLog
	SyncMeta      = atMeta
	SyncDir       = atDir
	SyncRepair    = atRepair
)

// WithSyncFault consults fn before every fsync the store makes (the
// write-ahead log's commits, cuts, zeros and resets; checkpoints' syncfs or
// per-file fsyncs; meta.json replacements; torn-tail cuts), and before the
// rename of log.next over the log that ends a checkpoint (SyncWALSwitch). A
// non-nil result fails that fsync (or rename) as the disk would, and it is
// not made.
func WithSyncFault(fn func(SyncPoint) error) Option { return func(s *Store) { s.syncFault = fn } }

// WithWALResetFault consults fn in place of the sync that follows a
// checkpoint's truncate of the WAL: a non-nil result fails the checkpoint
// there, with the log already empty.
func WithWALResetFault(fn func() error) Option {
	return WithSyncFault(func(p SyncPoint) error {
		if p.Kind == SyncWALReset {
			return fn()
		}
		return nil
	})
}

// MaxOpenFor is DefaultMaxOpen for a soft RLIMIT_NOFILE (ok false: none).
func MaxOpenFor(soft uint64, ok bool) int { return maxOpenFor(soft, ok) }

// MaxOpen reports the store's bound on open append handles.
func (st *Store) MaxOpen() int { return st.maxOpen }

// NOFILE is the soft RLIMIT_NOFILE DefaultMaxOpen reads.
func NOFILE() (uint64, bool) { return nofile() }

// EncodeRecordFrame is one WAL frame holding a record (carried: as a
// checkpoint carries it forward), for tests that write a log by hand.
func EncodeRecordFrame(sid string, body []byte, carried bool) []byte {
	if carried {
		return encodeFrame(frameCarried, sid, body)
	}
	return encodeFrame(frameRecord, sid, body)
}

// EncodeEventsFrame is one WAL frame holding the events.jsonl lines of one
// Append, for tests that write a log by hand.
func EncodeEventsFrame(sid string, lines []byte) []byte {
	return encodeFrame(frameEvents, sid, lines)
}
