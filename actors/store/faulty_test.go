package store_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

func TestFaultyConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewFaulty(store.NewMemory()) })
}

func TestFaultyFailAppends(t *testing.T) {
	ctx := context.Background()
	f := store.NewFaulty(store.NewMemory())
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, f.Create(ctx, rec))

	f.FailAppends(2)
	for i := 0; i < 2; i++ {
		err := f.Append(ctx, rec.SessionID, storetest.NewEvents(1, 3))
		storetest.RequireCode(t, err, messages.CodeInternal, "append %d", i)
		last, err := f.LastSeq(ctx, rec.SessionID)
		require.NoError(t, err)
		require.Zero(t, last, "a failed append writes nothing")
	}
	require.NoError(t, f.Append(ctx, rec.SessionID, storetest.NewEvents(1, 3)), "the third append goes through")
	last, err := f.Inner().LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, uint64(3), last)
}

func TestFaultyFailMeta(t *testing.T) {
	ctx := context.Background()
	f := store.NewFaulty(store.NewMemory())
	rec := storetest.NewRecord(time.Now())

	f.FailMeta(2)
	storetest.RequireCode(t, f.Create(ctx, rec), messages.CodeInternal)
	_, err := f.GetMeta(ctx, rec.SessionID)
	storetest.RequireCode(t, err, messages.CodeNotFound, "a failed Create writes nothing; reads are not failed")
	require.NoError(t, f.Append(ctx, storetest.NewRecord(time.Now()).SessionID, nil), "appends are not failed by FailMeta")

	storetest.RequireCode(t, f.Create(ctx, rec), messages.CodeInternal, "second failure")
	require.NoError(t, f.Create(ctx, rec), "the counter is used up")

	f.FailMeta(1)
	changed := rec.Clone()
	changed.Status = messages.StatusEnded
	storetest.RequireCode(t, f.PutMeta(ctx, changed), messages.CodeInternal)
	got, err := f.GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, messages.StatusRunning, got.Status, "a failed PutMeta writes nothing")
	require.NoError(t, f.PutMeta(ctx, changed))
}

func TestFaultySetFailure(t *testing.T) {
	ctx := context.Background()
	f := store.NewFaulty(store.NewMemory())
	a, b := storetest.NewRecord(time.Now()), storetest.NewRecord(time.Now())
	require.NoError(t, f.Create(ctx, a))
	require.NoError(t, f.Create(ctx, b))

	boom := messages.Errorf(messages.CodeTimeout, "custom", "disk asleep")
	var ops []string
	f.SetFailure(func(op, sessionID string) error {
		ops = append(ops, op)
		if sessionID == a.SessionID && op == store.OpReadEvents {
			return boom
		}
		return nil
	})
	_, err := f.ReadEvents(ctx, a.SessionID, 0, 0)
	require.True(t, errors.Is(err, boom), "got %v", err)
	_, err = f.ReadEvents(ctx, b.SessionID, 0, 0)
	require.NoError(t, err, "only the chosen session fails")
	_, err = f.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{store.OpReadEvents, store.OpReadEvents, store.OpList}, ops)

	// A hook failure does not use up an armed counter.
	f.FailAppends(1)
	f.SetFailure(func(op, _ string) error {
		if op == store.OpAppend {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, f.Append(ctx, a.SessionID, storetest.NewEvents(1, 1)), boom)
	f.SetFailure(nil)
	storetest.RequireCode(t, f.Append(ctx, a.SessionID, storetest.NewEvents(1, 1)), messages.CodeInternal)
	require.NoError(t, f.Append(ctx, a.SessionID, storetest.NewEvents(1, 1)))
}

func TestFaultsMemory(t *testing.T) {
	storetest.RunFaults(t, func(t *testing.T) store.Store { return store.NewMemory() })
}

func TestFaultyNewFaults(t *testing.T) {
	ctx := context.Background()
	f := store.NewFaulty(store.NewMemory())
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, f.Create(ctx, rec))

	f.LandThenFail(1)
	require.Error(t, f.Append(ctx, rec.SessionID, storetest.NewEvents(1, 2)))
	last, err := f.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), last, "the write landed although it failed")

	f.PartialAppends(1)
	require.Error(t, f.Append(ctx, rec.SessionID, storetest.NewEvents(3, 4)))
	last, err = f.LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), last, "half the batch landed")

	f.PanicAppends(1)
	assert.Panics(t, func() { _ = f.Append(ctx, rec.SessionID, storetest.NewEvents(5, 1)) })

	f.NoSpace(2)
	for range 2 {
		err := f.Append(ctx, rec.SessionID, storetest.NewEvents(5, 1))
		storetest.RequireCode(t, err, messages.CodeUnavailable)
		assert.ErrorIs(t, err, syscall.ENOSPC)
	}
	require.NoError(t, f.Append(ctx, rec.SessionID, storetest.NewEvents(5, 1)), "then the disk has room")
}

// TestFaultyAppendRecord: AppendRecord meets the faults of both writes it
// stands for; a failure of either writes neither, a write that lands and
// then fails lands both, and a full disk writes nothing.
func TestFaultyAppendRecord(t *testing.T) {
	ctx := context.Background()
	f := store.NewFaulty(store.NewMemory())
	rec := storetest.NewRecord(time.Now())
	require.NoError(t, f.Create(ctx, rec))
	ended := rec.Clone()
	ended.Status = messages.StatusEnded
	requireNothing := func(msg string) {
		t.Helper()
		last, err := f.Inner().LastSeq(ctx, rec.SessionID)
		require.NoError(t, err)
		assert.Zero(t, last, msg)
		got, err := f.Inner().GetMeta(ctx, rec.SessionID)
		require.NoError(t, err)
		assert.Equal(t, rec.Status, got.Status, msg)
	}

	f.FailAppends(1)
	storetest.RequireCode(t, f.AppendRecord(ctx, rec.SessionID, storetest.NewEvents(1, 2), ended), messages.CodeInternal)
	requireNothing("the events' fault")
	f.FailMeta(1)
	storetest.RequireCode(t, f.AppendRecord(ctx, rec.SessionID, storetest.NewEvents(1, 2), ended), messages.CodeInternal)
	requireNothing("the record's fault")
	f.NoSpace(1)
	storetest.RequireCode(t, f.AppendRecord(ctx, rec.SessionID, storetest.NewEvents(1, 2), ended), messages.CodeUnavailable)
	requireNothing("a full disk")

	f.LandThenFail(1)
	require.Error(t, f.AppendRecord(ctx, rec.SessionID, storetest.NewEvents(1, 2), ended))
	last, err := f.Inner().LastSeq(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), last)
	got, err := f.Inner().GetMeta(ctx, rec.SessionID)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusEnded, got.Status, "landed, then failed: both")
}
