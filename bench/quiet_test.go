package bench

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A child burning CPU keeps the machine from counting as quiet for as
// long as it burns; once it is gone, the wait ends quiet.
func TestWaitChildrenQuietWaitsOutABusyChild(t *testing.T) {
	burner := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, burner.Start())
	defer func() { _ = burner.Process.Kill(); _ = burner.Wait() }()
	ctx := context.Background()
	// the burner gets at least a few ticks in any 100 ms of a wait of a
	// second, on however busy a machine: never quiet for 500 ms
	assert.False(t, waitChildrenQuiet(ctx, quietFor, time.Second), "quiet while a child burns CPU")
	require.NoError(t, burner.Process.Kill())
	_ = burner.Wait()
	// a minute only stops a hang: quiet comes half a second after the kill
	assert.True(t, waitChildrenQuiet(ctx, quietFor, time.Minute), "not quiet with no child at work")
}

// The sum covers grandchildren: a CLI's own children count.
func TestDescendantsCPUTicksCountsGrandchildren(t *testing.T) {
	// sh starts the burner as its child and waits for it
	sh := exec.Command("sh", "-c", "sh -c 'while :; do :; done'; :")
	require.NoError(t, sh.Start())
	defer func() {
		_ = exec.Command("pkill", "-KILL", "-P", strconv.Itoa(sh.Process.Pid)).Run()
		_ = sh.Process.Kill()
		_ = sh.Wait()
	}()
	assert.False(t, waitChildrenQuiet(context.Background(), quietFor, time.Second), "quiet while a grandchild burns CPU")
}

func TestWaitChildrenQuietStopsWithItsContext(t *testing.T) {
	burner := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, burner.Start())
	defer func() { _ = burner.Process.Kill(); _ = burner.Wait() }()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, waitChildrenQuiet(ctx, quietFor, time.Hour))
}

// TestRunQueueWaitReadsSchedstat: on Linux the sessions suite's "cores
// wanted but not given" has its source: the threads' schedstat parses.
func TestRunQueueWaitReadsSchedstat(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("schedstat is Linux's")
	}
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/schedstat"); err != nil {
		t.Skipf("the kernel keeps no schedstat: %v", err)
	}
	require.GreaterOrEqual(t, runQueueWait(), time.Duration(0), "schedstat read and parsed")
}
