package actors

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// A lease marks a home as used by a live runtime: each runtime holds an
// exclusive flock on home/runtimes/<id>.lock for its whole life, and writes
// its id into the runs it starts. The orphan sweep at boot then orphans only
// records whose runtime is gone (its lock is free), never the live sessions
// of another process sharing the home. The kernel drops a dead process's
// flock, so a crash never leaves a stale lease.
type lease struct {
	id   string
	path string
	f    *os.File
}

const runtimesDir = "runtimes"

func newRuntimeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "rt_" + hex.EncodeToString(b[:])
}

// takeLease creates and locks home/runtimes/<id>.lock.
func takeLease(home, id string) (*lease, error) {
	dir := filepath.Join(home, runtimesDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("runtime lease: %w", err)
	}
	path := filepath.Join(dir, id+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("runtime lease: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("runtime lease %s: %w", path, err)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return &lease{id: id, path: path, f: f}, nil
}

func (l *lease) release() {
	if l == nil {
		return
	}
	os.Remove(l.path)
	l.f.Close()
}

// leaseHeld reports whether the runtime with that id is alive: some process
// holds its lock. A free lock file is a dead runtime's; it is removed.
func leaseHeld(home, id string) bool {
	if id == "" {
		return false
	}
	path := filepath.Join(home, runtimesDir, filepath.Base(id)+".lock")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	if err == nil {
		os.Remove(path)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	return false
}
