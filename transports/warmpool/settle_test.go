package warmpool_test

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
	"github.com/codesession/codesession/transports/warmpool"
)

// burns is a scripted process: it uses 5 clock ticks a 100 ms while the
// fake clock is inside one of its bursts, none outside them.
type burns struct {
	mu     sync.Mutex
	start  time.Time
	bursts [][2]time.Duration
}

func (b *burns) cpu() (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Since(b.start)
	var ticks int64
	for _, r := range b.bursts {
		busy := min(now, r[1]) - r[0]
		if busy > 0 {
			ticks += int64(busy / (20 * time.Millisecond))
		}
	}
	return ticks, nil
}

// The watch waits for SettleQuiet of stillness after the last burst, not
// after the first pause: the claude CLI pauses about half a second
// between its two bursts after initialize.
func TestSettlingWaitsForTheCPUToStandStill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &burns{start: time.Now(), bursts: [][2]time.Duration{{0, 700 * time.Millisecond}, {1200 * time.Millisecond, 1600 * time.Millisecond}}}
		s := warmpool.WatchCPU(b.cpu)
		defer s.Stop()
		time.Sleep(1500 * time.Millisecond)
		assert.False(t, s.Settled(), "inside the second burst")
		time.Sleep(900 * time.Millisecond) // 2.4 s: 0.8 s after the last burst
		synctest.Wait()
		assert.False(t, s.Settled(), "less than SettleQuiet after the last burst")
		time.Sleep(400 * time.Millisecond) // 2.8 s: 1.2 s after it
		synctest.Wait()
		assert.True(t, s.Settled(), "SettleQuiet of stillness")
	})
}

// A little CPU now and then (a timer's tick: here one tick in 0.8 s) is
// stillness.
func TestSettlingToleratesATickOrTwo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ticks int64
		s := warmpool.WatchCPU(func() (int64, error) { mu.Lock(); defer mu.Unlock(); ticks++; return ticks / 8, nil })
		defer s.Stop()
		time.Sleep(warmpool.SettleQuiet + 300*time.Millisecond)
		synctest.Wait()
		assert.True(t, s.Settled())
	})
}

// A process that never stands still counts as settled at SettleMax, not
// before.
func TestSettlingGivesUpAtSettleMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &burns{start: time.Now(), bursts: [][2]time.Duration{{0, time.Hour}}}
		s := warmpool.WatchCPU(b.cpu)
		defer s.Stop()
		time.Sleep(warmpool.SettleMax - 200*time.Millisecond)
		synctest.Wait()
		assert.False(t, s.Settled())
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		assert.True(t, s.Settled())
	})
}

// What cannot be read counts as settled; Stop settles at once.
func TestSettlingUnreadableOrStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gone := warmpool.WatchCPU(func() (int64, error) { return 0, errors.New("no such process") })
		synctest.Wait()
		assert.True(t, gone.Settled())

		b := &burns{start: time.Now(), bursts: [][2]time.Duration{{0, time.Hour}}}
		busy := warmpool.WatchCPU(b.cpu)
		time.Sleep(time.Second)
		busy.Stop()
		busy.Stop() // twice is fine
		synctest.Wait()
		assert.True(t, busy.Settled())
	})
}

// cpuTicks counts the CPU time a process used, in clock ticks (10 ms): this
// process burns 200 ms of CPU (by its own rusage, so a busy machine only
// makes it take longer) and its count grows by more than 10.
func TestCPUTicksCountsTheCPUUsed(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		subprocesstest.Missing(t, "no /proc here: %v", err)
	}
	before, err := warmpool.CPUTicks(os.Getpid())
	require.NoError(t, err)
	used := func() time.Duration {
		var ru syscall.Rusage
		require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for from := used(); used()-from < 200*time.Millisecond; {
	}
	after, err := warmpool.CPUTicks(os.Getpid())
	require.NoError(t, err)
	assert.Greater(t, after-before, int64(10))

	_, err = warmpool.CPUTicks(1 << 30)
	assert.Error(t, err, "a process that is not there has no CPU time")
}

// A real process that sleeps settles; one that is gone counts as settled.
func TestWatchSettlingOnARealProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		subprocesstest.Missing(t, "no /proc here: %v", err)
	}
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	s := warmpool.WatchSettling(cmd.Process.Pid)
	defer s.Stop()
	// the deadline only stops a hang: a sleeping process settles after
	// SettleQuiet on any machine, and the watch gives up at SettleMax
	require.Eventually(t, s.Settled, 5*time.Minute, 50*time.Millisecond)

	gone := warmpool.WatchSettling(1 << 30)
	require.Eventually(t, gone.Settled, 5*time.Minute, time.Millisecond)
}
