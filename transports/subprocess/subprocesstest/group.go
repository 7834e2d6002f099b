package subprocesstest

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RunGroup runs bin with args in dir with exactly env and no stdin, in its
// own process group, and returns its combined output and exit error. The
// group is killed once hang has passed (a deadline that only stops a hang)
// and at the end of t, so nothing the program started outlives the test.
func RunGroup(t testing.TB, hang time.Duration, dir string, env []string, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, strings.NewReader("")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out // one writer: exec copies both through one goroutine
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	return out.String(), err
}
