package filestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/actors/store/storetest"
	"github.com/codesession/codesession/messages"
)

// benchEvent is an event whose events.jsonl line is about 300 bytes.
func benchEvent(seq uint64) messages.PersistedEvent {
	return messages.PersistedEvent{
		Seq:  seq,
		At:   time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC),
		Turn: 7,
		Event: messages.Event{Type: messages.EvText, Delta: true,
			Text: strings.Repeat("The agent writes a line of prose. ", 6)},
	}
}

// BenchmarkAppend measures durable appends (one write and one fsync per
// batch) next to a plain file receiving the same bytes with the same
// batching and fsyncs; store/plain is the cost of the store itself.
// ns/event and the MB/s column compare directly.
func BenchmarkAppend(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d/store", batch), func(b *testing.B) { benchStore(b, batch) })
		b.Run(fmt.Sprintf("batch=%d/plain", batch), func(b *testing.B) { benchPlain(b, batch) })
	}
}

func benchStore(b *testing.B, batch int) {
	ctx := context.Background()
	st, err := filestore.Open(b.TempDir())
	require.NoError(b, err)
	defer st.Close()
	rec := storetest.NewRecord(time.Now())
	require.NoError(b, st.Create(ctx, rec))
	evs := make([]messages.PersistedEvent, batch)
	for i := range evs {
		evs[i] = benchEvent(uint64(i) + 1)
	}
	b.SetBytes(int64(batchBytes(b, evs)))
	var seq uint64
	iters := 0
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
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iters*batch), "ns/event")
}

func benchPlain(b *testing.B, batch int) {
	evs := make([]messages.PersistedEvent, batch)
	for i := range evs {
		evs[i] = benchEvent(uint64(i) + 1)
	}
	var data []byte
	for _, ev := range evs {
		data = append(data, encodeLine(b, ev)...)
	}
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "events.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(b, err)
	defer f.Close()
	b.SetBytes(int64(len(data)))
	iters := 0
	for b.Loop() {
		if _, err := f.Write(data); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		iters++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iters*batch), "ns/event")
}

func batchBytes(b *testing.B, evs []messages.PersistedEvent) int {
	n := 0
	for _, ev := range evs {
		n += len(encodeLine(b, ev))
	}
	return n
}

// BenchmarkAppendManySessions appends one event at a time to a thousand
// sessions in turn, without fsyncs (the subject is the append handles):
// maxOpen=256 is the fixed bound of before issue 35, under which every
// append reopens its log; default is DefaultMaxOpen(), under which none
// does where RLIMIT_NOFILE allows 1,000 open handles.
func BenchmarkAppendManySessions(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []filestore.Option
	}{
		{"maxOpen=256", []filestore.Option{filestore.WithMaxOpen(filestore.MinMaxOpen)}},
		{"default", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			st, err := filestore.Open(b.TempDir(), append(c.opts, filestore.WithoutSync())...)
			require.NoError(b, err)
			defer st.Close()
			ids := make([]string, 1000)
			for i := range ids {
				rec := storetest.NewRecord(time.Now())
				require.NoError(b, st.Create(ctx, rec))
				ids[i] = rec.SessionID
			}
			seqs := make([]uint64, len(ids))
			i := 0
			for b.Loop() {
				seqs[i]++
				if err := st.Append(ctx, ids[i], []messages.PersistedEvent{benchEvent(seqs[i])}); err != nil {
					b.Fatal(err)
				}
				i = (i + 1) % len(ids)
			}
			b.ReportMetric(float64(st.OpenHandles()), "handles")
		})
	}
}
