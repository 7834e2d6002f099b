// Package storetest is the conformance suite for store.Store. Every
// implementation (memory, file, faulty) runs it from its own tests:
//
//	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
//
// Run opens a fresh store for every subtest and closes it when the subtest
// ends; open may close it too, since a second Close must return nil. Values
// read back are compared after Normalize*, which puts times in UTC and treats
// an empty slice as nil, the two things a JSON round trip may change.
//
// The suite covers the record round trip and its errors, List's order,
// session-id validation on every method, the append and read contract
// (gapless batches, afterSeq, limit, MaxEventBytes), isolation of returned
// values, concurrent use across and within sessions, context and Close.
// RunFaults checks the caller's side of the contract under every fault
// store.Faulty injects (a write that lands but fails, a panic, a short
// write, a full disk for a while): re-reading LastSeq after a failure and
// never dropping a batch always ends in a gapless log.
// It holds no state between subtests; the helpers (NewRecord, NewEvents,
// RequireCode) are safe to use from implementation-specific tests.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// Run runs the conformance suite against the stores open returns.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st store.Store)
	}{
		{"CreateGet", testCreateGet},
		{"CreateConflict", testCreateConflict},
		{"InvalidRecord", testInvalidRecord},
		{"NotFound", testNotFound},
		{"PutMetaReplaces", testPutMetaReplaces},
		{"ListNewestFirst", testListNewestFirst},
		{"InvalidSessionIDs", testInvalidSessionIDs},
		{"AppendRead", testAppendRead},
		{"AppendConflict", testAppendConflict},
		{"AppendEmptyBatch", testAppendEmptyBatch},
		{"AppendRecord", testAppendRecord},
		{"AppendRecordRefusesWholly", testAppendRecordRefusesWholly},
		{"RecordWithoutEvents", testRecordWithoutEvents},
		{"LastSeq", testLastSeq},
		{"ReadAfterAndLimit", testReadAfterAndLimit},
		{"LargeEvent", testLargeEvent},
		{"ConcurrentAppends", testConcurrentAppends},
		{"ConcurrentReadWhileAppending", testConcurrentReadWhileAppending},
		{"Isolation", testIsolation},
		{"Context", testContext},
		{"Closed", testClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() { assert.NoError(t, st.Close(), "Close") })
			tt.fn(t, st)
		})
	}
}

// baseTime has nanoseconds and a zone other than UTC, so a round trip that
// drops either shows.
var baseTime = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600))

// NewRecord returns a valid record with a fresh session id and every field
// set, created at createdAt.
func NewRecord(createdAt time.Time) messages.SessionRecord {
	return messages.SessionRecord{
		SessionID:     messages.NewSessionID(),
		BackendID:     "script",
		Cwd:           "/work/project",
		Model:         "frontier-1",
		Effort:        messages.EffortHigh,
		MaxPosture:    messages.PostureAcceptEdits,
		Posture:       messages.PostureDefault,
		MaxRounds:     12,
		AllowedTools:  []string{"read", "edit"},
		TaskBrief:     "fix the <flaky> test & \"quote\" it: ünïcode",
		TaskTags:      []string{"bug", "ci"},
		Status:        messages.StatusRunning,
		CreatedAt:     createdAt,
		UpdatedAt:     createdAt.Add(90*time.Second + 123456789),
		RoundsElapsed: 3,
		CostUSD:       0.1234,
		Runs: []messages.Run{
			{StartedAt: createdAt, ExternalSessionID: "ext-1", OwnerScopeID: "scope-a"},
			{StartedAt: createdAt.Add(time.Minute).In(time.UTC), OwnerScopeID: "scope-b"},
		},
		Outcome:     messages.OutcomePartial,
		OutcomeNote: "half done",
		Version:     messages.RecordVersion,
	}
}

