package outcomes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// maxLine bounds one line of a learning log; a longer line is corrupt.
const maxLine = 1 << 20

// jsonl is an append-only JSON-lines file of T, keyed for idempotency,
// shared across processes through flock.
type jsonl[T any] struct {
	path string
	key  func(T) string

	mu     sync.Mutex
	offset int64 // bytes of the file already read into items
	items  []T
	keys   map[string]int
	gen    uint64
	bad    int // lines that did not parse (skipped, kept on disk)
}

// openJSONL reads the file at path; it is created (with its directory) by
// the first Append, so a home that never recorded anything stays untouched.
func openJSONL[T any](path string, key func(T) string) (*jsonl[T], error) {
	l := &jsonl[T]{path: path, key: key, keys: map[string]int{}}
	return l, l.locked(false, func(*os.File) error { return nil })
}

// locked opens the file under an exclusive flock, cuts a torn tail, reads
// what other processes appended since the last look, then runs f. Without
// create, a missing file is read as empty and f is not run.
func (l *jsonl[T]) locked(create bool, f func(*os.File) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	flags := os.O_RDWR
	if create {
		if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
			return err
		}
		flags |= os.O_CREATE
	}
	fh, err := os.OpenFile(l.path, flags, 0o600)
	if !create && errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(fh.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	if err := l.catchUp(fh); err != nil {
		return err
	}
	return f(fh)
}

func (l *jsonl[T]) catchUp(fh *os.File) error {
	fi, err := fh.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < l.offset { // replaced or cut by hand: read it all again
		l.offset, l.items, l.keys = 0, nil, map[string]int{}
	}
	if fi.Size() == l.offset {
		return nil
	}
	if _, err := fh.Seek(l.offset, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(fh, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				// a torn last line: a crash mid-append. Cut it; its writer
				// never acknowledged it.
				if terr := fh.Truncate(l.offset); terr != nil {
					return terr
				}
				if serr := fh.Sync(); serr != nil {
					return serr
				}
			}
			break
		}
		if err != nil {
			return err
		}
		l.offset += int64(len(line))
		var v T
		if len(line) > maxLine || json.Unmarshal(bytes.TrimSpace(line), &v) != nil {
			l.bad++
			continue
		}
		l.add(v)
	}
	l.gen++
	return nil
}

func (l *jsonl[T]) add(v T) {
	if k := l.key(v); k != "" {
		if _, dup := l.keys[k]; dup {
			return
		}
		l.keys[k] = len(l.items)
	}
	l.items = append(l.items, v)
}

// Append writes v unless its key is already present; it reports whether it
// wrote. When it returns nil after writing, the line is durable.
func (l *jsonl[T]) Append(v T) (bool, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return false, err
	}
	if len(b) >= maxLine {
		return false, fmt.Errorf("a line of %d bytes is over the %d-byte limit", len(b), maxLine)
	}
	wrote := false
	err = l.locked(true, func(fh *os.File) error {
		if _, dup := l.keys[l.key(v)]; dup {
			return nil
		}
		if _, err := fh.Seek(0, io.SeekEnd); err != nil {
			return err
		}
		if _, err := fh.Write(append(b, '\n')); err != nil {
			return err
		}
		if err := fh.Sync(); err != nil {
			return err
		}
		l.offset += int64(len(b) + 1)
		l.add(v)
		l.gen++
		wrote = true
		return nil
	})
	return wrote, err
}

// Refresh reads what other processes appended.
func (l *jsonl[T]) Refresh() error { return l.locked(false, func(*os.File) error { return nil }) }

// Snapshot returns the items (in file order) and the generation, which
// changes whenever items do.
func (l *jsonl[T]) Snapshot() ([]T, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...), l.gen
}

// Has reports whether key is present.
func (l *jsonl[T]) Has(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.keys[key]
	return ok
}

// Get returns the item with key.
func (l *jsonl[T]) Get(key string) (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.keys[key]
	if !ok {
		var zero T
		return zero, false
	}
	return l.items[i], true
}
