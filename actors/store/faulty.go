package store

import (
	"context"
	"fmt"
	"sync"
	"syscall"

	"github.com/codesession/codesession/messages"
)

// Faulty wraps a Store and fails on demand, so tests can drive the failure
// paths of the store's callers (the persist actor, the restart policy).
// An injected failure is decided before the inner store is called, so a
// failed call writes nothing. With nothing armed Faulty is transparent.
// It is safe for concurrent use.
type Faulty struct {
	inner Store

	mu      sync.Mutex
	appends int // Append calls (and AppendRecords with events) still to fail
	meta    int // Create and PutMeta calls (and AppendRecords) still to fail
	hook    func(op, sessionID string) error

	// the faults that found the persistence bugs (issue 10)
	landThenFail int // Appends that write, then report a failure
	panics       int // Appends that panic before writing
	partial      int // Appends that write the first half of the batch, then fail
	noSpace      int // writes (Create, PutMeta, Append) refused with ENOSPC
}

// LandThenFail makes the next n Append calls write their batch and then
// return an error anyway: the outcome a caller cannot tell from a failure
// (a lost reply, a timeout after the write). The caller must re-read
// LastSeq before retrying, or it conflicts forever.
func (f *Faulty) LandThenFail(n int) { f.set(&f.landThenFail, n) }

// PanicAppends makes the next n Append calls panic before writing.
func (f *Faulty) PanicAppends(n int) { f.set(&f.panics, n) }

// PartialAppends makes the next n Append calls of two or more events write
// the first half of the batch and then fail (a short write).
func (f *Faulty) PartialAppends(n int) { f.set(&f.partial, n) }

// NoSpace makes the next n writes (Create, PutMeta, Append, AppendRecord)
// fail as a full disk does, writing nothing; then the disk has room again.
func (f *Faulty) NoSpace(n int) { f.set(&f.noSpace, n) }

// ErrNoSpace is the error of a NoSpace write: unavailable, retryable, its
// cause syscall.ENOSPC.
func ErrNoSpace(op, sessionID string) error {
	return &messages.Error{Code: messages.CodeUnavailable, Op: op, Retryable: true, Err: syscall.ENOSPC,
		Message: fmt.Sprintf("cannot write session %s: %v", sessionID, syscall.ENOSPC)}
}

func (f *Faulty) set(p *int, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*p = n
}

// take uses up one armed fault of p, reporting whether one was armed.
func (f *Faulty) take(p *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *p > 0 {
		*p--
		return true
	}
	return false
}

var _ Store = (*Faulty)(nil)

// NewFaulty wraps inner.
func NewFaulty(inner Store) *Faulty { return &Faulty{inner: inner} }

// Injected builds the error Faulty returns for an armed failure: code
// internal, not retryable, naming the op and the session.
func Injected(op, sessionID string) error {
	return messages.Errorf(messages.CodeInternal, op, "injected failure (session %q)", sessionID)
}

// FailAppends makes the next n Append calls (and AppendRecord calls with
// events) fail with Injected.
func (f *Faulty) FailAppends(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appends = n
}

// FailMeta makes the next n record writes (Create, PutMeta or
// AppendRecord, whose events then do not land either) fail with Injected.
// Reads are failed with SetFailure.
func (f *Faulty) FailMeta(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.meta = n
}

