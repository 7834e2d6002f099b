// Package bench is the concurrent-session harness and the benchmark suites
// behind `codesession bench`. It measures how codesession behaves as work
// grows next to the physical limits it builds on, measured in the same run
// on the same machine, and reports ratios, because absolute times on a
// shared 2-core machine are not stable. It checks correctness under that
// load: a benchmark that loses an event has failed.
//
// # Suites
//
// Run(ctx, name, Options) runs one suite and returns a Result: rows (a
// figure, the baseline measured in the same run, their ratio), correctness
// checks and notes. Report gathers results and prints them as tables
// (WriteText) or JSON (WriteJSON).
//
//   - sessions: N concurrent sessions of the script backend, K turns of
//     about M events each, with clarifications answered after a steering
//     guidance and later turns started by queued guidance. Start rate, op
//     latencies (start, read-turn, answer, guide, stop), events persisted
//     per second, heap, RSS and goroutines per live session, against raw
//     hollywood actor trees doing the same ops with the same durable
//     writes, and plain files taking the same appends. Afterwards every
//     log is read back: gapless, one released event last, each turn and
//     clarification recorded.
//   - store: durable appends through the store against the same bytes
//     written to plain files with the same batching and fsyncs; meta.json
//     atomic replaces likewise.
//   - routing: read-turns of already-buffered results through registry and
//     session against hollywood's own request round trip.
//   - feed: the control plane's SSE fan-out (bridge and server on
//     127.0.0.1) to S subscribers at a target rate, with deliberately slow
//     subscribers, against a plain net/http fan-out.
//   - native: the native backend against modelmock at increasing
//     concurrency: turns per second and the runtime's share of a turn,
//     against bare model calls of the same shape.
//   - hooks: the suites other issues add: diff capture against bare git,
//     the claude-code backend against its own CLI (with the pinned binary
//     only), cluster routing (a pointer to the cluster suite).
//   - cluster: three nodes (actors/cluster) on 127.0.0.1: a turn routed
//     through another node against the same turn on the owning node and a
//     raw hollywood remote Request, and routed ops/s against raw remote
//     Requests/s.
//
// # Verdicts
//
// A suite fails only when a correctness check fails: a lost or duplicated
// event, a session not released, a subscriber that kept up but missed an
// event, an op that did not answer. No figure is ever judged against a
// threshold, so a slow machine cannot fail a suite, and no test here
// asserts a speed. Run's error means a suite could not run at all.
//
// # Concurrency
//
// A suite runs its own runtimes, engines, servers and scratch directories
// (under Options.Home, removed afterwards unless Keep) and shares nothing
// with another; Run may be called from several goroutines, though the
// figures then measure each other. Options.Store and Options.WrapHandler
// let a caller put a store or handler of its own on the measured path,
// which is how the tests show that a lost event fails a suite.
//
// # Testing
//
// bench_test.go runs every suite small (tens of sessions, two turns) and
// asserts its checks pass, and that a deliberately broken input (a store
// that loses a released event or a line of a log, a server that skips an
// event for one subscriber) makes it fail. routing_bench_test.go holds Go
// benchmarks (go test -bench) of routing through the Runtime next to raw
// hollywood round trips. README.md says how to run each suite and what was
// measured on a 2-core machine.
package bench
