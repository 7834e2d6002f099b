package filestore

// WithoutSync skips every fsync, for tests whose subject is not durability
// (the fuzz test, ten thousand sessions).
func WithoutSync() Option { return func(s *Store) { s.noSync = true } }

// OpenHandles reports how many append handles are open.
func (st *Store) OpenHandles() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.open
}

// WithWALFault consults fn before each group commit's write: a non-nil
// result fails the whole group as a disk would (ENOSPC, EROFS).
func WithWALFault(fn func() error) Option { return func(s *Store) { s.walFault = fn } }

// WithWALResetFault consults fn in place of the sync that follows a
// checkpoint's truncate of the WAL: a non-nil result fails the checkpoint
// there, with the log already empty.
func WithWALResetFault(fn func() error) Option { return func(s *Store) { s.walResetFault = fn } }
