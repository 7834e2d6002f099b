// Package session is one code session: the pure state machine (Core) that
// makes every decision — turn state, posture, rounds and max_rounds, the
// pending clarification, queued guidance, the round-history diet, which
// result a reader gets and when, what to persist — and the thin hollywood
// actor shell that carries out its effects with three supervised children:
// the transport host (drives the backend), diff capture and persist. The
// session's end (Lifecycle: running, stopping children, persisting
// released, stopping persist, done) is decided in the core too; the shell
// carries out its LifeEffects. The host gets its backend spec as immutable
// snapshots by message, runs backend calls off its Receive, and abandons
// (and kills) a backend that will not close; every diff-capture stage has a
// deadline. Diff capture takes the baseline before a turn reaches the
// backend and the diff after it closes; between, each tool result lets it
// diff ahead (DPrepare, one at a time), and after each answer it settles
// what is left (diffcapture.Settler), both beside the turn. A capturer
// that can answer a stage at once (diffcapture.Quick: git's witness
// holding, a few stat calls, no git, no lock waited for) is asked in the
// session's own Receive first, sparing the turn the round trip through the
// differ's goroutine; the differ settles after it, and a turn whose diff
// cannot be had at once goes to the differ's Finish with the baseline
// taken. With capture
// off (diffcapture.Noop) the core decides the baseline and the diff itself
// (Core.CaptureOff): no round trip to the diff child, and a turn's
// turn_end and turn_diff reach the store in one write. On a store that
// pipelines appends (store.Pipeliner) the session starts each append
// itself, on the writer it shares with its persist child (persistPath),
// and the store's report sends the ack: no hop through the child per
// batch. The child takes the rest (the record's creation or adoption, a
// re-sync after a failure, a store that panicked), writing a request's
// events and record with one store call (store.AppendRecord). The events
// wait in write-once chunks until durable (heldEvents). A panic in the
// session answers every caller it holds (Spawn).
//
// Effects are typed: the core's Output carries TransportCmds and DiffCmds,
// sealed interfaces whose handlers are type switches over a closed set. The
// core owns no baseline and imports no diff capture: the shell keeps what
// a capturer snapshots, and when a stage is lost it makes the fallback diff
// of the turn's edit-tool events (Core.EditPaths) and hands it to
// Core.DiffLost. The actor's Receive hands each message to its family's
// handler (receive.go): ops, transport, diff capture, persistence, release;
// supervision messages go to the supervisor first.
//
// Concurrency: Core is single-threaded and does no I/O; the actor owns it.
// Blocking work (backend I/O, git, the store) runs in the children or in
// goroutines that send messages back, never in the session's Receive (a
// Quick answer is a bounded number of stat calls on a local file system).
//
// Testing: core_test.go drives Core with table tests and scripted scenarios
// (testdata/*.txt, regenerated with -rewrite), lifecycle_test.go the
// lifecycle table; actor tests run under testing/synctest. Options.Inject
// lets tests inject faults into the actor.
package session
