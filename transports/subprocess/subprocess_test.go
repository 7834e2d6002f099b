package subprocess

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// long bounds waits that only stop hangs (a loaded 2-core machine).
const long = time.Minute

func TestTailKeepsTheEnd(t *testing.T) {
	tl := NewTail(35) // five lines of seven bytes
	for i := 0; i < 10; i++ {
		_, _ = tl.Write([]byte("line " + string(rune('a'+i)) + "\n"))
	}
	assert.Equal(t, "line f | line g | line h | line i | line j", tl.Text(100), "the first lines fell off")
	var zero Tail
	_, _ = zero.Write([]byte(strings.Repeat("x", DefaultTailBytes) + "\nlast"))
	assert.Equal(t, "last", zero.Text(10))
}

func TestQueueKeepsOrderAndEnds(t *testing.T) {
	q := NewQueue[int]()
	q.Push(1)
	q.Push(2)
	items, ok := q.Wait(nil)
	assert.Equal(t, []int{1, 2}, items)
	assert.True(t, ok)
	go func() { q.Push(3); q.Close(); q.Push(4) }()
	var got []int
	for {
		items, ok := q.Wait(nil)
		got = append(got, items...)
		if !ok {
			break
		}
	}
	assert.Equal(t, []int{3}, got, "nothing after Close")
	stop := make(chan struct{})
	close(stop)
	items, ok = NewQueue[int]().Wait(stop)
	assert.Empty(t, items)
	assert.False(t, ok)
}

func TestEnvValue(t *testing.T) {
	env := []string{"PATH=/bin", "B=1", "B=2"}
	assert.Equal(t, "2", EnvValue(env, "B"), "the last value wins")
	assert.Empty(t, EnvValue(env, "SECRET"))
}

// group starts a shell in its own process group that traps the signals in
// ignore; exited closes when it is reaped.
func group(t *testing.T, ignore string) (int, <-chan struct{}, *exec.Cmd) {
	t.Helper()
	script := "echo ready; exec sleep 600"
	if ignore != "" {
		script = "trap '' " + ignore + "; echo ready; while :; do sleep 1; done"
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// the traps are set once it says so
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { Signal(cmd.Process.Pid, syscall.SIGKILL); <-exited })
	return cmd.Process.Pid, exited, cmd
}

func TestEscalateClimbsUntilTheProcessEnds(t *testing.T) {
	pgid, exited, cmd := group(t, "INT TERM")
	var sent []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		Escalate(pgid, []Step{{10 * time.Millisecond, syscall.SIGINT}, {10 * time.Millisecond, syscall.SIGTERM},
			{10 * time.Millisecond, syscall.SIGKILL}, {long, syscall.SIGKILL}},
			func(st Step, waited time.Duration) { sent = append(sent, SignalName(st.Signal)+"@"+waited.String()) }, exited)
	}()
	select {
	case <-done:
	case <-time.After(long):
		t.Fatal("Escalate did not return once the process died")
	}
	assert.Equal(t, []string{"SIGINT@10ms", "SIGTERM@20ms", "SIGKILL@30ms"}, sent, "only SIGKILL ended it; nothing after")
	assert.Equal(t, "signal: killed", cmd.ProcessState.String())
}

func TestEscalateStopsWhenTold(t *testing.T) {
	pgid, exited, _ := group(t, "")
	stop := make(chan struct{})
	close(stop)
	Escalate(pgid, []Step{{0, syscall.SIGKILL}}, nil, nil, stop)
	select {
	case <-exited:
		t.Fatal("a closed until channel must stop the escalation before any signal")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestStopTermsThenKills(t *testing.T) {
	pgid, exited, cmd := group(t, "TERM")
	Stop(context.Background(), pgid, exited, Step{10 * time.Millisecond, syscall.SIGTERM}, Step{10 * time.Millisecond, syscall.SIGKILL})
	assert.Equal(t, "signal: killed", cmd.ProcessState.String(), "SIGTERM was ignored, SIGKILL was not")

	pgid, exited, cmd = group(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Stop(ctx, pgid, exited, Step{long, syscall.SIGTERM}, Step{long, syscall.SIGKILL})
	assert.Equal(t, "signal: terminated", cmd.ProcessState.String(), "an ended ctx cuts the waits short")
}

func TestFindAndProbe(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakecli")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho 'fakecli 1.2.3'\n"), 0o755))
	c := CLI{Name: "fake", Command: "codesession-no-such-cli", EnvVar: "CODESESSION_FAKE_BIN", Install: "npm install fake"}
	_, err := c.Find("", nil)
	require.Error(t, err)
	assert.Equal(t, "the fake CLI is not installed here: no CODESESSION_FAKE_BIN and no codesession-no-such-cli on PATH (npm install fake)", err.Error())
	got, err := c.Find("", []string{"CODESESSION_FAKE_BIN=" + bin})
	require.NoError(t, err)
	assert.Equal(t, bin, got)
	got, err = c.Find("/explicit", []string{"CODESESSION_FAKE_BIN=" + bin})
	require.NoError(t, err)
	assert.Equal(t, "/explicit", got)

	a := VersionProbe{Timeout: long, Parse: LastField}.Availability(context.Background(), bin, nil)
	assert.True(t, a.Available, a.Reason)
	assert.Equal(t, "1.2.3", a.Version)
	a = VersionProbe{Timeout: long, Parse: func(string) string { return "" }}.Availability(context.Background(), bin, nil)
	assert.False(t, a.Available)
	assert.Contains(t, a.Reason, "printed no version")
	a = VersionProbe{Timeout: long}.Availability(context.Background(), "", err)
	assert.False(t, a.Available)

	slow := filepath.Join(dir, "slowcli")
	require.NoError(t, os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755))
	a = VersionProbe{Timeout: 50 * time.Millisecond}.Availability(context.Background(), slow, nil)
	assert.False(t, a.Available)
	assert.Contains(t, a.Reason, "did not answer within 50ms")
	assert.Equal(t, "", FirstField(" "))
}

// failingWriter accepts writes until fail, then errors; it records closes.
type failingWriter struct {
	got    []string
	fail   int
	closes int
}

func (w *failingWriter) Write(b []byte) (int, error) {
	if len(w.got) == w.fail {
		return 0, errors.New("broken pipe")
	}
	w.got = append(w.got, string(b))
	return len(b), nil
}

func (w *failingWriter) Close() error { w.closes++; return nil }

// Pump writes in order and closes at the end; a nil entry closes early and
// ends the writing; a failed write drops the rest (the process is gone).
func TestPump(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  int
		items [][]byte
		want  []string
	}{
		{"in order", 99, [][]byte{[]byte("a"), []byte("b")}, []string{"a", "b"}},
		{"end of input", 99, [][]byte{[]byte("a"), nil, []byte("late")}, []string{"a"}},
		{"failed write", 1, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue[[]byte]()
			for _, b := range tc.items {
				q.Push(b)
			}
			q.Close()
			w := &failingWriter{fail: tc.fail}
			Pump(q, w) // returns: the queue is closed
			assert.Equal(t, tc.want, w.got)
			assert.GreaterOrEqual(t, w.closes, 1, "stdin is closed at the end")
		})
	}
}
