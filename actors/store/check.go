package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/codesession/codesession/messages"
)

// Op names carried by the errors of every Store implementation and passed to
// Faulty's failure hook.
const (
	OpCreate     = "store.create"
	OpPutMeta    = "store.putMeta"
	OpGetMeta    = "store.getMeta"
	OpList       = "store.list"
	OpAppend     = "store.append"
	OpReadEvents = "store.readEvents"
	OpLastSeq    = "store.lastSeq"
	OpClose      = "store.close"
)

// MaxEventBytes caps the JSON encoding of one persisted event (one line of
// events.jsonl, newline excluded). Append refuses a batch holding a larger
// event with code invalid and writes nothing; readers treat a longer line as
// corrupt.
const MaxEventBytes = 16 << 20

// The helpers below hold the rules every implementation shares, so that the
// memory and file stores cannot drift apart.

// CheckSessionID returns an invalid-argument error unless id has the shape
// messages.NewSessionID makes. Implementations call it before an id touches
// anything else, so an id such as "../x" never reaches a path.
func CheckSessionID(op, id string) error {
	if id == "" {
		return messages.FieldError(op, "sessionId", "required")
	}
	if !messages.ValidSessionID(id) {
		return messages.FieldError(op, "sessionId", "malformed session id")
	}
	return nil
}

// CheckRecord validates a record about to be written (messages.SessionRecord
// Validate), reporting op as the failed operation.
func CheckRecord(op string, rec *messages.SessionRecord) error {
	err := rec.Validate()
	if err == nil {
		return nil
	}
	var e *messages.Error
	if errors.As(err, &e) {
		c := *e
		c.Op = op
		return &c
	}
	return messages.Wrap(messages.CodeInvalid, op, err, "invalid record")
}

// CheckRecordOf is CheckRecord for a record written beside a session's
// events (AppendRecord): it must also be that session's record.
func CheckRecordOf(op, sessionID string, rec *messages.SessionRecord) error {
	if err := CheckRecord(op, rec); err != nil {
		return err
	}
	if rec.SessionID != sessionID {
		return messages.Errorf(messages.CodeInvalid, op, "the record is of session %s, not of %s", rec.SessionID, sessionID)
	}
	return nil
}

// CheckContext returns nil while ctx is live; else a timeout error for an
// expired deadline, an internal one for a cancellation.
func CheckContext(ctx context.Context, op string) error {
	err := ctx.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return messages.Wrap(messages.CodeTimeout, op, err, "deadline exceeded")
	default:
		return messages.Wrap(messages.CodeInternal, op, err, "canceled")
	}
}

// CheckBatch checks that events continue a log whose highest seq is lastSeq:
// the first seq is lastSeq+1 and each next one is one more. Any other batch
// is a conflict (a gap, an overlap or a replay).
func CheckBatch(op, sessionID string, lastSeq uint64, events []messages.PersistedEvent) error {
	for i, ev := range events {
		want := lastSeq + uint64(i) + 1
		if ev.Seq != want {
			return messages.Errorf(messages.CodeConflict, op,
				"session %s: batch event %d has seq %d, want %d (log ends at seq %d)", sessionID, i, ev.Seq, want, lastSeq)
		}
	}
	return nil
}

// CheckEventSize refuses an event whose encoding is longer than MaxEventBytes.
func CheckEventSize(op string, seq uint64, n int) error {
	if n > MaxEventBytes {
		return &messages.Error{Code: messages.CodeInvalid, Op: op, Field: "events",
			Message: fmt.Sprintf("event seq %d encodes to %d bytes, over the %d-byte limit", seq, n, MaxEventBytes)}
	}
	return nil
}

// ErrClosed is what every method of a closed store returns.
func ErrClosed(op string) error {
	return messages.Errorf(messages.CodeInternal, op, "store is closed")
}
