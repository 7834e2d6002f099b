package subprocesstest

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RunGroup runs bin with args in dir with exactly env and stdin /dev/null, in its
// own process group, and returns its combined output and exit error. The
// group is killed once hang has passed (a deadline that only stops a hang),
// as soon as stop (when not nil) accepts the output so far (a program that
// stays up, such as a TUI, is ended there and its error is nil), and at the
// end of t, so nothing the program started outlives the test.
func RunGroup(t testing.TB, hang time.Duration, stop func(out string) bool, dir string, env []string, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env // stdin is /dev/null
	// a session of its own: its own process group, and no controlling
	// terminal a TUI could stop on (SIGTTOU) or draw to
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return out.String(), err
		case <-tick.C:
			if stop != nil && stop(out.String()) {
				_ = cmd.Cancel()
				<-exited
				return out.String(), nil
			}
		}
	}
}

// SyncBuffer is a program's output, safe to read while the program runs
// and exec's copier writes into it.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