// NewEvents returns n events with seqs from, from+1, ..., cycling through
// event shapes that use every reference field (Input, Usage, Diff).
func NewEvents(from uint64, n int) []messages.PersistedEvent {
	evs := make([]messages.PersistedEvent, n)
	for i := range evs {
		seq := from + uint64(i)
		ev := messages.PersistedEvent{Seq: seq, At: baseTime.Add(time.Duration(seq) * time.Millisecond), Turn: int(seq / 4)}
		switch seq % 5 {
		case 0:
			ev.Event = messages.Event{Type: messages.EvText, Text: fmt.Sprintf("chunk %d <b>&</b>\n", seq), Delta: true}
		case 1:
			ev.Event = messages.Event{Type: messages.EvToolUse, ToolUseID: fmt.Sprintf("tu-%d", seq), ToolName: "edit",
				Input: []byte(fmt.Sprintf(`{"path":"a.go","line":%d}`, seq))}
		case 2:
			ev.Event = messages.Event{Type: messages.EvToolResult, ToolUseID: fmt.Sprintf("tu-%d", seq-1), Output: "ok",
				IsError: seq%2 == 0, Truncated: true, OriginalBytes: 1 << 20}
		case 3:
			ev.Event = messages.Event{Type: messages.EvTurnEnd, State: "completed", NumTurns: 2, CostUSD: 0.01, TotalCostUSD: 0.5,
				Usage: &messages.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5, CacheWriteTokens: 1}}
		case 4:
			ev.Event = messages.Event{Type: messages.EvTurnDiff, Diff: &messages.TurnDiff{Source: messages.DiffGit,
				Files: []messages.FileChange{{Path: "a.go", Status: "M", Insertions: 3, Deletions: 1},
					{Path: "b.go", OldPath: "c.go", Status: "R"}},
				Summary: "2 files", UnifiedDiff: "--- a\n+++ b\n"}}
		}
		evs[i] = ev
	}
	return evs
}

// NormalizeRecord returns a deep copy of r with times in UTC (and no
// monotonic reading) and empty slices as nil.
func NormalizeRecord(r messages.SessionRecord) messages.SessionRecord {
	r = r.Clone() // copies slices, turning empty ones into nil
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	for i := range r.Runs {
		r.Runs[i].StartedAt = r.Runs[i].StartedAt.UTC()
	}
	return r
}

// NormalizeEvent returns a deep copy of e with its time in UTC and empty
// slices as nil.
func NormalizeEvent(e messages.PersistedEvent) messages.PersistedEvent {
	e.At = e.At.UTC()
	if len(e.Event.Input) == 0 {
		e.Event.Input = nil
	} else {
		e.Event.Input = slices.Clone(e.Event.Input)
	}
	if e.Event.Usage != nil {
		u := *e.Event.Usage
		e.Event.Usage = &u
	}
	if e.Event.Diff != nil {
		d := *e.Event.Diff
		d.Files = slices.Clone(d.Files)
		if len(d.Files) == 0 {
			d.Files = nil
		}
		e.Event.Diff = &d
	}
	return e
}

// NormalizeEvents applies NormalizeEvent to each event; nil for none.
func NormalizeEvents(evs []messages.PersistedEvent) []messages.PersistedEvent {
	if len(evs) == 0 {
		return nil
	}
	out := make([]messages.PersistedEvent, len(evs))
	for i, e := range evs {
		out[i] = NormalizeEvent(e)
	}
	return out
}

// RequireCode fails t unless err is a *messages.Error with the given code.
func RequireCode(t testing.TB, err error, code messages.Code, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	var e *messages.Error
	require.ErrorAs(t, err, &e, msgAndArgs...)
	require.Equal(t, code, e.Code, "error %q; %v", err, msgAndArgs)
}

func create(t *testing.T, st store.Store, createdAt time.Time) messages.SessionRecord {
	t.Helper()
	rec := NewRecord(createdAt)
	require.NoError(t, st.Create(context.Background(), rec))
	return rec
}

