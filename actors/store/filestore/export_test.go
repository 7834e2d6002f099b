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
