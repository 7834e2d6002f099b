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

// BenchmarkStartAppendThen is the sessions path's shape of an append: a
// thousand sessions in turn, each with one batch of six events in flight
// through StartAppendThen (the record with every other batch, as a turn's
// streamed output and its record changes alternate), without fsyncs, so
// what is measured is the store's own CPU and allocations per append: the
// encoding, the request, the queueing, the applier's apply and answer.
func BenchmarkStartAppendThen(b *testing.B) {
	ctx := context.Background()
	st, err := filestore.Open(b.TempDir(), filestore.WithoutSync())
	require.NoError(b, err)
	defer st.Close()
	recs := make([]messages.SessionRecord, 1000)
	for i := range recs {
		recs[i] = storetest.NewRecord(time.Now())
		require.NoError(b, st.Create(ctx, recs[i]))
	}
	seqs := make([]uint64, len(recs))
	answered := make([]chan error, len(recs))
	for i := range answered {
		answered[i] = make(chan error, 1)
		answered[i] <- nil
	}
	evs := make([][]messages.PersistedEvent, len(recs))
	for i := range evs {
		evs[i] = make([]messages.PersistedEvent, 6)
	}
	// each session's events.jsonl is made before the timing: a file's
	// creation is the disk's cost, and it swings by milliseconds here
	for i := range recs {
		seqs[i]++
		require.NoError(b, st.Append(ctx, recs[i].SessionID, []messages.PersistedEvent{benchEvent(seqs[i])}))
	}
	i, n := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		if err := <-answered[i]; err != nil {
			b.Fatal(err)
		}
		for j := range evs[i] {
			seqs[i]++
			evs[i][j] = benchEvent(seqs[i])
		}
		var rec *messages.SessionRecord
		if (n/len(recs))%2 == 1 { // every other round carries records
			recs[i].RoundsElapsed++
			rec = &recs[i]
		}
		ch := answered[i]
		st.StartAppendThen(ctx, recs[i].SessionID, evs[i], rec, func(err error) { ch <- err })
		i = (i + 1) % len(recs)
		n++
	}
	for _, ch := range answered {
		if err := <-ch; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*6), "ns/event")
}
