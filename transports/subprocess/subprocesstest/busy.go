package subprocesstest

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// BusyEveryCore runs a busy loop on every core until t ends, so a live
// test shows its verdict does not hang on the machine being idle. The
// loops yield now and then, so the test's own goroutines still run.
func BusyEveryCore(t testing.TB) {
	var busy atomic.Bool
	busy.Store(true)
	var loops sync.WaitGroup
	for range runtime.NumCPU() {
		loops.Add(1)
		go func() {
			defer loops.Done()
			for n := 0; busy.Load(); n++ {
				if n%1_000_000 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	t.Cleanup(func() { busy.Store(false); loops.Wait() })
}