func requireEvents(t *testing.T, st store.Store, sid string, afterSeq uint64, limit int, want []messages.PersistedEvent) {
	t.Helper()
	got, err := st.ReadEvents(context.Background(), sid, afterSeq, limit)
	require.NoError(t, err)
	require.Equal(t, NormalizeEvents(want), NormalizeEvents(got), "ReadEvents(after %d, limit %d)", afterSeq, limit)
}

func requireLastSeq(t *testing.T, st store.Store, sid string, want uint64) {
	t.Helper()
	got, err := st.LastSeq(context.Background(), sid)
	require.NoError(t, err)
	require.Equal(t, want, got, "LastSeq")
}

func testCreateGet(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	got, err := st.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, NormalizeRecord(rec), NormalizeRecord(got))
	assert.True(t, got.CreatedAt.Equal(rec.CreatedAt), "CreatedAt %v, want %v", got.CreatedAt, rec.CreatedAt)
	assert.True(t, got.UpdatedAt.Equal(rec.UpdatedAt), "UpdatedAt %v, want %v", got.UpdatedAt, rec.UpdatedAt)

	// A record with only the required fields round-trips too.
	bare := messages.SessionRecord{SessionID: messages.NewSessionID(), BackendID: "script", Status: messages.StatusIdle}
	require.NoError(t, st.Create(ctx, bare))
	got, err = st.GetMeta(ctx, bare.SessionID)
	require.NoError(t, err)
	require.Equal(t, NormalizeRecord(bare), NormalizeRecord(got))
}

func testCreateConflict(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	again := rec
	again.Status = messages.StatusFailed
	RequireCode(t, st.Create(ctx, again), messages.CodeConflict)
	got, err := st.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, NormalizeRecord(rec), NormalizeRecord(got), "a refused Create must not change the record")
}

func testInvalidRecord(t *testing.T, st store.Store) {
	ctx := context.Background()
	bad := NewRecord(baseTime)
	bad.BackendID = ""
	RequireCode(t, st.Create(ctx, bad), messages.CodeInvalid)
	_, err := st.GetMeta(ctx, bad.SessionID)
	RequireCode(t, err, messages.CodeNotFound, "a refused Create must write nothing")

	rec := create(t, st, baseTime)
	bad = rec
	bad.Status = "dancing"
	RequireCode(t, st.PutMeta(ctx, bad), messages.CodeInvalid)
	got, err := st.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, NormalizeRecord(rec), NormalizeRecord(got), "a refused PutMeta must not change the record")
}

func testNotFound(t *testing.T, st store.Store) {
	ctx := context.Background()
	sid := messages.NewSessionID()
	_, err := st.GetMeta(ctx, sid)
	RequireCode(t, err, messages.CodeNotFound, "GetMeta")
	rec := NewRecord(baseTime)
	rec.SessionID = sid
	RequireCode(t, st.PutMeta(ctx, rec), messages.CodeNotFound, "PutMeta")
	RequireCode(t, st.Append(ctx, sid, NewEvents(1, 1)), messages.CodeNotFound, "Append")
	_, err = st.ReadEvents(ctx, sid, 0, 0)
	RequireCode(t, err, messages.CodeNotFound, "ReadEvents")
	_, err = st.LastSeq(ctx, sid)
	RequireCode(t, err, messages.CodeNotFound, "LastSeq")

	// None of that created anything.
	recs, err := st.List(ctx)
	require.NoError(t, err)
	require.Empty(t, recs)
	require.NoError(t, st.Create(ctx, rec))
	requireLastSeq(t, st, sid, 0)
}

