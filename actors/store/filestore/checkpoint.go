package filestore

import "os"

// The checkpoints the WAL runs mid-load, beside the commits.
//
// The loop stops only for the cut: it moves the commits to log.next (made
// ahead by the previous checkpoint, so this is one fdatasync of nothing
// new) and puts a marker in the applier's stream. When the applier reaches
// it, every frame before the cut is in the session files: there it takes
// the sessions touched since the last checkpoint, where each one's file
// ends, and the records newer than their meta.json. The rest runs on its
// own goroutine while the loop commits into log.next and the applier
// writes on: the records are committed into log.next as carried frames
// (frameCarried), the syncfs (or an fsync per file) makes those sessions'
// files durable, and log.next is renamed over the log, which drops every
// frame before the cut at once.
//
// A crash at any point loses nothing acknowledged and replays no frame
// twice into a session log:
//   - before walNext and its directory entry are durable, no frame in it
//     was acknowledged; the old log holds everything (a leftover walNext
//     holds only records carried forward, which are the latest).
//   - from then to the rename, a replay reads the old log, then walNext:
//     every frame since the last completed checkpoint, in commit order.
//     Events are replayed by seq (a session's file is rewritten from the
//     first seq the WAL holds), never appended, so lines the syncfs made
//     durable already are written again in place, not twice.
//   - after the rename, the log holds only frames after the cut, and the
//     syncfs made every session file durable up to the cut.
//
// A failed syncfs (or fsync, or rename) keeps both files: the sessions go
// back to the dirty set, and the retry at the next threshold runs on the
// loop as the whole checkpoint did before: it writes the session files
// again from both files (a failed fsync can drop the pages it was to
// write), syncs them, renames walNext over the log and empties it.

// cutCheckpoint is the loop's part of starting a checkpoint (the cut): it
// moves the commits to walNext and returns atCut, which the applier runs
// once every frame before the cut is in the session files; bg, which runs
// beside the load; and finish, which the loop runs with bg's outcome.
func (st *Store) cutCheckpoint() (atCut func(), bg func() error, finish func(error), err error) {
	if err := st.wal.beginNext(nil); err != nil {
		st.log.Warn("store: checkpoint failed; the write-ahead log keeps everything", "err", err)
		return nil, nil, nil, err
	}
	old := st.wal.old
	var (
		applied = make(chan struct{})
		dirty   map[*session]struct{}
		// where each session's file ends at the cut: the frames after it
		// are in walNext, so once the log is walNext alone that is its
		// walBase
		bases   map[*session]int64
		carried []byte
	)
	atCut = func() {
		// on the applier, between the groups before the cut and after
		st.mu.Lock()
		dirty = st.takeDirty()
		st.mu.Unlock()
		bases = make(map[*session]int64, len(dirty))
		var carriedBy []*session
		var recs [][]byte
		size := 0
		for s := range dirty {
			s.mu.Lock()
			bases[s] = s.size + int64(len(s.behind))
			if s.metaDirty && s.recJSON != nil {
				carriedBy = append(carriedBy, s)
				recs = append(recs, s.recJSON) // replaced, never changed in place
				size += frameHeader + 2 + len(s.id) + len(s.recJSON)
			}
			s.mu.Unlock()
		}
		// one buffer of the right size: the frames of ten thousand live
		// sessions' records, written in place (this runs on the applier)
		carried = make([]byte, 0, size)
		for i, s := range carriedBy {
			carried = appendFrame(carried, frameCarried, s.id, recs[i])
		}
		// their records live in the WAL until meta.json is written
		st.mu.Lock()
		for _, s := range carriedBy {
			st.dirty[s] = struct{}{}
		}
		st.mu.Unlock()
		close(applied)
	}
	var spare *os.File
	var spareSize int64
	bg = func() error {
		<-applied
		if len(carried) > 0 {
			// the records as of the cut, into walNext like any commit:
			// they must be durable there before the old log goes
			req, done := waitReq(carried, nil)
			if err := st.wal.enqueue(req); err != nil {
				return err
			}
			if err := <-done; err != nil {
				return err
			}
		}
		if err := st.syncCut(dirty); err != nil {
			return err
		}
		if err := st.wal.switchNext(); err != nil {
			return err
		}
		// the log is walNext alone now: each session's lines in it start
		// where its file ended at the cut
		for s, base := range bases {
			s.mu.Lock()
			s.walBase, s.based = base, true
			s.mu.Unlock()
		}
		_ = old.Close() // unlinked: closing it frees its blocks, off the loop
		// the next cut's walNext, while the name is free; without it
		// (no space) that cut makes its own
		spareSize = st.wal.spareSize(int64(len(carried)))
		spare, _ = st.wal.makeNext(spareSize)
		return nil
	}
	finish = func(err error) {
		if err == nil {
			st.wal.old, st.wal.oldSize = nil, 0 // closed by bg
			if spare != nil {
				st.wal.spare, st.wal.spareZeroed = spare, spareSize
			}
			return
		}
		// the log stays two files; the retry rewrites the session files
		// from both before it syncs them
		if dirty != nil {
			st.redirty(dirty)
		}
		st.resync = true
		st.log.Warn("store: checkpoint failed; the write-ahead log keeps everything", "err", err)
	}
	return atCut, bg, finish, nil
}

// redirty puts sessions back in the dirty set after a failed checkpoint.
func (st *Store) redirty(dirty map[*session]struct{}) {
	st.mu.Lock()
	for s := range dirty {
		st.dirty[s] = struct{}{}
	}
	st.mu.Unlock()
}

// syncCut makes the files of the sessions in dirty durable up to the cut,
// beside the load: the applier may write more lines to them meanwhile,
// which the sync covers too or leaves for the next checkpoint. The
// records stay carried forward (no meta.json is written); a per-file
// unsynced flag is cleared before its fsync, so a write after it sets it
// again, and restored if the fsync fails.
func (st *Store) syncCut(dirty map[*session]struct{}) error {
	perFile := st.noSync || !haveSyncFS || st.noSyncFS
	for s := range dirty {
		s.mu.Lock()
		err := st.flushBehind(s)
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if !perFile {
		return st.fsync(atSyncFS, st.dir, func() error { return syncFS(st.dir) })
	}
	var firstErr error
	for s := range dirty {
		if err := st.syncSessionFiles(s); err != nil && firstErr == nil {
			firstErr = err // the others are still synced: less to redo
		}
	}
	if firstErr != nil {
		return firstErr
	}
	return st.syncDir(st.dir)
}

// syncSessionFiles fsyncs one session's events.jsonl and meta.json where
// written since their last fsync, then its directory, without holding the
// session's lock across an fsync.
func (st *Store) syncSessionFiles(s *session) error {
	s.mu.Lock()
	logU, metaU := s.logUnsynced, s.metaUnsynced
	s.logUnsynced, s.metaUnsynced = false, false
	s.mu.Unlock()
	err := func() error {
		if logU {
			if err := st.syncPath(atLog, s.logPath()); err != nil {
				return err
			}
			logU = false
		}
		if metaU {
			if err := st.syncPath(atMeta, s.metaPath()); err != nil {
				return err
			}
			metaU = false
		}
		return st.syncDir(s.dir)
	}()
	if err != nil {
		s.mu.Lock()
		s.logUnsynced = s.logUnsynced || logU
		s.metaUnsynced = s.metaUnsynced || metaU
		s.mu.Unlock()
	}
	return err
}
