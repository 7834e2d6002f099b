package store

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/codesession/codesession/messages"
)

// Memory is the in-process Store, for tests and for runs that need no
// durability. It keeps every record and event in its JSON encoding, the same
// bytes the file store writes, so values come back exactly as they would
// from disk (times without a monotonic reading, raw JSON compacted) and
// nothing a caller holds aliases what the store holds. One mutex guards it;
// no method does I/O.
type Memory struct {
	mu      sync.Mutex
	closed  bool
	records map[string][]byte   // session id -> meta.json
	logs    map[string][][]byte // session id -> events.jsonl lines; line i holds seq i+1
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{records: map[string][]byte{}, logs: map[string][][]byte{}}
}

func (m *Memory) Create(ctx context.Context, rec messages.SessionRecord) error {
	return m.putMeta(ctx, OpCreate, rec, true)
}

func (m *Memory) PutMeta(ctx context.Context, rec messages.SessionRecord) error {
	return m.putMeta(ctx, OpPutMeta, rec, false)
}

func (m *Memory) putMeta(ctx context.Context, op string, rec messages.SessionRecord, create bool) error {
	if err := CheckContext(ctx, op); err != nil {
		return err
	}
	if err := CheckRecord(op, &rec); err != nil {
		return err
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return messages.Wrap(messages.CodeInternal, op, err, "cannot encode record for session "+rec.SessionID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed(op)
	}
	_, exists := m.records[rec.SessionID]
	switch {
	case create && exists:
		return messages.Errorf(messages.CodeConflict, op, "session %s already has a record", rec.SessionID)
	case !create && !exists:
		return messages.Errorf(messages.CodeNotFound, op, "no record for session %s", rec.SessionID)
	}
	m.records[rec.SessionID] = data
	return nil
}

func (m *Memory) GetMeta(ctx context.Context, sessionID string) (messages.SessionRecord, error) {
	const op = OpGetMeta
	if err := CheckContext(ctx, op); err != nil {
		return messages.SessionRecord{}, err
	}
	if err := CheckSessionID(op, sessionID); err != nil {
		return messages.SessionRecord{}, err
	}
	m.mu.Lock()
	data, ok := m.records[sessionID]
	closed := m.closed
	m.mu.Unlock()
	switch {
	case closed:
		return messages.SessionRecord{}, ErrClosed(op)
	case !ok:
		return messages.SessionRecord{}, messages.Errorf(messages.CodeNotFound, op, "no record for session %s", sessionID)
	}
	return decodeRecord(op, sessionID, data)
}

func (m *Memory) List(ctx context.Context) ([]messages.SessionRecord, error) {
	const op = OpList
	if err := CheckContext(ctx, op); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed(op)
	}
	all := make(map[string][]byte, len(m.records))
	for id, data := range m.records {
		all[id] = data // the slices are never written after being stored
	}
	m.mu.Unlock()

	recs := make([]messages.SessionRecord, 0, len(all))
	for id, data := range all {
		rec, err := decodeRecord(op, id, data)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	SortNewestFirst(recs)
	return recs, nil
}

func (m *Memory) Append(ctx context.Context, sessionID string, events []messages.PersistedEvent) error {
	return m.appendWith(ctx, sessionID, events, nil)
}

// AppendRecord appends and replaces the record under one lock: a reader
// sees both or neither.
func (m *Memory) AppendRecord(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec messages.SessionRecord) error {
	return m.appendWith(ctx, sessionID, events, &rec)
}

func (m *Memory) appendWith(ctx context.Context, sessionID string, events []messages.PersistedEvent, rec *messages.SessionRecord) error {
	const op = OpAppend
	if err := CheckContext(ctx, op); err != nil {
		return err
	}
	if err := CheckSessionID(op, sessionID); err != nil {
		return err
	}
	var data []byte
	if rec != nil {
		if err := CheckRecordOf(op, sessionID, rec); err != nil {
			return err
		}
		var err error
		if data, err = json.Marshal(rec); err != nil {
			return messages.Wrap(messages.CodeInternal, op, err, "cannot encode record for session "+rec.SessionID)
		}
	}
	lines, err := encodeLines(op, events)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed(op)
	}
	if rec != nil {
		if _, ok := m.records[sessionID]; !ok {
			return messages.Errorf(messages.CodeNotFound, op, "no record for session %s", sessionID)
		}
	}
	if len(events) > 0 {
		if err := m.appendLocked(op, sessionID, events, lines); err != nil {
			return err
		}
	}
	if rec != nil {
		m.records[sessionID] = data
	}
	return nil
}

