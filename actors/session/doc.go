// Package session is one code session: the pure state machine (Core) that
// makes every decision — turn state, posture, rounds and max_rounds, the
// pending clarification, queued guidance, the round-history diet, which
// result a reader gets and when, what to persist — and the thin hollywood
// actor shell that carries out its effects with three supervised children:
// the transport host (drives the backend), diff capture and persist.
//
// Concurrency: Core is single-threaded and does no I/O; the actor owns it.
// Blocking work (backend I/O, git, the store) runs in the children or in
// goroutines that send messages back, never in the session's Receive.
//
// Testing: core_test.go drives Core with table tests and scripted scenarios
// (testdata/*.txt, regenerated with -rewrite); actor tests run under
// testing/synctest.
package session