func testPutMetaReplaces(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	next := rec.Clone()
	next.Status = messages.StatusEnded
	next.UpdatedAt = baseTime.Add(time.Hour)
	next.AllowedTools = nil
	next.Runs = append(next.Runs, messages.Run{StartedAt: baseTime.Add(2 * time.Hour), OwnerScopeID: "scope-c"})
	next.Outcome = messages.OutcomeSuccess
	next.CostUSD = 2.5
	require.NoError(t, st.PutMeta(ctx, next))

	got, err := st.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, NormalizeRecord(next), NormalizeRecord(got))
	recs, err := st.List(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, NormalizeRecord(next), NormalizeRecord(recs[0]))
}

func testListNewestFirst(t *testing.T, st store.Store) {
	ctx := context.Background()
	recs, err := st.List(ctx)
	require.NoError(t, err)
	require.Empty(t, recs, "a new store lists nothing")

	t0 := baseTime
	mid := create(t, st, t0)
	old := create(t, st, t0.Add(-time.Hour))
	// The same instant as t0+2h, written in another zone: order is by instant.
	tieA := create(t, st, t0.Add(2*time.Hour).In(time.FixedZone("X", 5*3600)))
	tieB := create(t, st, t0.Add(2*time.Hour))
	newer := create(t, st, t0.Add(time.Hour))
	if tieB.SessionID < tieA.SessionID {
		tieA, tieB = tieB, tieA
	}
	want := []string{tieA.SessionID, tieB.SessionID, newer.SessionID, mid.SessionID, old.SessionID}

	recs, err = st.List(ctx)
	require.NoError(t, err)
	got := make([]string, len(recs))
	for i, r := range recs {
		got[i] = r.SessionID
	}
	require.Equal(t, want, got, "newest first, ties by session id")
	require.Equal(t, NormalizeRecord(old), NormalizeRecord(recs[4]))
}

// invalidIDs are ids of the wrong shape; several would escape the sessions
// directory if they reached a path.
func invalidIDs() []string {
	hex := strings.Repeat("0123456789abcdef", 4)
	return []string{
		"",
		"cs_",
		"..",
		"../../etc/passwd",
		"cs_../../../../tmp/x",
		"cs_" + hex[:60] + "/../",
		"cs_" + hex + "/..",
		"cs_" + strings.ToUpper(hex),
		"CS_" + hex,
		"cs_" + hex[:63],
		"cs_" + hex + "0",
		"cs_" + strings.Repeat("g", 64),
		"cs_" + hex[:63] + "\x00",
		hex,
	}
}

func testInvalidSessionIDs(t *testing.T, st store.Store) {
	ctx := context.Background()
	for _, id := range invalidIDs() {
		rec := NewRecord(baseTime)
		rec.SessionID = id
		RequireCode(t, st.Create(ctx, rec), messages.CodeInvalid, "Create(%q)", id)
		RequireCode(t, st.PutMeta(ctx, rec), messages.CodeInvalid, "PutMeta(%q)", id)
		_, err := st.GetMeta(ctx, id)
		RequireCode(t, err, messages.CodeInvalid, "GetMeta(%q)", id)
		RequireCode(t, st.Append(ctx, id, NewEvents(1, 1)), messages.CodeInvalid, "Append(%q)", id)
		RequireCode(t, st.Append(ctx, id, nil), messages.CodeInvalid, "Append(%q, nil)", id)
		_, err = st.ReadEvents(ctx, id, 0, 0)
		RequireCode(t, err, messages.CodeInvalid, "ReadEvents(%q)", id)
		_, err = st.LastSeq(ctx, id)
		RequireCode(t, err, messages.CodeInvalid, "LastSeq(%q)", id)
	}
	recs, err := st.List(ctx)
	require.NoError(t, err)
	require.Empty(t, recs)
}

