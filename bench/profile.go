package bench

import (
	"errors"
	"io"
	"runtime/pprof"
	"runtime/trace"
	"sync"
)

// profiled holds the turns-profile and turns-trace writers that already
// took one: a second start on the same writer would append another
// profile or trace to it, and pprof and go tool trace read such a file as
// corrupt.
var profiled = struct {
	mu sync.Mutex
	w  map[io.Writer]bool
}{w: map[io.Writer]bool{}}

// startTurnsProfile starts a CPU profile into w (nil: none) unless w
// already took one or another profile is running (then the error says
// why), and returns what stops it (a no-op when none was started).
func startTurnsProfile(w io.Writer) (stop func(), err error) {
	return startOnce(w, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTurnsTrace starts a Go execution trace into w as startTurnsProfile
// starts a profile.
func startTurnsTrace(w io.Writer) (stop func(), err error) {
	return startOnce(w, trace.Start, trace.Stop)
}

// startOnce runs start on w unless w is nil or already took a profile or
// trace, and returns stop, or a no-op when nothing was started.
func startOnce(w io.Writer, start func(io.Writer) error, stop func()) (func(), error) {
	none := func() {}
	if w == nil {
		return none, nil
	}
	profiled.mu.Lock()
	defer profiled.mu.Unlock()
	if profiled.w[w] {
		return none, errors.New("an earlier suite of this run took it")
	}
	if err := start(w); err != nil {
		return none, err
	}
	profiled.w[w] = true
	return stop, nil
}
