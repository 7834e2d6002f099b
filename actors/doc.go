// Package actors is codesession's runtime: Runtime, the embedded API (one
// method per op, each taking a context and an owner scope), on a hollywood
// engine with a registry actor that routes ops, owns ownership scopes and
// their constraints and spawns one session actor per session
// (actors/session), each supervising its transport host, diff capture and
// persist children (actors/supervise). Records and events live in a Store
// (actors/store).
//
// Lifecycle of a session, as the registry sees it:
//
//	start -> live --(stop | ReleaseScope | lifetime | failed | Close)--> released
//
// A session ends only by a release message; `released` is always its last
// event. At New, records left running or idle by a process that died are
// marked orphaned.
//
// Concurrency: Runtime's methods are safe for concurrent use. Each op is a
// message with its own buffered reply channel, answered exactly once, so no
// actor ever blocks on a caller. A second concurrent read-turn on one session
// is a conflict.
//
// Testing: runtime_test.go drives Runtime end to end with the script
// backend; constraints_test.go holds every scope rule as a table.
package actors
