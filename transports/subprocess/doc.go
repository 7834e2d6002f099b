// Package subprocess is what the backends that drive an agent CLI as a
// child process share around starting it (transports/proc contains it; this
// package is the everyday rest): running a line-protocol CLI with its
// pipes, capped stdout lines, stderr tail, stdin queue and exit report
// (Start, Process: claude-code and droid run on it), finding the executable (CLI.Find: an
// explicit path, the backend's CODESESSION_<X>_BIN, else PATH), asking it
// for its version (VersionProbe), building its environment (Environ,
// EnvValue), keeping the end of its stderr for the error that reports its
// death (Tail), queueing what is written to its stdin (Queue), and ending
// its process group step by step (Escalate for an interrupt, Stop for a
// close: end of input, a grace, SIGTERM, SIGKILL).
//
// The backends differ in what they scrub from the environment, how they
// parse a version and how long each step waits; those stay in the
// backends, as arguments here. Everything is safe for concurrent use; Tail
// and Queue are safe to share between goroutines by design.
//
// Tests: subprocess's own tests run real processes (/bin/sh) for the
// signal steps; subprocesstest finds a pinned CLI for a backend's live
// tests (a skip without it, a failure under CI=true).
package subprocess
