package bench

import (
	"fmt"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// wakeIdle is how long the woken thread has slept before each wake-up in
// threadWake: long enough that its CPU has gone idle, as the other vCPU
// has between a c=1 turn's hand-offs.
const wakeIdle = 500 * time.Microsecond

// threadWake measures one hand-off to a goroutine whose OS thread sleeps:
// a channel send from one locked thread to a goroutine locked to another,
// timed from the send to the receiver running. It is what each hand-off
// between the runtime's goroutines can cost when no thread is spinning
// (the Go scheduler wakes a parked thread with a futex, and the kernel
// must bring the other CPU out of idle); a bare client reading its answer
// on one goroutine makes few of them. The sender spins for wakeIdle
// before each send, so its own CPU stays busy and the receiver's goes
// idle. n hand-offs.
func threadWake(n int) summary {
	sent := make(chan time.Time)
	woke := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for t := range sent {
			woke <- time.Since(t)
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(sent)
	var l latencies
	for range n {
		for t := time.Now(); time.Since(t) < wakeIdle; {
		}
		sent <- time.Now()
		l.add(<-woke)
	}
	return l.summary()
}

// pageFault measures the first touch of a fresh anonymous page: n pages
// mapped, one byte written in each, the time per page. A Go heap that
// grows (or reuses memory the scavenger returned) pays this on every page
// it touches, and so does a turn that allocates fresh pages (on this
// machine's VM about 12 µs a page).
func pageFault(n int) (time.Duration, error) {
	size := n * syscall.Getpagesize()
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return 0, fmt.Errorf("mmap: %w", err)
	}
	defer unix.Munmap(mem)
	step := syscall.Getpagesize()
	t0 := time.Now()
	for i := 0; i < size; i += step {
		mem[i] = 1
	}
	return time.Since(t0) / time.Duration(n), nil
}

// kernelUsage is what getrusage says of this process's dealings with the
// kernel: minor page faults and voluntary context switches (a thread that
// slept: on a futex, in epoll, on the disk), every thread together.
type kernelUsage struct{ faults, switches int64 }

func processKernelUsage() kernelUsage {
	ru := selfUsage()
	return kernelUsage{faults: ru.Minflt, switches: ru.Nvcsw}
}

func (k kernelUsage) since(before kernelUsage) kernelUsage {
	return kernelUsage{faults: k.faults - before.faults, switches: k.switches - before.switches}
}

// per spreads k over n turns, or events.
func (k kernelUsage) per(n int) (faults, switches float64) {
	d := float64(max(n, 1))
	return float64(k.faults) / d, float64(k.switches) / d
}
