package subprocess

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lineLog records what a Process hands its owner.
type lineLog struct {
	mu          sync.Mutex
	lines       []string
	overs       []int
	status      string
	interrupted bool
	exits       int
}

func (l *lineLog) spawn(script string, wg *sync.WaitGroup) Spawn {
	return Spawn{Bin: "/bin/sh", Args: []string{"-c", script}, LineCap: 16, WG: wg,
		OnLine: func(line []byte, over int, readAt time.Time) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if over > 0 {
				l.overs = append(l.overs, over)
				return
			}
			l.lines = append(l.lines, string(line))
		},
		OnExit: func(status string, interrupted bool) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.status, l.interrupted = status, interrupted
			l.exits++
		}}
}

func waitExit(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(long):
		t.Fatal("the process did not exit")
	}
}

func TestProcessLinesCapsTailAndExit(t *testing.T) {
	var l lineLog
	var wg sync.WaitGroup
	script := `read x; echo "got $x"; echo; echo "   "; echo 0123456789abcdefXYZ; echo oops >&2; exit 3`
	p, err := Start(l.spawn(script, &wg))
	require.NoError(t, err)
	p.Write([]byte("hello\n"))
	waitExit(t, p)
	wg.Wait() // every goroutine of the process is counted
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, []string{"got hello"}, l.lines, "blank lines are skipped")
	assert.Equal(t, []int{19}, l.overs, "the line over the 16-byte cap comes as its length")
	assert.Equal(t, "exit status 3", l.status)
	assert.False(t, l.interrupted)
	assert.Equal(t, 1, l.exits, "OnExit runs once, before Exited closes")
	assert.Equal(t, "oops", p.Tail().Text(100))
	assert.Positive(t, p.Pid())
}

func TestProcessStopClosesStdin(t *testing.T) {
	var l lineLog
	p, err := Start(l.spawn(`cat; echo done`, nil))
	require.NoError(t, err)
	// cat ends at end of input: no signal is needed within the grace
	p.Stop(context.Background(), Step{Wait: long, Signal: syscall.SIGKILL})
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, []string{"done"}, l.lines)
	assert.Equal(t, "exit status 0", l.status)
}

func TestProcessEscalateMarksTheExitInterrupted(t *testing.T) {
	var l lineLog
	p, err := Start(l.spawn(`echo up; exec sleep 600`, nil))
	require.NoError(t, err)
	var sent []string
	p.Escalate([]Step{{Wait: time.Millisecond, Signal: syscall.SIGTERM}}, func(st Step, _ time.Duration) {
		sent = append(sent, SignalName(st.Signal))
	})
	waitExit(t, p)
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, []string{"SIGTERM"}, sent)
	assert.True(t, l.interrupted, "an exit after an escalation's signal is the interrupt's")
	assert.Contains(t, l.status, "terminated")
}

func TestAwaitClose(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(1)
	ran, killed := false, false
	go wg.Done()
	require.NoError(t, AwaitClose(context.Background(), &wg, func() { ran = true }, func() { killed = true }, "x"))
	assert.True(t, ran, "then runs once the goroutines are done")
	assert.False(t, killed)

	var stuck sync.WaitGroup
	stuck.Add(1)
	defer stuck.Done()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := AwaitClose(ctx, &stuck, nil, func() { killed = true }, "droid")
	assert.True(t, killed, "an ended ctx kills the group")
	assert.ErrorContains(t, err, "the droid session did not stop in time")
}
