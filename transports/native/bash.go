package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codesession/codesession/transports/proc"
)

// cappedBuffer keeps the first max bytes written to it and counts them all.
type cappedBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += len(p)
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// shell is the shell bash runs commands with: bash when installed, else sh.
func shell() string {
	for _, s := range []string{"/bin/bash", "/usr/bin/bash"} {
		if _, err := os.Stat(s); err == nil {
			return s
		}
	}
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

// runCommand runs command with the shell in the workspace's real path,
// contained by proc (its own process group under the watchdog, the
// session's cgroup, writes confined to the workspace by Landlock where the
// kernel has it), with env, under a wall clock of wall. Stdout and
// stderr go together into one buffer capped at the tool output cap; the
// cap, a kill by the wall clock and an interrupt are said in the result.
// When the shell exits, whatever it left running in its group is killed.
func runCommand(ctx context.Context, env *toolEnv, command string, wall time.Duration) toolResult {
	capBytes := env.outputCap
	if capBytes <= 0 {
		capBytes = DefaultOutputCap
	}
	out := &cappedBuffer{max: capBytes}
	pr, pw, err := os.Pipe()
	if err != nil {
		return errResult("bash: cannot make a pipe: %v", err)
	}
	cmd := exec.Command(shell(), "-c", command)
	cmd.Dir = env.ws.Real()
	cmd.Env = env.env
	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	// its own group under the watchdog: a wall clock, an interrupt or the
	// runtime's death kills the whole tree
	h, err := env.procs.Start(cmd, proc.Options{Confine: env.confine})
	if err != nil {
		pr.Close()
		pw.Close()
		return errResult("bash: cannot start %s: %v", shell(), err)
	}
	defer h.Release()
	pw.Close() // the child holds its own copy
	pgid := h.Pgid
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
		pr.Close()
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	timer := time.NewTimer(wall)
	defer timer.Stop()
	var why string
	var werr error
	select {
	case werr = <-waited:
	case <-timer.C:
		why = fmt.Sprintf("killed: the command ran past its wall clock of %s", wall)
		werr = killGroup(pgid, waited)
	case <-ctx.Done():
		why = "killed: the turn was interrupted"
		werr = killGroup(pgid, waited)
	}
	// Whatever the shell left in its group (a background job holding the
	// pipe) goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-copied:
	case <-time.After(bashKillGrace):
		// A process that left the group still holds the pipe: stop reading.
		pr.Close()
		<-copied
	}

	out.mu.Lock()
	text, total := string(out.buf), out.total
	out.mu.Unlock()
	res := toolResult{}
	var b strings.Builder
	b.WriteString(text)
	if total > capBytes {
		res.truncated, res.original = true, total
		fmt.Fprintf(&b, "\n[output truncated: %d of %d bytes shown]", capBytes, total)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	switch {
	case why != "":
		res.isError = true
		fmt.Fprintf(&b, "[%s after %s]", why, time.Since(start).Round(time.Millisecond))
	case werr != nil && code < 0:
		res.isError = true
		fmt.Fprintf(&b, "[the command failed: %v]", werr)
	case code != 0:
		res.isError = true
		fmt.Fprintf(&b, "[exit code %d]", code)
	default:
		fmt.Fprintf(&b, "[exit code 0]")
	}
	res.output = b.String()
	return res
}

// killGroup asks the process group to stop (SIGTERM), then kills it
// (SIGKILL) when it has not gone after a grace period, and returns the
// shell's exit.
func killGroup(pgid int, waited <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-waited:
		return err
	case <-time.After(bashKillGrace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	err := <-waited
	if err == nil {
		err = errors.New("killed")
	}
	return err
}
