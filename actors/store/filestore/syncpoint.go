package filestore

// syncPoint names one fsync of the store: what it makes durable (Kind, one
// of the at* constants) and the file or directory it syncs. The tests'
// fault seam (WithSyncFault) is consulted with it before every fsync the
// store makes, so each one can be failed, or made to land and then fail,
// and a crash simulated from what had reached the disk.
type syncPoint struct {
	Kind string
	Path string
	// DataOnly says the sync is an fdatasync (the write-ahead log's data
	// on zeros already on disk), not an fsync.
	DataOnly bool
}

const (
	atWALCommit = "wal.commit" // a group commit's fsync: the durability point
	atWALCut    = "wal.cut"    // after a failed commit, the cut back to the committed end
	atWALZeros  = "wal.zeros"  // the zeros kept ahead of the committed end
	atWALReset  = "wal.reset"  // the log that replaces the old at a checkpoint (log.next, or the truncate to empty)
	atWALSwitch = "wal.switch" // not an fsync: the rename of log.next over the log that ends a checkpoint
	atWALDir    = "wal.dir"    // the directory holding the log, at Open
	atSyncFS    = "checkpoint.syncfs"
	atLog       = "checkpoint.log"  // one events.jsonl (where there is no syncfs)
	atMeta      = "checkpoint.meta" // a meta.json temp file before its rename, or meta.json
	atDir       = "checkpoint.dir"  // a session directory or the sessions directory
	atRepair    = "repair.cut"      // a torn tail cut off an events.jsonl
)
