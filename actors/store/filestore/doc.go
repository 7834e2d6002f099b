// Package filestore is the on-disk session store, the embedded default
// behind store.Store. It owns one directory tree:
//
//	<home>/sessions/<sid>/meta.json     the record's checkpoint, replaced by a
//	                                    rename (fsynced at checkpoints)
//	<home>/sessions/<sid>/events.jsonl  one messages.PersistedEvent per line
//
// and one write-ahead log shared by every session of the home:
//
//	<home>/wal/log                      group-committed frames (CRC-32C each)
//	<home>/wal/log.next                 the frames after a running checkpoint's
//	                                    cut, or the next one's log, made ahead
//
// # Durability
//
// The WAL is the durability point. Append and PutMeta queue a frame and
// wait; one goroutine writes every frame that arrived while the previous
// fsync ran with one write and one fsync (group commit), then answers them
// all. Only then are the lines written to the session's events.jsonl, and
// without an fsync: the WAL already holds them. The applier holds a
// session's lines back and writes them a few KiB at a time (8 KiB a
// session, 32 MiB across sessions); a read, a checkpoint and Close write
// the held lines first, and a crash replays them from the WAL, which a
// checkpoint empties only after writing and syncing them. A failed write or sync is
// cut back off the WAL, so a batch is either committed or absent; the
// error is unavailable (retryable, naming the cause: no space, read-only).
// No timer decides durability: once queued, a frame waits for the disk.
// AppendRecord queues the events frame and the record frame as one
// request, so they share a write and an fsync; the events frame comes
// first, so a torn tail can drop the record but never keep it without its
// events.
//
// Between groups the log keeps zeros written ahead of its end (up to
// 1 MiB, never past the checkpoint size), so a group lands on blocks
// already allocated and its fsync is an fdatasync: no file metadata
// changes, so no ext4 journal commit, which other writers on the file
// system (the agent beside the session) can wait for. Zeros end the log
// as a torn frame does; they are not reported as one.
//
// meta.json is a checkpoint of the record, written when the liveness of
// an existing record changes (release, resume: after the change is
// answered, by a goroutine of its own, so no answer waits for the file's
// creation; until it is written the record is carried as a dirty one is)
// and at checkpoints, never
// at create nor once per status change: status changes are WAL frames and GetMeta reads the latest
// committed record from memory. A checkpoint (when the WAL passes
// WithCheckpointBytes, at Open and at Close) makes the session files
// touched since the last one durable (one syncfs on Linux, else an fsync
// per file), then drops the WAL's frames before it. The checkpoints the WAL
// runs mid-load (not those of Open and Close) write no meta.json: the
// records newer than their meta.json are carried forward into the next log
// instead, so a record file is written at create, release and close, not
// once per checkpoint per session.
//
// Those mid-load checkpoints run beside the commits (checkpoint.go). The
// loop stops only for the cut: the applier drains, the dirty set is taken,
// and the commits move to <home>/wal/log.next, made ahead (zeros, fsynced,
// its directory entry durable) so the cut is one fdatasync of the carried
// records. The syncfs then runs on its own goroutine while the loop
// commits into log.next; once it succeeds log.next is renamed over log,
// which drops every frame before the cut at once, and the next log.next is
// made. A replay reads log, then log.next (when it holds frames): every
// frame since the last completed checkpoint, once, in commit order.
//
// A failed checkpoint keeps the WAL (both files) and is retried on the
// loop once the log has grown by the checkpoint size again; the retry
// first writes the session files again from the WAL, since a failed
// fsync can drop the pages it was to write and a second fsync then
// succeeds without them. Open replays the WAL:
// each session's events.jsonl is rewritten from the first seq the WAL holds
// and its meta.json from its last record, so both are exact after any crash.
// Sequence numbers are the caller's; Append accepts only a gapless batch
// starting at LastSeq+1, so line k of a log always holds seq k.
// ReadEvents starts at a seq -> offset index entry (one every 64 lines)
// instead of decoding from line 1.
//
// # Repair
//
// The first time a session's log is touched after Open it is scanned. A line
// is good when it is terminated, decodes and holds seq k on line k. After a
// bad line the rest is searched for an intact line: if there is none the
// bad part is a torn tail (a crash mid-append) and is cut, fsynced, reported
// by Repairs and logged; if there is one, the log has a corrupt middle line:
// nothing is cut, reads past it and LastSeq return a corrupt error naming
// the line, and Append refuses it (resume is refused with that reason).
// A meta.json that does not parse is corrupt too.
//
// # Concurrency
//
// A Store is safe for concurrent use. Each session has its own locks (one for
// its record, one for its log), so no lock is held across another session's
// fsync; a store-wide mutex guards only maps and the LRU of open append
// handles, never I/O. At most DefaultMaxOpen() append handles (half the
// soft RLIMIT_NOFILE, within [MinMaxOpen, CapMaxOpen]; WithMaxOpen changes
// it) stay open, plus one per Append running at that moment: the least
// recently used is closed and reopened on demand, so ten thousand sessions
// do not exhaust file descriptors, and where the limit allows they do not
// reopen their logs at every write either. The last seq and
// size of every log touched since Open are cached in memory. Several Store
// values (or processes) must not share one home.
//
// # Testing
//
// filestore_test.go runs the storetest conformance suite against it and adds
// what only a disk has: reopening, torn tails (with FuzzTornTail), bad
// records, temp-file leftovers and the handle LRU under ten thousand
// sessions. crash_test.go fails each fsync through the tests' seam
// (WithSyncFault: every fsync the store makes is named by a syncPoint),
// lets it land or lose its pages, then rebuilds the home from what had
// reached the disk (disk_test.go models it) and reopens it.
// checkpoint_test.go crashes the store in every window of a checkpoint
// running beside four writers (at the cut, with commits in log.next while
// the syncfs waits, before, during and after the syncfs, around the
// rename, after a failed syncfs, no space or a failed rename) and checks
// that every acknowledged event and record is back, each event once.
// BenchmarkAppend compares Append with a plain file written with the same
// batching and fsyncs.
package filestore
