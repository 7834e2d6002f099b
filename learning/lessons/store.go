package lessons

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Store is lessons.json under a home's learning directory.
type Store struct {
	path string
}

// NewStore returns the store under dir ($CODESESSION_HOME/learning).
func NewStore(dir string) *Store { return &Store{path: filepath.Join(dir, "lessons.json")} }

// Path is the book's file.
func (s *Store) Path() string { return s.path }

// Load reads the book; a missing file is an empty book. A file that does not
// decode strictly is an error: nothing is injected from it and no pass
// overwrites it (fail closed; a person looks at it).
func (s *Store) Load() (Book, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return Book{Version: BookVersion}, nil
	}
	if err != nil {
		return Book{}, err
	}
	var book Book
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&book); err != nil {
		return Book{}, fmt.Errorf("%s: %w", s.path, err)
	}
	if book.Version != BookVersion {
		return Book{}, fmt.Errorf("%s: version %d, this build reads %d", s.path, book.Version, BookVersion)
	}
	return book, nil
}

// Save replaces the book atomically: temp file, fsync, rename, fsync dir.
func (s *Store) Save(b Book) error {
	b.Version = BookVersion
	if b.Lessons == nil {
		b.Lessons = []Lesson{}
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".lessons-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Locked runs f holding an exclusive flock on the book, so passes from the
// daemon and the CLI never interleave.
func (s *Store) Locked(f func() error) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	fh, err := os.OpenFile(s.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(fh.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	return f()
}
