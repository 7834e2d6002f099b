package filestore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

func encodeBenchEvents(n int) []messages.PersistedEvent {
	evs := make([]messages.PersistedEvent, n)
	for i := range evs {
		evs[i] = messages.PersistedEvent{Seq: uint64(i) + 1, At: time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC), Turn: 7,
			Event: messages.Event{Type: messages.EvText, Text: strings.Repeat("The agent writes a line of prose. ", 6)}}
	}
	return evs
}

// BenchmarkEncodeBatch is the CPU side of an append: a batch encoded as
// events.jsonl lines (about 300 bytes each) into its WAL frame in a pooled
// buffer, with the size check. ns/event compares across batch sizes.
func BenchmarkEncodeBatch(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			evs := encodeBenchEvents(n)
			buf, err := encodeEventsFrame(store.OpAppend, "cs_bench", evs, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(buf.Len()))
			putBuffer(buf)
			iters := 0
			b.ReportAllocs()
			for b.Loop() {
				buf, err := encodeEventsFrame(store.OpAppend, "cs_bench", evs, nil)
				if err != nil {
					b.Fatal(err)
				}
				putBuffer(buf)
				iters++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iters*n), "ns/event")
		})
	}
}

// BenchmarkAppendNoSync is Append with the fsync taken out: the store's
// own cost per append (checks, encoding, locks, the handle LRU, the
// write), next to which BenchmarkAppend's fsync'd figures are the disk's.
func BenchmarkAppendNoSync(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st, err := Open(b.TempDir(), WithoutSync())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			now := time.Now().UTC()
			rec := messages.SessionRecord{SessionID: messages.NewSessionID(), BackendID: "bench", Status: messages.StatusRunning,
				CreatedAt: now, UpdatedAt: now, Version: messages.RecordVersion}
			if err := st.Create(ctx, rec); err != nil {
				b.Fatal(err)
			}
			evs := encodeBenchEvents(n)
			var seq uint64
			iters := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range evs {
					seq++
					evs[i].Seq = seq
				}
				if err := st.Append(ctx, rec.SessionID, evs); err != nil {
					b.Fatal(err)
				}
				iters++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iters*n), "ns/event")
		})
	}
}
