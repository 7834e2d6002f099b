// Package cli is the kit a stream-JSON agent CLI backend (claude-code,
// droid, codex's JSON-RPC app-server) is built on: one persistent process
// per session speaking one JSON object per line each way. The backend supplies what is its own —
// the pure decoder of a stdout line (Backend.Decode: no I/O, no state,
// fuzzed and golden-tested on the reference captures in each backend),
// the encoders of its requests, its session core (a single-threaded
// state machine: decoded lines and ops in, Effects out) and its
// descriptor, argv and environment — and the kit owns the rest: the
// process (spawned through transports/subprocess under the process kit,
// with its pipes, capped line reader and stderr tail), the requests of
// the host waiting for their replies, the one emitter that calls the
// Sink, the interrupt's escalation with signals, the stop on Close, the
// warm-pool glue (Adopt, Refill, WarmGroup) and the find, version probe
// and options every such backend shares (Config).
//
// Replies are matched to the host's requests by id (Reply.ID, minted by
// Shell.NewID: codex makes them JSON-RPC numbers). A core may ask for
// more than lines: a Followup is a request the shell sends after a step
// and waits for outside the mutex, then writes what must follow it (codex
// steers a deny's reason into the turn before it declines); an
// InterruptAsker builds the interrupt request from its state (codex's
// turn/interrupt names the thread and the turn), or says the CLI cannot
// be asked yet, and the escalation then signals without the grace.
//
// # Lifecycle of a Shell
//
//	NewShell --Spawn--> booting --Begin--> started (events reach the sink)
//	   started --exit--> dead --Spawn (the backend's restart)--> started
//	   any --Close--> closed (no sink call starts; the group is stopped)
//
// # Concurrency
//
// A Shell's state and its core are under the Shell's mutex (Lock, Unlock;
// the backend takes it around its own steps of the core). Per process a
// stdout reader, a stderr reader, a stdin writer and a waiter run (from
// transports/subprocess); per Shell one emitter is the only caller of the
// Sink, in the order the core produced the events; an interrupt runs an
// escalator, and a Followup a goroutine of its own. Request waits for its
// reply outside the mutex. Close waits for every goroutine, or kills the
// process group when its context ends.
//
// # Testing
//
// The kit is exercised through its backends: their fake-CLI tests (the
// test binary speaking the protocol: restarts, exits mid-turn,
// escalation, refused and unanswered requests) and their live tests
// against the pinned CLIs. Its own tests cover Effects and the turn
// bookkeeping, and on a fake line CLI (the test binary) a Followup's
// writes waiting for its reply, an InterruptAsker that cannot be asked
// and a refused interrupt that raced the turn's end; clitest holds the
// event recorder the backends' tests share.
package cli
