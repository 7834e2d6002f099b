package droid

import (
	"context"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
)

// BenchmarkFirstTurn is what a droid user waits for: Open to the first
// turn's EvTurnEnd against modelmock, with the warm pool (each timed start
// finds the pool refilled; the refill is waited for untimed) and without
// it (the start boots droid), in the same run. Run it with a fixed count,
// e.g. -bench FirstTurn -benchtime 5x: a boot is seconds.
func BenchmarkFirstTurn(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
	}{{"pool", 1}, {"nopool", 0}} {
		b.Run(c.name, func(b *testing.B) {
			r := newPoolRig(b, nil, c.size)
			firstTurn := func() {
				spec := r.spec(mockModelID, messages.PostureDefault)
				rec := newRecorder()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				s, err := r.tr.Open(ctx, spec, rec.sink)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.StartTurn(ctx, 1, "hello"); err != nil {
					b.Fatal(err)
				}
				if end := rec.turnEnd(b, 1); end.State != messages.TurnCompleted {
					b.Fatalf("turn 1 ended %s: %s", end.State, dump(rec.all()))
				}
				b.StopTimer()
				if err := s.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
			probe := r.spec(mockModelID, messages.PostureDefault)
			if c.size > 0 {
				b.StopTimer()
				firstTurn() // learns the key: its first turn refills the pool
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if c.size > 0 {
					r.waitIdle(probe, 1, "the pool was refilled before the timed start")
				}
				b.StartTimer()
				firstTurn()
			}
		})
	}
}
