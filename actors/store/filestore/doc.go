// Package filestore is the on-disk session store, the embedded default
// behind store.Store. It owns one directory tree:
//
//	<home>/sessions/<sid>/meta.json     the record, replaced atomically
//	                                    (temp file, fsync, rename, fsync dir)
//	<home>/sessions/<sid>/events.jsonl  one messages.PersistedEvent per line
//
// # Durability
//
// Append writes a whole batch with one write and one fsync (group commit:
// the caller batches), so an event is durable once its Append returns nil.
// Sequence numbers are the caller's; Append accepts only a gapless batch
// starting at LastSeq+1, so line k of a log always holds seq k.
//
// # Repair
//
// The first time a session's log is touched after Open, its tail is checked.
// A crash mid-append can leave an unterminated fragment or a few bad lines at
// the end; everything after the last good line is cut, fsynced, reported by
// Repairs and logged with slog. A line is good when it decodes as a
// PersistedEvent and its seq is one more than that of the line before it (1
// for the first line); with no checksums, that is as far as a forged line
// can be told from a real one. A bad line in the middle of a log is not a
// tear: ReadEvents fails on it (code internal, naming the session and the
// line) rather than skipping it.
//
// # Concurrency
//
// A Store is safe for concurrent use. Each session has its own locks (one for
// its record, one for its log), so no lock is held across another session's
// fsync; a store-wide mutex guards only maps and the LRU of open append
// handles, never I/O. At most DefaultMaxOpen append handles (WithMaxOpen
// changes it) stay open, plus one per Append running at that moment: the
// least recently used is closed and reopened on demand, so ten thousand
// sessions do not exhaust file descriptors. The last seq and
// size of every log touched since Open are cached in memory. Several Store
// values (or processes) must not share one home.
//
// # Testing
//
// filestore_test.go runs the storetest conformance suite against it and adds
// what only a disk has: reopening, torn tails (with FuzzTornTail), bad
// records, temp-file leftovers and the handle LRU under ten thousand
// sessions. BenchmarkAppend compares Append with a plain file written with the
// same batching and fsyncs.
package filestore
