package filestore

import (
	"fmt"
	"sync"
)

// metaWriter writes meta.json at a liveness change (release, resume) off
// the WAL's applier, on a goroutine of its own. The record is durable in
// the WAL before the change is answered, so its answer never needed the
// file; but written on the applier, the file's creation (a temp file, a
// new inode: 70-90% of it in the kernel, longer beside other disk writers)
// held back every other session's answer queued behind it. At ten
// thousand sessions the applier spent 2.6-3.0 s of a 20 s turns phase
// blocked in those creations (an execution trace of bench sessions).
//
// Until the file is written the session's metaDirty stays set, so a
// checkpoint mid-load carries its record forward into the next log, and
// Close writes the file itself; a write that fails (or panics) leaves it
// set the same way. One goroutine writes every file in the order the
// changes were applied, so an older record never replaces a newer one.
type metaWriter struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*session
	closing bool
	done    chan struct{}
}

func newMetaWriter() *metaWriter {
	m := &metaWriter{done: make(chan struct{})}
	m.cond = sync.NewCond(&m.mu)
	return m
}

// add queues s; it never blocks on I/O (the applier calls it).
func (m *metaWriter) add(s *session) {
	m.mu.Lock()
	m.queue = append(m.queue, s)
	m.cond.Signal()
	m.mu.Unlock()
}

// stop ends the writer after the write in progress and waits for it; what
// is still queued is left to the caller (Close's checkpoint writes every
// meta.json still dirty).
func (m *metaWriter) stop() {
	m.mu.Lock()
	m.closing = true
	m.cond.Signal()
	m.mu.Unlock()
	<-m.done
}

// next waits for queued sessions; nil once stopping.
func (m *metaWriter) next() []*session {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.queue) == 0 && !m.closing {
		m.cond.Wait()
	}
	if m.closing {
		return nil
	}
	q := m.queue
	m.queue = nil
	return q
}

func (m *metaWriter) stopping() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closing
}

// runMetaWriter is the writer's goroutine.
func (st *Store) runMetaWriter(m *metaWriter) {
	defer close(m.done)
	for {
		q := m.next()
		if q == nil {
			return
		}
		for _, s := range q {
			if m.stopping() {
				return
			}
			st.writeQueuedMeta(s)
		}
	}
}

// writeQueuedMeta writes s's latest record to meta.json, without s.mu
// held across the file's creation. metaDirty is cleared only after the
// rename, and only if no newer record was applied meanwhile: a checkpoint
// that finds it clear is sure the file is in place before its sync.
// metaFileMu keeps the checkpoints that read metaDirty after their sync
// (checkpoint) from running beside it.
func (st *Store) writeQueuedMeta(s *session) {
	st.metaFileMu.Lock()
	defer st.metaFileMu.Unlock()
	s.mu.Lock()
	s.metaQueued = false
	data, gen, dirty := s.recJSON, s.recGen, s.metaDirty
	s.mu.Unlock()
	if !dirty || data == nil {
		return
	}
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic writing meta.json: %v", p)
			}
		}()
		var fault error
		landed := true
		if st.metaFault != nil {
			fault, landed = st.metaFault()
		}
		if landed {
			if err := st.writeMetaFile(s, data, false); err != nil {
				return err
			}
		}
		return fault
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		st.log.Warn("store: cannot write meta.json (the record is safe in the write-ahead log)", "session", s.id, "err", err)
		// metaDirty stays: carried forward, or written by Close. The file
		// may have been replaced all the same: sync it at the next
		// checkpoint either way
		s.metaUnsynced = true
		st.markDirty(s)
		return
	}
	if s.recGen == gen {
		s.metaDirty = false
	}
	s.metaUnsynced = true
	st.markDirty(s)
}