func testAppendRead(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	evs := NewEvents(1, 12)
	require.NoError(t, st.Append(ctx, rec.SessionID, evs[:1]))
	require.NoError(t, st.Append(ctx, rec.SessionID, evs[1:7]))
	require.NoError(t, st.Append(ctx, rec.SessionID, evs[7:]))
	requireEvents(t, st, rec.SessionID, 0, 0, evs)
	got, err := st.ReadEvents(ctx, rec.SessionID, 0, 0)
	require.NoError(t, err)
	for i := range got {
		assert.True(t, got[i].At.Equal(evs[i].At), "event %d: At %v, want %v", i, got[i].At, evs[i].At)
	}
	requireLastSeq(t, st, rec.SessionID, 12)

	// Another session's log is separate.
	other := create(t, st, baseTime)
	requireLastSeq(t, st, other.SessionID, 0)
	require.NoError(t, st.Append(ctx, other.SessionID, NewEvents(1, 2)))
	requireEvents(t, st, other.SessionID, 0, 0, NewEvents(1, 2))
	requireEvents(t, st, rec.SessionID, 0, 0, evs)
}

func testAppendConflict(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	sid := rec.SessionID

	fresh := []struct {
		name string
		seqs []uint64
	}{
		{"first seq 2", []uint64{2}},
		{"seq 0", []uint64{0}},
		{"seq 0 then 1", []uint64{0, 1}},
	}
	for _, c := range fresh {
		RequireCode(t, st.Append(ctx, sid, withSeqs(c.seqs)), messages.CodeConflict, c.name)
	}
	requireLastSeq(t, st, sid, 0)
	requireEvents(t, st, sid, 0, 0, nil)

	base := NewEvents(1, 3)
	require.NoError(t, st.Append(ctx, sid, base))
	cases := []struct {
		name string
		seqs []uint64
	}{
		{"gap before", []uint64{5}},
		{"gap before batch", []uint64{5, 6}},
		{"overlap", []uint64{3, 4}},
		{"replay", []uint64{1, 2, 3}},
		{"replay last", []uint64{3}},
		{"gap inside", []uint64{4, 6}},
		{"duplicate inside", []uint64{4, 4}},
		{"descending", []uint64{4, 5, 4}},
		{"gap at end", []uint64{4, 5, 6, 8}},
	}
	for _, c := range cases {
		RequireCode(t, st.Append(ctx, sid, withSeqs(c.seqs)), messages.CodeConflict, c.name)
		requireLastSeq(t, st, sid, 3)
	}
	requireEvents(t, st, sid, 0, 0, base)

	more := NewEvents(4, 2)
	require.NoError(t, st.Append(ctx, sid, more))
	requireEvents(t, st, sid, 0, 0, append(base, more...))
	requireLastSeq(t, st, sid, 5)
}

// testAppendRecord: events and the record in one call land both, as
// Append and PutMeta would; an empty batch replaces only the record.
func testAppendRecord(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	sid := rec.SessionID
	evs := NewEvents(1, 3)
	next := rec.Clone()
	next.Status = messages.StatusIdle
	next.CostUSD = 1.25
	next.UpdatedAt = baseTime.Add(time.Minute)
	require.NoError(t, st.AppendRecord(ctx, sid, evs, next))
	requireEvents(t, st, sid, 0, 0, evs)
	requireLastSeq(t, st, sid, 3)
	got, err := st.GetMeta(ctx, sid)
	require.NoError(t, err)
	require.Equal(t, NormalizeRecord(next), NormalizeRecord(got))

	last := next.Clone()
	last.Status = messages.StatusEnded
	require.NoError(t, st.AppendRecord(ctx, sid, nil, last), "an empty batch")
	requireLastSeq(t, st, sid, 3)
	got, err = st.GetMeta(ctx, sid)
	require.NoError(t, err)
	require.Equal(t, NormalizeRecord(last), NormalizeRecord(got))

	more := NewEvents(4, 2)
	require.NoError(t, st.Append(ctx, sid, more), "Append after AppendRecord")
	requireEvents(t, st, sid, 0, 0, append(evs, more...))
}