// encodeLines is each event's line, checked against MaxEventBytes.
func encodeLines(op string, events []messages.PersistedEvent) ([][]byte, error) {
	lines := make([][]byte, len(events))
	for i, ev := range events {
		line, err := json.Marshal(ev)
		if err != nil {
			return nil, messages.Wrap(messages.CodeInvalid, op, err, "cannot encode event")
		}
		if err := CheckEventSize(op, ev.Seq, len(line)); err != nil {
			return nil, err
		}
		lines[i] = line
	}
	return lines, nil
}

// appendLocked appends a checked batch (m.mu held).
func (m *Memory) appendLocked(op, sessionID string, events []messages.PersistedEvent, lines [][]byte) error {
	if err := m.exists(op, sessionID); err != nil {
		return err
	}
	log := m.logs[sessionID]
	if err := CheckBatch(op, sessionID, uint64(len(log)), events); err != nil {
		return err
	}
	m.logs[sessionID] = append(log, lines...)
	return nil
}

func (m *Memory) ReadEvents(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]messages.PersistedEvent, error) {
	const op = OpReadEvents
	if err := CheckContext(ctx, op); err != nil {
		return nil, err
	}
	if err := CheckSessionID(op, sessionID); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed(op)
	}
	if err := m.exists(op, sessionID); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	log := m.logs[sessionID] // lines are never rewritten; appends may grow a copy
	m.mu.Unlock()

	if afterSeq >= uint64(len(log)) {
		return nil, nil
	}
	log = log[afterSeq:]
	if limit > 0 && limit < len(log) {
		log = log[:limit]
	}
	out := make([]messages.PersistedEvent, len(log))
	for i, line := range log {
		if err := json.Unmarshal(line, &out[i]); err != nil {
			return nil, messages.Wrap(messages.CodeInternal, op, err, "cannot decode an event of session "+sessionID)
		}
	}
	return out, nil
}

func (m *Memory) LastSeq(ctx context.Context, sessionID string) (uint64, error) {
	const op = OpLastSeq
	if err := CheckContext(ctx, op); err != nil {
		return 0, err
	}
	if err := CheckSessionID(op, sessionID); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed(op)
	}
	if err := m.exists(op, sessionID); err != nil {
		return 0, err
	}
	return uint64(len(m.logs[sessionID])), nil
}

// Repairs returns nothing: memory cannot tear.
func (m *Memory) Repairs() []Repair { return nil }

// Close makes every later call fail with an internal error. A second Close
// returns nil.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// exists reports not_found unless the session has a record or a log. m.mu is held.
func (m *Memory) exists(op, sessionID string) error {
	if _, ok := m.records[sessionID]; ok {
		return nil
	}
	if _, ok := m.logs[sessionID]; ok {
		return nil
	}
	return messages.Errorf(messages.CodeNotFound, op, "no session %s", sessionID)
}

func decodeRecord(op, sessionID string, data []byte) (messages.SessionRecord, error) {
	var rec messages.SessionRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return messages.SessionRecord{}, messages.Wrap(messages.CodeInternal, op, err, "cannot decode the record of session "+sessionID)
	}
	return rec, nil
}

// SortNewestFirst orders records as List returns them: CreatedAt descending,
// ties broken by SessionID ascending so the order is deterministic.
func SortNewestFirst(recs []messages.SessionRecord) {
	slices.SortFunc(recs, func(a, b messages.SessionRecord) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.SessionID, b.SessionID)
	})
}
