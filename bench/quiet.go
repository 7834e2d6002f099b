package bench

import (
	"context"
	"os"
	"time"

	"github.com/prometheus/procfs"
)

// How the firstturn suite waits for the machine to be quiet before a timed
// turn (waitChildrenQuiet). The claude CLI 2.1.328 goes on working after
// its result line: about 40-60 ms of CPU over the next 3 s, now and then a
// burst of 100-170 ms (sampled every 50 ms on this project's machine,
// 2026-12-02). With four CLIs taking turns on two cores, the turn timed
// next met another side's burst by chance, and a side's p50 moved by ±8%
// from run to run. A driver's next turn comes seconds later in real use,
// after a person or an agent has read the last one.
const (
	// quietFor is how long the CPU time of this process's descendants
	// must stand still (quietTicks at most) before a timed turn.
	quietFor   = 500 * time.Millisecond
	quietTicks = 1 // clock ticks of /proc (10 ms each)
	quietPoll  = 50 * time.Millisecond
	// quietMax is when a turn is timed anyway.
	quietMax = 5 * time.Second
)

// waitChildrenQuiet waits until the CPU time of every process descended
// from this one (the CLIs and whatever they run) grew by no more than
// quietTicks over quietFor, or until max passed, and reports whether it
// was quiet. A process that exits meanwhile takes its CPU time with it: a
// sum that falls starts from the new sum without restarting the wait.
// Where /proc cannot be read it reports quiet at once: nothing to wait for
// can be seen.
func waitChildrenQuiet(ctx context.Context, forQuiet, max time.Duration) bool {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return true
	}
	self := os.Getpid()
	base, err := descendantsCPUTicks(fs, self)
	if err != nil {
		return true
	}
	start := time.Now()
	baseAt := start
	tick := time.NewTicker(quietPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case now := <-tick.C:
			t, err := descendantsCPUTicks(fs, self)
			if err != nil {
				return true
			}
			switch {
			case t < base:
				base = t
			case t-base > quietTicks:
				base, baseAt = t, now
			case now.Sub(baseAt) >= forQuiet:
				return true
			}
			if now.Sub(start) >= max {
				return false
			}
		}
	}
}

// descendantsCPUTicks sums the user and system CPU time, in clock ticks,
// of every live process descended from pid (not pid itself).
func descendantsCPUTicks(fs procfs.FS, pid int) (uint64, error) {
	procs, err := fs.AllProcs()
	if err != nil {
		return 0, err
	}
	children := map[int][]procfs.ProcStat{}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // gone meanwhile
		}
		children[st.PPID] = append(children[st.PPID], st)
	}
	var sum uint64
	next := []int{pid}
	for len(next) > 0 {
		p := next[len(next)-1]
		next = next[:len(next)-1]
		for _, c := range children[p] {
			sum += uint64(c.UTime) + uint64(c.STime)
			next = append(next, c.PID)
		}
	}
	return sum, nil
}
