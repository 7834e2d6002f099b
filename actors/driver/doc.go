// Package driver is the driver of seed 000 §2: a driver is data. A
// persona (markdown with frontmatter, persona.go; the packaged
// code-specialist, overridable by <home>/agents/code-specialist.md) runs
// as the native backend's in-process loop whose ONLY tool is the op tool
// (actors/optool, the same dispatcher the MCP server serves), under a
// fresh ownership scope of its own.
//
// A delegation's life (driver.go):
//
//	Delegate: load persona -> Merge its policy with the caller's overrides
//	  (narrow-only, policy.go) -> SetScopeConstraints(scope) BEFORE the
//	  driver's first turn -> record (running) -> first message = brief,
//	  policy, then the low-trust lesson block when one qualifies
//	running: the driver calls code_session (list-backends, start, read-turn,
//	  answer, guide, stop with a verdict); the sessions it starts are kept
//	  on its record
//	settle (its turn ended: done | failed; Cancel/Close: cancelled):
//	  close the loop -> ReleaseScope(scope): every session it owns is
//	  released{sweep} and the scope's constraints cleared -> record settled
//	  -> code_specialist_* metrics (metrics.go)
//	killed (its process died): the next boot marks the record killed
//	  (Records.MarkKilled); its sessions are orphaned by the store's sweep
//
// One outcome per driven session is recorded by the learning loop at each
// session's release (the driver's stop verdict, else inferred; idempotent).
// A resumed delegation carries ResumeOf: the scope's constraints get a
// one-shot AdoptRecordID pin, so the driver's first start adopts the
// record (same id, gapless seq, rounds continuing, one new run).
//
// Records (record.go) are JSON files under <home>/delegations, written
// atomically; no new store kind: the sessions a delegation drove are
// ordinary session records whose runs name its scope.
//
// Concurrency: a Delegator is safe for concurrent use; each delegation
// settles on its own goroutine. Testing: persona_test.go (parser table,
// FuzzParse), policy_test.go (narrow-only merge), and driver_test.go in
// package actors drives real delegations against modelmock.
package driver