// testAppendRecordRefusesWholly: a batch that does not follow the log, a
// record of another session, an invalid record or a session without a
// record write nothing at all.
func testAppendRecordRefusesWholly(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	other := create(t, st, baseTime.Add(time.Second))
	sid := rec.SessionID
	require.NoError(t, st.Append(ctx, sid, NewEvents(1, 2)))
	changed := rec.Clone()
	changed.Status = messages.StatusEnded
	changed.CostUSD = 9

	RequireCode(t, st.AppendRecord(ctx, sid, withSeqs([]uint64{4}), changed), messages.CodeConflict, "a gap")
	RequireCode(t, st.AppendRecord(ctx, sid, withSeqs([]uint64{2}), changed), messages.CodeConflict, "a replay")
	RequireCode(t, st.AppendRecord(ctx, sid, NewEvents(3, 1), other), messages.CodeInvalid, "another session's record")
	bad := changed.Clone()
	bad.BackendID = ""
	RequireCode(t, st.AppendRecord(ctx, sid, NewEvents(3, 1), bad), messages.CodeInvalid, "an invalid record")
	requireLastSeq(t, st, sid, 2)
	got, err := st.GetMeta(ctx, sid)
	require.NoError(t, err)
	require.Equal(t, NormalizeRecord(rec), NormalizeRecord(got), "the record is untouched")

	ghost := NewRecord(baseTime)
	RequireCode(t, st.AppendRecord(ctx, ghost.SessionID, NewEvents(1, 1), ghost), messages.CodeNotFound, "no such session")
	requireEvents(t, st, other.SessionID, 0, 0, nil)
}

func withSeqs(seqs []uint64) []messages.PersistedEvent {
	evs := make([]messages.PersistedEvent, len(seqs))
	for i, s := range seqs {
		evs[i] = NewEvents(max(s, 1), 1)[0]
		evs[i].Seq = s
	}
	return evs
}

func testAppendEmptyBatch(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	require.NoError(t, st.Append(ctx, rec.SessionID, nil))
	require.NoError(t, st.Append(ctx, rec.SessionID, []messages.PersistedEvent{}))
	requireLastSeq(t, st, rec.SessionID, 0)
	require.NoError(t, st.Append(ctx, rec.SessionID, NewEvents(1, 1)))
	require.NoError(t, st.Append(ctx, rec.SessionID, nil))
	requireLastSeq(t, st, rec.SessionID, 1)
}

func testRecordWithoutEvents(t *testing.T, st store.Store) {
	rec := create(t, st, baseTime)
	requireLastSeq(t, st, rec.SessionID, 0)
	requireEvents(t, st, rec.SessionID, 0, 0, nil)
	requireEvents(t, st, rec.SessionID, 5, 3, nil)
}

func testLastSeq(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	requireLastSeq(t, st, rec.SessionID, 0)
	var next uint64 = 1
	for _, n := range []int{1, 4, 1, 64} {
		require.NoError(t, st.Append(ctx, rec.SessionID, NewEvents(next, n)))
		next += uint64(n)
		requireLastSeq(t, st, rec.SessionID, next-1)
	}
}

func testReadAfterAndLimit(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	evs := NewEvents(1, 10)
	require.NoError(t, st.Append(ctx, rec.SessionID, evs))
	cases := []struct {
		after uint64
		limit int
		want  []messages.PersistedEvent
	}{
		{0, 0, evs},
		{0, -1, evs},
		{0, 1, evs[:1]},
		{0, 10, evs},
		{0, 11, evs},
		{3, 0, evs[3:]},
		{3, 4, evs[3:7]},
		{9, 0, evs[9:]},
		{9, 5, evs[9:]},
		{10, 0, nil},
		{20, 0, nil},
		{^uint64(0), 1, nil},
	}
	for _, c := range cases {
		requireEvents(t, st, rec.SessionID, c.after, c.limit, c.want)
	}
}

