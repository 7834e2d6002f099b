package bench

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// since records the time elapsed since t0.
func (l *latencies) since(t0 time.Time) { l.add(time.Since(t0)) }

// summary is a latency distribution's figures.
type summary struct {
	n                  int
	mean, p50, p99, mx time.Duration
}

func (l *latencies) summary() summary {
	l.mu.Lock()
	s := slices.Clone(l.d)
	l.mu.Unlock()
	return summarize(s)
}

func summarize(s []time.Duration) summary {
	if len(s) == 0 {
		return summary{}
	}
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return summary{n: len(s), mean: sum / time.Duration(len(s)), p50: quantile(s, 0.50), p99: quantile(s, 0.99), mx: s[len(s)-1]}
}

// pairedRatio is the median of a[i]/b[i] over the samples both sides
// took in the same round i. A busy minute on a shared machine slows both
// sides of a round, so each pair's ratio moves less with the machine's
// load than the ratio of two medians does. NaN without a pair.
func pairedRatio(a, b *latencies) float64 {
	a.mu.Lock()
	as := slices.Clone(a.d)
	a.mu.Unlock()
	b.mu.Lock()
	bs := slices.Clone(b.d)
	b.mu.Unlock()
	var r []float64
	for i := range min(len(as), len(bs)) {
		if bs[i] > 0 {
			r = append(r, float64(as[i])/float64(bs[i]))
		}
	}
	if len(r) == 0 {
		return math.NaN()
	}
	slices.Sort(r)
	if len(r)%2 == 1 {
		return r[len(r)/2]
	}
	return (r[len(r)/2-1] + r[len(r)/2]) / 2
}

// quantile is the nearest-rank quantile of sorted s.
func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// ms turns a duration into the float milliseconds of UnitMs.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rate is n per elapsed second.
func rate(n int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return math.NaN()
	}
	return float64(n) / elapsed.Seconds()
}

// latencyRows adds p50, p99 and max of s next to the same quantiles of base.
func (r *Result) latencyRows(op string, s summary, baseName string, base summary) {
	r.vs(op+" p50", ms(s.p50), UnitMs, baseName+" p50", ms(base.p50))
	r.vs(op+" p99", ms(s.p99), UnitMs, baseName+" p99", ms(base.p99))
	r.vs(op+" max", ms(s.mx), UnitMs, baseName+" max", ms(base.mx))
}

// memSnapshot is the process's memory and goroutines at one moment, after
// a garbage collection.
type memSnapshot struct {
	heap       uint64 // live heap bytes (HeapAlloc after GC)
	rss        uint64 // resident set size, 0 where /proc is missing
	goroutines int
}

func snapshot() memSnapshot {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSnapshot{heap: m.HeapAlloc, rss: procKiB("/proc/self/status", "VmRSS:") * 1024, goroutines: runtime.NumGoroutine()}
}

// perUnit is (after - before) / n for a memory figure, NaN when unknown.
func perUnit(after, before uint64, n int) float64 {
	if after == 0 || n == 0 {
		return math.NaN()
	}
	return (float64(after) - float64(before)) / float64(n)
}

// procKiB reads a "Key: N kB" line of a /proc file; 0 when absent.
func procKiB(path, key string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, key); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0
			}
			v, _ := strconv.ParseUint(fields[0], 10, 64)
			return v
		}
	}
	return 0
}

// threadSampler tracks the peak number of OS threads of the process (from
// /proc; 0 where it is missing): goroutines blocked in fsync each hold a
// thread, and Go stops a program that passes 10,000 of them.
type threadSampler struct {
	stop chan struct{}
	done chan struct{}
	peak uint64
}

func sampleThreads() *threadSampler {
	s := &threadSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if n := procKiB("/proc/self/status", "Threads:"); n > s.peak {
				s.peak = n
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// end stops sampling and returns the peak (NaN when unknown).
func (s *threadSampler) end() float64 {
	close(s.stop)
	<-s.done
	if s.peak == 0 {
		return math.NaN()
	}
	return float64(s.peak)
}

// processCPU is the user and system CPU this process has used so far, on
// all its threads (getrusage RUSAGE_SELF).
// openFileLimit is the process's soft RLIMIT_NOFILE (0: unknown).
func openFileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}

// runQueueWait is how long this process's threads have waited, runnable,
// for a CPU (the second field of each /proc/self/task/*/schedstat), or -1
// where the kernel does not say. Threads that exited take their share with
// them, so a difference of two readings is a floor; the Go runtime rarely
// ends its threads. With process CPU over the same wall time it tells a
// process that idled (waiting on the disk or on itself) from one that was
// runnable but not given the CPU (another process had it).
func runQueueWait() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return -1
	}
	var total time.Duration
	seen := false
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		total += time.Duration(ns)
		seen = true
	}
	if !seen {
		return -1
	}
	return total
}

func processCPU() time.Duration {
	ru := selfUsage()
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfUsage is getrusage of this process, every thread together; all
// zero if the call fails (a figure built on it then reads as nothing).
func selfUsage() syscall.Rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return syscall.Rusage{}
	}
	return ru
}
