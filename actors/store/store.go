// Package store is the session store: the durable, write-through mirror of
// every session's record (meta.json) and event log (events.jsonl).
//
// Store is the interface; Memory is the in-process implementation, the
// filestore sub-package the on-disk one (the layout in DESIGN.md), and
// Faulty wraps any Store to fail on demand. storetest is the conformance
// suite every implementation passes.
//
// Every method checks the session id (CheckSessionID) before the id touches
// storage; implementations return *messages.Error values whose Op is one of
// the Op constants. The rules shared by implementations (CheckBatch,
// CheckRecord, MaxEventBytes, SortNewestFirst) live here.
//
// Sequence numbers are assigned by the session actor, never by the store:
// Append refuses a batch whose first seq is not LastSeq+1, so disk order and
// seq order always agree. All methods are safe for concurrent use; appends to
// one session are expected from one goroutine (its persist actor).
package store

import (
	"context"

	"github.com/codesession/codesession/messages"
)

// Store persists session records and events.
type Store interface {
	// Create writes a new record; conflict if one with the id exists,
	// invalid if the record fails messages.SessionRecord.Validate.
	Create(ctx context.Context, rec messages.SessionRecord) error
	// PutMeta atomically replaces an existing record; not_found if absent.
	PutMeta(ctx context.Context, rec messages.SessionRecord) error
	// GetMeta reads a record; not_found if absent.
	GetMeta(ctx context.Context, sessionID string) (messages.SessionRecord, error)
	// List returns every record, newest (CreatedAt) first.
	List(ctx context.Context) ([]messages.SessionRecord, error)
	// Append durably appends events to a session's log. The batch must be
	// gapless and start at LastSeq+1 (conflict otherwise, and nothing is
	// written); an event encoding to more than MaxEventBytes is invalid;
	// not_found if the session has neither a record nor a log; an empty
	// batch is a no-op. When Append returns nil the events survive a crash.
	// When it fails otherwise, whether the batch landed is unknown: the
	// caller rereads LastSeq before retrying.
	Append(ctx context.Context, sessionID string, events []messages.PersistedEvent) error
	// AppendRecord appends events as Append does and replaces the record
	// as PutMeta does (rec.SessionID must be sessionID), as one durable
	// write: the file store commits both in one write-ahead group, one
	// fsync where the two calls take two. An empty batch only replaces
	// the record. Nothing is written when either fails its checks. When
	// it returns nil both survive a crash; when it fails otherwise,
	// whether each landed is unknown: the caller rereads LastSeq and
	// writes the record again.
	AppendRecord(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec messages.SessionRecord) error
	// ReadEvents returns events with seq > afterSeq in order, at most limit
	// of them (limit <= 0: all); none for a session with a record but no
	// log, not_found for a session with neither.
	ReadEvents(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]messages.PersistedEvent, error)
	// LastSeq returns the highest persisted seq, 0 when the log is empty or
	// absent; not_found for a session with neither a record nor a log.
	LastSeq(ctx context.Context, sessionID string) (uint64, error)
	// Repairs reports what was repaired when logs were opened (torn tails cut).
	Repairs() []Repair
	// Close flushes and releases resources; the store is unusable afterwards
	// (every other method returns an internal error) and a second Close
	// returns nil.
	Close() error
}

// Pipeliner is a Store whose appends to one session can overlap, so a
// session's next batch joins the next group commit while the previous one
// is being synced (the file store implements it; callers fall back to
// Append/AppendRecord otherwise).
type Pipeliner interface {
	// StartAppend checks events (and rec, when not nil) as AppendRecord
	// does, except that the batch must start right after the last batch
	// of the session started (durable or still in flight), queues them and
	// returns; wait reports the outcome, nil once both are durable. Batches
	// of a session become durable in the order they were started; when
	// one fails, every later one started before the failure was known
	// fails too, so nothing after a gap is ever written. After a failure
	// the caller waits for every batch it started, then rereads LastSeq.
	StartAppend(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord) (wait func() error)
	// StartAppendThen is StartAppend with the outcome handed to done
	// instead of waited for, so no goroutine of the caller's waits for each
	// batch. done is called exactly once: before StartAppendThen returns
	// when the batch is refused before it is queued, otherwise later, on a
	// goroutine of the store's. A session's batches are answered one at a
	// time, in the order they were started. done must return quickly and
	// must not call the store: the store answers every session's batches
	// behind it.
	StartAppendThen(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord, done func(error))
}

// Repair describes a torn last line cut from a session's event log: the
// trace of a crash in the middle of an append.
type Repair struct {
	SessionID string `json:"sessionId"`
	// Offset is where the log was cut; Bytes how many bytes were removed.
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
}
