// Package supervise is codesession's supervision layer on top of hollywood
// v1.0.5. Hollywood's own supervision must never run: an actor that goes past
// MaxRestarts crashes the whole process, a panic in Started crashes the
// spawner, restarts sleep on the actor's goroutine, Stopped fires on every
// crash, and a parent is never told that a child failed (all verified
// against hollywood v1.0.5's source and behaviour). This package makes sure no
// panic ever reaches hollywood's restart path and does supervision itself, in
// OTP's vocabulary.
//
// It owns:
//
//   - Policy (pure data): a Strategy (OneForOne, RestForOne), a restart
//     Intensity within a sliding Window per child, and an exponential
//     Backoff with jitter and reset after stable uptime. DefaultPolicy,
//     Validate.
//   - Tracker: the pure decision core (after nomad's RestartTracker).
//     Failure(now) returns a Decision: restart or not, after which delay,
//     and why (exported Reason constants). It holds no timers; time is an
//     argument, and the backoff (cenkalti/backoff) reads a clock fed from it.
//   - Recover: the middleware installed, outermost, on every actor we spawn.
//     It recovers panics (Initialized, Started, Receive and Stopped alike),
//     reports them (ChildFailed to the parent, or RecoverOptions.OnFailure
//     for a top-level actor), and then bounces the failed instance's later
//     messages (Undelivered) so that only the panicking message is lost.
//     Spawn spawns a top-level actor with it, SpawnChild a child that no
//     Supervisor manages (the registry's sessions); every spawn also gets
//     actor.WithMaxRestarts(-1) as a backstop and a small inbox
//     (DefaultInboxSize; never 0, which makes hollywood's senders panic).
//   - Supervisor: the children of one parent, declared as ChildSpecs
//     (Permanent, Transient or Temporary; inbox size; shutdown timeout).
//     StartAll spawns them in order; Send delivers or buffers; Handle
//     consumes failure reports and timers and returns an Escalation when a
//     child is given up on; StopChildren and StopAll stop children one at a
//     time with a deadline each; OnEvent observes restarts, escalations,
//     exits, abandonments and drops.
//
// Children get deterministic PIDs "<parent ID>/<name>/<generation>", for
// example "session/s1/transport/2": hollywood already puts the name in the
// kind, and a new generation never collides with an old instance still
// stopping (or abandoned). Generations start at 1 and grow by one per restart.
//
// # Lifecycle of a child
//
//	           StartAll (gen 1)
//	                  |
//	                  v
//	+--------------> up ----------------------+-------------------------+
//	|                 |                       |                         |
//	|                 | panic, or an exit     | normal exit of a        | StopChildren
//	|                 | that restarts         | Transient/Temporary     |
//	|                 v                       v                         v
//	|              failed                   down <------------------ shutdown
//	|                 |   \                (final)              (Poison, bounded by
//	|   within policy |    \ intensity exceeded,                 ShutdownTimeout)
//	|                 |     \ or a Temporary panic
//	|                 v      `-----------> escalated (final; Handle returns *Escalation)
//	|             stopping    Poison: queued messages bounce back;
//	|                 |       gone, or abandoned after ShutdownTimeout
//	|                 v
//	|              backoff    timer; under RestForOne also waits for
//	|                 |       earlier siblings to be up
//	+-----------------+
//	  respawn as gen+1; redeliver the bounced, then the buffered messages
//
// "failed" is momentary: Handle moves a failed child on in the same call.
// State reports StateUp, StateStopping, StateBackoff, StateShutdown,
// StateDown or StateEscalated. While a child is not up, PID returns nil and
// Send buffers (up to MaxBuffered); on restart the new generation gets, in
// order, first the messages the old instance bounced, then those buffered by
// Send. Messages that third parties sent straight to the old PID after it was
// poisoned may be dropped by hollywood without a dead letter.
//
// Under RestForOne a failure also stops the healthy children started after
// the failed one (they drain their queues first: Poison is FIFO) and restarts
// them, in start order, once the failed one is back up; their restarts do not
// count against their own intensity. Intensity and backoff are per child; an
// Escalation leaves the other children running until the parent acts (it
// usually calls StopAll and then reports its own failure upward).
//
// A child ends without failing by calling Exit(c, normal) from its own
// Receive, or by being stopped by someone else (the middleware notices the
// Stopped and reports ChildExited{Normal: true}). Permanent children are
// restarted after any exit; Transient ones only after an abnormal one;
// Temporary ones never (and a Temporary child that panics escalates with
// ReasonTemporary).
//
// # Concurrency
//
// A Supervisor is not an actor and has no lock: the parent calls it only from
// its own Receive (StartAll typically in Started; Handle first thing for
// every message). Nothing blocks in Receive: backoff timers are time.AfterFunc
// that send a private message to the parent, and waiting for a poisoned
// instance to go happens in a goroutine that sends a private message when the
// instance is gone or its ShutdownTimeout passed. Those goroutines end on
// their own. Messages of an older generation (a late failure report, a stale
// timer) are ignored. OnEvent runs synchronously on the parent's goroutine.
// Recover's state belongs to one instance and is touched only on the actor's
// goroutine. A parent about to stop without StopAll should call Close so that
// no timer outlives it.
//
// Stopped is passed through to a failed instance on purpose, so that cleanup
// (kill the process group, close files, Unsubscribe) still runs; a panic in
// it is recovered and reported. Handlers must be idempotent and nil-safe.
//
// # Testing
//
// Tracker is tested on its own with table tests. The actor tests build a
// parent with two or three children under testing/synctest: hollywood runs
// inside the bubble (create the engine inside it), backoffs of ten minutes
// pass in no real time, and synctest.Wait lets the tree settle. Every actor
// test subscribes to hollywood's event stream and asserts that no
// ActorRestartedEvent, ActorMaxRestartsExceededEvent or ActorDuplicateIdEvent
// was ever broadcast, i.e. that no panic reached hollywood. synctest already
// fails a test whose goroutines outlive it; goleak (TestMain) also covers the
// one real-time test. Set Policy.Backoff.RandomizationFactor to 0 for
// deterministic delays.
package supervise
