package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
)

// memoryOptions runs the runtime on the in-memory store: these benchmarks
// time routing, not the disk.
func memoryOptions() Options {
	return Options{Store: func(string) (store.Store, error) { return store.NewMemory(), nil }}.withDefaults()
}

// BenchmarkRuntimeRouting times ops routed Runtime -> registry -> session
// -> reply, next to hollywood's own round trips (same run):
//
//   - read-turn-buffered: a read-turn whose result is already queued and
//     durable (results are queued in chunks outside the timer);
//   - set-posture-same: a set-posture to the posture the session has (the
//     session answers at once and records nothing);
//   - hollywood-request: Engine.Request(...).Result() to an actor that
//     Responds;
//   - two-hops: a message through a forwarding actor to another that
//     answers on a channel, the runtime's shape with nothing of ours.
func BenchmarkRuntimeRouting(b *testing.B) {
	ctx := context.Background()
	b.Run("read-turn-buffered", func(b *testing.B) {
		s, err := startBuffered(ctx, memoryOptions(), filepath.Join(b.TempDir(), "home"), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer s.stop(ctx)
		const chunk = 512
		b.ReportAllocs()
		for b.Loop() {
			if s.read == s.turns {
				b.StopTimer()
				if err := s.queue(ctx, chunk); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			if _, err := s.readNext(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("set-posture-same", func(b *testing.B) {
		s, err := startBuffered(ctx, memoryOptions(), filepath.Join(b.TempDir(), "home"), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer s.stop(ctx)
		op := messages.SetPosture{SessionID: s.sid, Posture: messages.PostureDefault}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.b.rt.SetPosture(ctx, scope, op); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hollywood-request", func(b *testing.B) {
		e, err := newRawEngine()
		if err != nil {
			b.Fatal(err)
		}
		pid := spawnRaw(e, "target", 0)
		defer e.Poison(pid)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Request(pid, "ping", time.Minute).Result(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("two-hops", func(b *testing.B) {
		e, err := newRawEngine()
		if err != nil {
			b.Fatal(err)
		}
		target, fwd := spawnRaw(e, "target", 0), spawnRaw(e, "registry", 0)
		defer e.Poison(target)
		defer e.Poison(fwd)
		b.ReportAllocs()
		for b.Loop() {
			ch := make(chan struct{}, 1)
			e.Send(fwd, rawForward{to: target, ping: rawPing{reply: ch}})
			<-ch
		}
	})
}