func testLargeEvent(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	evs := NewEvents(1, 3)
	evs[1].Event = messages.Event{Type: messages.EvToolResult, Output: strings.Repeat("0123456789abcde\n", 4<<20/16)}
	require.NoError(t, st.Append(ctx, rec.SessionID, evs[:2]))
	require.NoError(t, st.Append(ctx, rec.SessionID, evs[2:]))
	requireEvents(t, st, rec.SessionID, 0, 0, evs)
	requireEvents(t, st, rec.SessionID, 1, 1, evs[1:2])

	huge := NewEvents(4, 2)
	huge[1].Event = messages.Event{Type: messages.EvText, Text: strings.Repeat("x", store.MaxEventBytes)}
	RequireCode(t, st.Append(ctx, rec.SessionID, huge), messages.CodeInvalid, "an event over MaxEventBytes")
	requireLastSeq(t, st, rec.SessionID, 3)
	requireEvents(t, st, rec.SessionID, 2, 0, evs[2:])
}

func testConcurrentAppends(t *testing.T, st store.Store) {
	ctx := context.Background()
	const sessions, perSession = 50, 40
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = create(t, st, baseTime.Add(time.Duration(i)*time.Second)).SessionID
	}
	var wg sync.WaitGroup
	for i, sid := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var next uint64 = 1
			for b := 0; next <= perSession; b++ {
				n := min(1+(i+b)%5, perSession-int(next)+1)
				if !assert.NoError(t, st.Append(ctx, sid, NewEvents(next, n)), "session %d", i) {
					return
				}
				next += uint64(n)
			}
		}()
	}
	wg.Wait()
	for _, sid := range ids {
		requireLastSeq(t, st, sid, perSession)
		requireEvents(t, st, sid, 0, 0, NewEvents(1, perSession))
	}
}

// testConcurrentReadWhileAppending checks that a reader racing an appender
// always sees a gapless prefix of the log.
func testConcurrentReadWhileAppending(t *testing.T, st store.Store) {
	ctx := context.Background()
	const total = 120
	sid := create(t, st, baseTime).SessionID
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seen uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				last, err := st.LastSeq(ctx, sid)
				if !assert.NoError(t, err) {
					return
				}
				assert.GreaterOrEqual(t, last, seen, "LastSeq went backwards")
				evs, err := st.ReadEvents(ctx, sid, 0, 0)
				if !assert.NoError(t, err) {
					return
				}
				assert.GreaterOrEqual(t, uint64(len(evs)), last, "ReadEvents saw less than LastSeq")
				for i, ev := range evs {
					if ev.Seq != uint64(i)+1 {
						assert.Failf(t, "gap", "event %d has seq %d", i, ev.Seq)
						return
					}
				}
				seen = last
			}
		}()
	}
	for next := uint64(1); next <= total; next += 3 {
		require.NoError(t, st.Append(ctx, sid, NewEvents(next, 3)))
	}
	close(done)
	wg.Wait()
	requireEvents(t, st, sid, 0, 0, NewEvents(1, total))
}

