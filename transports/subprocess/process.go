package subprocess

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
)

// Spawn says how to start an agent CLI that speaks newline-delimited
// messages on its stdin and stdout (claude-code's stream-json, droid's
// stream-jsonrpc), and where its output goes.
type Spawn struct {
	// Bin, Args, Dir and Env are the command: the executable, the argv
	// after it, the working directory and the full environment (the
	// backend builds it with proc.EnvPolicy.Environ).
	Bin  string
	Args []string
	Dir  string
	Env  []string
	// Procs and Confine are the session's process bookkeeping and
	// confinement (SessionSpec.Procs and SessionSpec.Confine), passed to
	// Procs.Start as they are.
	Procs   *proc.Group
	Confine *proc.Confinement
	// LineCap caps one stdout line; a longer one reaches OnLine as its
	// length alone.
	LineCap int
	// TailBytes is how much of the end of stderr is kept (16 KiB when 0).
	TailBytes int
	// OnLine gets every non-blank stdout line, without its newline (valid
	// only during the call), with the time it was read; or, for a line
	// over LineCap, nil and its length in over. One goroutine calls it,
	// in order.
	OnLine func(line []byte, over int, readAt time.Time)
	// OnExit runs once the process has exited, its stdout and stderr are
	// drained and what was left of its group is killed: status is the exit
	// ("exit status 0", "signal: killed"), interrupted whether Escalate
	// signalled it. Exited closes after OnExit returns.
	OnExit func(status string, interrupted bool)
	// WG, when set, counts the process's four goroutines (stdout and
	// stderr readers, stdin writer, waiter), so a session's Close can wait
	// for all of them.
	WG *sync.WaitGroup
}

// Process is a running agent CLI in its own process group under the
// process kit: a stdout reader feeding Spawn.OnLine, the end of its stderr
// (Tail), a queue of what is written to its stdin, and a waiter that
// reports the exit. It is safe for concurrent use.
type Process struct {
	cmd    *exec.Cmd
	handle *proc.Handle
	// Pgid is its process group: signals reach the CLI's tools too.
	Pgid   int
	stdin  io.WriteCloser
	stdout *os.File
	stderr *os.File
	writes *Queue[[]byte] // a nil entry closes stdin
	tail   *Tail

	readerDone    chan struct{}
	stderrDone    chan struct{}
	exited        chan struct{}
	interruptKill atomic.Bool
}

// Start spawns sp's command with its pipes through sp.Procs (its own
// process group under the kit's watchdog, the session's cgroup and a
// boot-sweep record, and the confinement) and starts its goroutines.
func Start(sp Spawn) (*Process, error) {
	cmd := exec.Command(sp.Bin, sp.Args...)
	cmd.Dir = sp.Dir
	cmd.Env = sp.Env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	h, err := sp.Procs.Start(cmd, proc.Options{Confine: sp.Confine})
	if err != nil {
		stdin.Close()
		for _, f := range []*os.File{outR, outW, errR, errW} {
			f.Close()
		}
		return nil, err
	}
	outW.Close()
	errW.Close()
	tailBytes := sp.TailBytes
	if tailBytes <= 0 {
		tailBytes = DefaultTailBytes
	}
	p := &Process{cmd: cmd, handle: h, Pgid: h.Pgid, stdin: stdin, stdout: outR, stderr: errR,
		writes: NewQueue[[]byte](), tail: NewTail(tailBytes),
		readerDone: make(chan struct{}), stderrDone: make(chan struct{}), exited: make(chan struct{})}
	wg := sp.WG
	if wg == nil {
		wg = new(sync.WaitGroup)
	}
	wg.Add(4)
	go func() { defer wg.Done(); p.readLoop(sp.LineCap, sp.OnLine) }()
	go func() {
		defer wg.Done()
		defer close(p.stderrDone)
		_, _ = io.Copy(p.tail, p.stderr)
	}()
	go func() { defer wg.Done(); Pump(p.writes, p.stdin) }() // a failed write: the waiter reports the exit
	go func() { defer wg.Done(); p.waitLoop(sp.OnExit) }()
	return p, nil
}

func (p *Process) readLoop(lineCap int, onLine func([]byte, int, time.Time)) {
	defer close(p.readerDone)
	lr := transports.NewLineReader(p.stdout, lineCap)
	for {
		line, over, err := lr.Next()
		readAt := time.Now()
		if err != nil {
			return
		}
		if over == 0 && len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if onLine != nil {
			onLine(line, over, readAt)
		}
	}
}

// waitLoop waits for the process, lets the readers drain (a child that
// still holds stdout gets 2 s), kills what is left of its group and
// reports the exit.
func (p *Process) waitLoop(onExit func(string, bool)) {
	err := p.cmd.Wait()
	defer p.handle.Release()
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	drain := time.NewTimer(2 * time.Second)
	select {
	case <-p.readerDone:
	case <-drain.C: // a child still holds stdout
	}
	drain.Stop()
	Signal(p.Pgid, syscall.SIGKILL) // whatever is left of the group
	_ = p.stdout.Close()
	<-p.readerDone
	select {
	case <-p.stderrDone:
	case <-time.After(time.Second):
	}
	_ = p.stderr.Close()
	<-p.stderrDone
	p.writes.Close()
	if onExit != nil {
		onExit(status, p.interruptKill.Load())
	}
	close(p.exited)
}

// Pid is the CLI's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Write queues b (one whole line, newline included) for stdin.
func (p *Process) Write(b []byte) { p.writes.Push(b) }

// Tail is the end of stderr kept so far.
func (p *Process) Tail() *Tail { return p.tail }

// Exited closes once the exit is handled (after Spawn.OnExit).
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Kill sends SIGKILL to the process group.
func (p *Process) Kill() { Signal(p.Pgid, syscall.SIGKILL) }

// Escalate walks the process group up steps while an interrupted turn
// does not end (see the function Escalate); from the first signal on the
// exit counts as the interrupt's (OnExit's interrupted). sending runs
// before each signal; until are the channels that stop it besides the
// process's own exit.
func (p *Process) Escalate(steps []Step, sending func(st Step, waited time.Duration), until ...<-chan struct{}) {
	Escalate(p.Pgid, steps, func(st Step, waited time.Duration) {
		p.interruptKill.Store(true)
		if sending != nil {
			sending(st, waited)
		}
	}, append(until, p.exited)...)
}

// Stop ends the process: stdin is closed, then the group walks up steps
// until it exits (see the function Stop), and Stop waits for the exit.
func (p *Process) Stop(ctx context.Context, steps ...Step) {
	p.writes.Push(nil)
	Stop(ctx, p.Pgid, p.exited, steps...)
}

// AwaitClose is the end of a session's Close: it waits for wg (every
// goroutine of the session), then runs then; when ctx ends first it runs
// kill (the process group's SIGKILL) and returns a timeout error that
// names the CLI.
func AwaitClose(ctx context.Context, wg *sync.WaitGroup, then, kill func(), cli string) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		if then != nil {
			then()
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		kill()
		return messages.Wrap(messages.CodeTimeout, "close", ctx.Err(), "the "+cli+" session did not stop in time; its process group was killed")
	}
}
