package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// BenchmarkMemoryAppend is an append of one event to the in-memory store
// (encoded to the same JSON line the file store writes, no I/O).
func BenchmarkMemoryAppend(b *testing.B) {
	ctx := context.Background()
	st := store.NewMemory()
	now := time.Now().UTC()
	rec := messages.SessionRecord{SessionID: messages.NewSessionID(), BackendID: "bench", Status: messages.StatusRunning,
		CreatedAt: now, UpdatedAt: now, Version: messages.RecordVersion}
	if err := st.Create(ctx, rec); err != nil {
		b.Fatal(err)
	}
	ev := []messages.PersistedEvent{{At: now, Turn: 1, Event: messages.Event{Type: messages.EvText, Text: strings.Repeat("The agent writes a line of prose. ", 6)}}}
	var seq uint64
	b.ReportAllocs()
	for b.Loop() {
		seq++
		ev[0].Seq = seq
		if err := st.Append(ctx, rec.SessionID, ev); err != nil {
			b.Fatal(err)
		}
	}
}
