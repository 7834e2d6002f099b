package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// flushFrame is about what one native turn's last group commit writes:
// turn_end, the turn's result and the session's record.
const flushFrame = 1200

// deviceFlush measures what one durable write costs on dir's disk, the
// way the WAL commits a group: flushFrame bytes written over zeros already
// on disk (the WAL keeps its log zero-filled ahead of its end, so a commit
// changes no metadata), then fdatasync. A turn at c=1 holds at least one
// of these after its turn_end, because read-turn answers only once the
// turn's result is durable: it is the contract's floor, which no runtime
// can go below on this disk. n writes, each at its own offset; a run
// longer than limit stops early with the samples it has.
func deviceFlush(dir string, n int, limit time.Duration) (summary, error) {
	path := filepath.Join(dir, "flushfloor")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return summary{}, err
	}
	defer os.Remove(path)
	defer f.Close()
	if _, err := f.Write(make([]byte, n*flushFrame)); err != nil {
		return summary{}, err
	}
	if err := f.Sync(); err != nil {
		return summary{}, err
	}
	frame := make([]byte, flushFrame)
	for i := range frame {
		frame[i] = byte('a' + i%26)
	}
	var l latencies
	deadline := time.Now().Add(limit)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		t0 := time.Now()
		if _, err := f.WriteAt(frame, int64(i*flushFrame)); err != nil {
			return summary{}, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return summary{}, fmt.Errorf("fdatasync: %w", err)
		}
		l.since(t0)
	}
	return l.summary(), nil
}