func testIsolation(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := NewRecord(baseTime)
	want := NormalizeRecord(rec)
	require.NoError(t, st.Create(ctx, rec))
	mutateRecord(&rec)
	check := func(msg string) {
		t.Helper()
		got, err := st.GetMeta(ctx, want.SessionID)
		require.NoError(t, err)
		require.Equal(t, want, NormalizeRecord(got), msg)
	}
	check("mutating the record passed to Create")

	got, err := st.GetMeta(ctx, want.SessionID)
	require.NoError(t, err)
	mutateRecord(&got)
	check("mutating a record GetMeta returned")

	recs, err := st.List(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	mutateRecord(&recs[0])
	check("mutating a record List returned")

	put := want.Clone()
	put.Status = messages.StatusIdle
	require.NoError(t, st.PutMeta(ctx, put))
	want = NormalizeRecord(put)
	mutateRecord(&put)
	check("mutating the record passed to PutMeta")

	evs := NewEvents(1, 10)
	wantEvs := NormalizeEvents(evs)
	require.NoError(t, st.Append(ctx, want.SessionID, evs))
	mutateEvents(evs)
	requireEvents(t, st, want.SessionID, 0, 0, wantEvs)

	read, err := st.ReadEvents(ctx, want.SessionID, 0, 0)
	require.NoError(t, err)
	mutateEvents(read)
	requireEvents(t, st, want.SessionID, 0, 0, wantEvs)
}

func mutateRecord(r *messages.SessionRecord) {
	r.AllowedTools[0] = "rm -rf"
	r.TaskTags[0] = "mutated"
	r.Runs[0].OwnerScopeID = "mutated"
	r.Runs[1].StartedAt = time.Time{}
}

func mutateEvents(evs []messages.PersistedEvent) {
	for i := range evs {
		e := &evs[i].Event
		if len(e.Input) > 0 {
			e.Input[0] = '['
		}
		if e.Usage != nil {
			e.Usage.InputTokens = -1
		}
		if e.Diff != nil {
			e.Diff.Files[0].Path = "/etc/passwd"
			e.Diff.Summary = "mutated"
		}
	}
}

func testContext(t *testing.T, st store.Store) {
	rec := create(t, st, baseTime)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()

	next := NewRecord(baseTime)
	require.Error(t, st.Create(canceled, next), "Create")
	RequireCode(t, st.Create(expired, next), messages.CodeTimeout, "Create")
	_, err := st.GetMeta(context.Background(), next.SessionID)
	RequireCode(t, err, messages.CodeNotFound, "Create with a done context must write nothing")

	RequireCode(t, st.Append(expired, rec.SessionID, NewEvents(1, 1)), messages.CodeTimeout, "Append")
	require.Error(t, st.Append(canceled, rec.SessionID, NewEvents(1, 1)), "Append")
	requireLastSeq(t, st, rec.SessionID, 0)

	changed := rec.Clone()
	changed.Status = messages.StatusIdle
	RequireCode(t, st.PutMeta(expired, changed), messages.CodeTimeout, "PutMeta")
	_, err = st.GetMeta(expired, rec.SessionID)
	RequireCode(t, err, messages.CodeTimeout, "GetMeta")
	_, err = st.List(expired)
	RequireCode(t, err, messages.CodeTimeout, "List")
	_, err = st.ReadEvents(expired, rec.SessionID, 0, 0)
	RequireCode(t, err, messages.CodeTimeout, "ReadEvents")
	_, err = st.LastSeq(expired, rec.SessionID)
	RequireCode(t, err, messages.CodeTimeout, "LastSeq")
}

func testClosed(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := create(t, st, baseTime)
	require.NoError(t, st.Append(ctx, rec.SessionID, NewEvents(1, 2)))
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "a second Close")

	RequireCode(t, st.Create(ctx, NewRecord(baseTime)), messages.CodeInternal, "Create")
	RequireCode(t, st.PutMeta(ctx, rec), messages.CodeInternal, "PutMeta")
	_, err := st.GetMeta(ctx, rec.SessionID)
	RequireCode(t, err, messages.CodeInternal, "GetMeta")
	_, err = st.List(ctx)
	RequireCode(t, err, messages.CodeInternal, "List")
	RequireCode(t, st.Append(ctx, rec.SessionID, NewEvents(3, 1)), messages.CodeInternal, "Append")
	RequireCode(t, st.Append(ctx, rec.SessionID, nil), messages.CodeInternal, "Append(nil)")
	_, err = st.ReadEvents(ctx, rec.SessionID, 0, 0)
	RequireCode(t, err, messages.CodeInternal, "ReadEvents")
	_, err = st.LastSeq(ctx, rec.SessionID)
	RequireCode(t, err, messages.CodeInternal, "LastSeq")
}
