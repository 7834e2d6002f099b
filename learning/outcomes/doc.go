// Package outcomes records one outcome per session run at release (seed 000
// §7) in $CODESESSION_HOME/learning/outcomes.jsonl, and reads them back.
//
// Log is an append-only JSON-lines file shared by every process using the
// same home: appends take an exclusive flock, catch up on lines other
// processes wrote, skip a key already present (idempotent per session run)
// and fsync before returning. A torn last line (a crash mid-append) is cut
// when the file is opened under the lock, so it is never parsed and the
// outcome it held is recorded again by the next Reconcile.
//
// Recorder builds a Record from what the store holds (the record and the
// persisted events, replayed through learning.Tally so the evidence matches
// the session's own verdict), with the repository revision at start (from
// Started, journalled in revisions.jsonl) and at release. Reconcile, run at
// boot, records every released session whose outcome is missing: a crash
// between the released event and the append loses nothing, and one between
// the append and anything after it records nothing twice.
//
// Concurrency: Log and Recorder are safe for concurrent use. Tests use a
// fake Source, temporary homes and an injected clock; Build is pure.
package outcomes
