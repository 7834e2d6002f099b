package warmpool

import (
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// How a booted process is judged settled (Settling). An agent CLI keeps
// working on its own after its handshake: the claude CLI 2.1.328 spends
// about 150 ms of CPU in two bursts, about 0.7 s and 1.6 s after its
// initialize answer, and a first turn that meets the second burst took
// 186 ms against 131 ms on this project's two-core machine (bench/README.md).
const (
	// SettleQuiet is how long the process's CPU time must stand still.
	SettleQuiet = time.Second
	// SettleMax is when a process that never stands still counts as
	// settled anyway.
	SettleMax = 10 * time.Second
	// settleTicks is the CPU time (clock ticks of /proc, 10 ms) a process
	// may use within SettleQuiet and still stand still.
	settleTicks = 2
	settlePoll  = 100 * time.Millisecond
)

// Settling watches a booted process until it settles: until its CPU time
// (user and system, of all its threads, from /proc/PID/stat) grew by no
// more than two clock ticks over SettleQuiet, or SettleMax passed. A
// process whose CPU time cannot be read (gone, or no /proc) counts as
// settled. Stop ends the watch early (the process was taken or
// discarded); the watch ends by itself at SettleMax.
type Settling struct {
	done chan struct{}
	stop chan struct{}
	once sync.Once
}

// WatchSettling starts watching process pid.
func WatchSettling(pid int) *Settling {
	return watchCPU(func() (int64, error) { return cpuTicks(pid) })
}

// watchCPU starts a watch of the CPU time cpu reads.
func watchCPU(cpu func() (int64, error)) *Settling {
	s := &Settling{done: make(chan struct{}), stop: make(chan struct{})}
	go s.watch(cpu)
	return s
}

// Settled reports whether the process has settled.
func (s *Settling) Settled() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Stop ends the watch; the process counts as settled from then on.
func (s *Settling) Stop() { s.once.Do(func() { close(s.stop) }) }

func (s *Settling) watch(cpu func() (int64, error)) {
	defer close(s.done)
	start := time.Now()
	base, err := cpu()
	baseAt := start
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	for err == nil && time.Since(start) < SettleMax {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			var t int64
			if t, err = cpu(); err != nil {
				return
			}
			switch {
			case t-base > settleTicks:
				base, baseAt = t, now
			case now.Sub(baseAt) >= SettleQuiet:
				return
			}
		}
	}
}

// cpuTicks is the user and system CPU time of process pid, in clock ticks
// (of all its threads, from /proc/PID/stat).
func cpuTicks(pid int) (int64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return int64(st.UTime) + int64(st.STime), nil
}
