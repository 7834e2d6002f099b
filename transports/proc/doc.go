// Package proc is the subprocess kit every backend starts its processes
// with, instead of exec.Command's Start: no process outlives its session,
// the runtime's SIGKILL included.
//
// Start wraps the command in a watchdog: /bin/sh becomes the leader of a new
// process group, forks a watcher that holds the read end of a pipe (the
// lifeline) whose write end only the runtime holds, and then execs the real
// command in place, so the command keeps the pid and the group the caller
// sees. When the runtime dies, by any signal, the kernel closes the write
// end; the watcher reads EOF and kills the whole group (and, where a cgroup
// v2 hierarchy is writable, the session's cgroup through cgroup.kill, which
// also catches children that left the group with setsid). This is the
// containerd-shim/conmon pattern with the smallest possible shim. A shell is
// used rather than a re-exec of os.Executable because under `go test` that
// is the test binary: every package whose tests start a backend would need a
// TestMain hook, and one forgotten hook re-runs a whole test suite as the
// "watchdog". /bin/sh is on every Linux host. Pdeathsig is not used: it
// fires when the forking OS thread exits, which Go does not pin.
//
// A Group is one session's processes: their cgroup (created on first use,
// killed and removed at Close) and the records under the runtime's home
// (one JSON file per live process group, with the leader's start time) that
// Sweep reads at boot to kill what a dead runtime left, never touching a pid
// that was reused (the start time differs) and never a group of a runtime
// that is still alive.
//
// Confine (Linux Landlock, through github.com/landlock-lsm/go-landlock)
// restricts writes of a process to given directories; reads stay possible.
// The restriction is applied to one locked OS thread, the command is forked
// from that thread (it inherits the thread's Landlock domain), and the
// goroutine then exits locked, so the Go runtime throws the thread away and
// the daemon itself is never restricted. Go's scheduler creates new threads
// from a clean template thread while a locked thread runs, so no other
// thread inherits the domain either.
//
// Env is the one environment policy: an allowlist (PATH, HOME, locale,
// TERM, the backend's own documented variables, what the caller names),
// never the daemon's whole environment; founder credentials (seed 002) in
// the daemon's environment refuse the start with a *CredentialError unless
// named for that backend.
//
// Everything here is safe for concurrent use. Tests run real processes:
// the watchdog test SIGKILLs a helper "runtime" (the test binary in a
// hidden mode, proc's own TestMain only) and checks that its children die.
package proc