// SetFailure installs a hook consulted before every call (op is one of the
// Op constants, sessionID empty for List and Close): a non-nil result is
// returned instead of calling the inner store. It is consulted before the
// counters of FailAppends and FailMeta, which a hook failure does not use
// up. nil removes the hook.
func (f *Faulty) SetFailure(fn func(op, sessionID string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = fn
}

// Inner returns the wrapped store, to inspect what was really written.
func (f *Faulty) Inner() Store { return f.inner }

func (f *Faulty) fail(op, sessionID string) error {
	f.mu.Lock()
	hook := f.hook
	f.mu.Unlock()
	if hook != nil {
		if err := hook(op, sessionID); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	counter := (*int)(nil)
	switch op {
	case OpAppend:
		counter = &f.appends
	case OpCreate, OpPutMeta:
		counter = &f.meta
	}
	if counter != nil && *counter > 0 {
		*counter--
		return Injected(op, sessionID)
	}
	return nil
}

func (f *Faulty) Create(ctx context.Context, rec messages.SessionRecord) error {
	if err := f.fail(OpCreate, rec.SessionID); err != nil {
		return err
	}
	if f.take(&f.noSpace) {
		return ErrNoSpace(OpCreate, rec.SessionID)
	}
	return f.inner.Create(ctx, rec)
}

func (f *Faulty) PutMeta(ctx context.Context, rec messages.SessionRecord) error {
	if err := f.fail(OpPutMeta, rec.SessionID); err != nil {
		return err
	}
	if f.take(&f.noSpace) {
		return ErrNoSpace(OpPutMeta, rec.SessionID)
	}
	return f.inner.PutMeta(ctx, rec)
}

func (f *Faulty) GetMeta(ctx context.Context, sessionID string) (messages.SessionRecord, error) {
	if err := f.fail(OpGetMeta, sessionID); err != nil {
		return messages.SessionRecord{}, err
	}
	return f.inner.GetMeta(ctx, sessionID)
}

func (f *Faulty) List(ctx context.Context) ([]messages.SessionRecord, error) {
	if err := f.fail(OpList, ""); err != nil {
		return nil, err
	}
	return f.inner.List(ctx)
}

func (f *Faulty) Append(ctx context.Context, sessionID string, events []messages.PersistedEvent) error {
	return f.append(ctx, sessionID, events, nil)
}

// AppendRecord meets the faults of an Append of events (when there are
// any) and of a PutMeta of rec, each decided before the inner store is
// called: a failure of either writes nothing, a short write only the first
// half of the events, and a write that lands and then fails lands both.
func (f *Faulty) AppendRecord(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec messages.SessionRecord) error {
	return f.append(ctx, sessionID, events, &rec)
}

func (f *Faulty) append(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord) error {
	op := OpAppend
	if rec == nil || len(events) > 0 {
		if err := f.fail(OpAppend, sessionID); err != nil {
			return err
		}
	}
	if rec != nil {
		if err := f.fail(OpPutMeta, rec.SessionID); err != nil {
			return err
		}
		if len(events) == 0 {
			op = OpPutMeta
		}
	}
	write := func() error {
		if rec == nil {
			return f.inner.Append(ctx, sessionID, events)
		}
		return f.inner.AppendRecord(ctx, sessionID, events, *rec)
	}
	if len(events) == 0 && rec == nil {
		return write()
	}
	if f.take(&f.noSpace) {
		return ErrNoSpace(op, sessionID)
	}
	if len(events) == 0 {
		return write()
	}
	if f.take(&f.panics) {
		panic(fmt.Sprintf("faulty store: injected panic in Append (session %s)", sessionID))
	}
	if len(events) >= 2 && f.take(&f.partial) {
		if err := f.inner.Append(ctx, sessionID, events[:len(events)/2]); err != nil {
			return err
		}
		return messages.Errorf(messages.CodeInternal, OpAppend, "injected short write (session %q): %d of %d events written",
			sessionID, len(events)/2, len(events))
	}
	if f.take(&f.landThenFail) {
		if err := write(); err != nil {
			return err
		}
		return messages.Errorf(messages.CodeInternal, OpAppend, "injected failure after the write landed (session %q)", sessionID)
	}
	return write()
}

func (f *Faulty) ReadEvents(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]messages.PersistedEvent, error) {
	if err := f.fail(OpReadEvents, sessionID); err != nil {
		return nil, err
	}
	return f.inner.ReadEvents(ctx, sessionID, afterSeq, limit)
}

func (f *Faulty) LastSeq(ctx context.Context, sessionID string) (uint64, error) {
	if err := f.fail(OpLastSeq, sessionID); err != nil {
		return 0, err
	}
	return f.inner.LastSeq(ctx, sessionID)
}

func (f *Faulty) Repairs() []Repair { return f.inner.Repairs() }

func (f *Faulty) Close() error {
	if err := f.fail(OpClose, ""); err != nil {
		return err
	}
	return f.inner.Close()
}
