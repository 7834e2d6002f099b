package codex

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/transporttest"
)

// BenchmarkLineOverhead measures what the transport adds per app-server
// line (parse plus one core step, over the reference capture's lines) and
// reports it as a ratio to a baseline measured in the same run: decoding
// the same line into a generic map, the least any JSON-RPC client does.
func BenchmarkLineOverhead(b *testing.B) {
	var lines [][]byte
	for _, l := range transporttest.ReadCapture(b, "testdata/codex/codex_appserver.jsonl") {
		if l.Dir == "<<" {
			lines = append(lines, []byte(l.Msg))
		}
	}
	perLine := func(f func(line []byte)) time.Duration {
		start := time.Now()
		for i := 0; i < b.N; i++ {
			for _, l := range lines {
				f(l)
			}
		}
		return time.Since(start) / time.Duration(b.N*len(lines))
	}
	b.ResetTimer()
	base := perLine(func(line []byte) {
		var m map[string]any
		_ = json.Unmarshal(line, &m)
	})
	c := newCore(coreConfig{outputCap: 64 << 10})
	c.beginTurn(1)
	ours := perLine(func(line []byte) {
		m, err := parseMessage(line)
		if err == nil && m.Kind != kindResponse {
			c.handle(m)
		}
	})
	b.ReportMetric(float64(ours.Nanoseconds()), "ns/line")
	b.ReportMetric(float64(ours)/float64(base), "x-generic-decode")
}

// BenchmarkFirstTurn measures a start to the end of its first turn (Open,
// turn/start, turn/completed against modelmock) with the warm pool, where
// each timed start finds the pool refilled (the refill is waited for,
// untimed), and without it, where the start boots its own app-server; both
// in the same run, so compare the two sub-benchmarks' ms/first-turn. Each
// also reports the share of Open (ms/open) and of the turn (ms/turn).
func BenchmarkFirstTurn(b *testing.B) {
	bin := codexBinary(b)
	m, err := modelmock.Start(b, &modelmock.Scenario{})
	if err != nil {
		b.Fatal(err)
	}
	cwd := b.TempDir()
	for _, c := range []struct {
		name string
		size int
	}{{"pool", 1}, {"nopool", 0}} {
		b.Run(c.name, func(b *testing.B) {
			kit, err := prockit.NewKit(b.TempDir(), "rt-bench-"+c.name)
			if err != nil {
				b.Fatal(err)
			}
			defer kit.Close() // after the pool is drained
			tr := New(WithBinary(bin), WithHomeRoot(b.TempDir()), WithWarmPool(c.size))
			defer tr.DrainWarm(nil)
			n := 0
			spec := func() transports.SessionSpec {
				n++
				id := fmt.Sprintf("bench-%d", n)
				return transports.SessionSpec{SessionID: id, Cwd: cwd, Model: mockModel, Procs: kit.Group(id), Env: mockEnv(m)}
			}
			var opened, turned time.Duration
			first := func(sp transports.SessionSpec) transports.Session {
				rec := newRecorder()
				start := time.Now()
				s, err := tr.Open(ctxT(b), sp, rec.sink)
				if err != nil {
					b.Fatal(err)
				}
				open := time.Now()
				if err := s.StartTurn(ctxT(b), 1, "hello"); err != nil {
					b.Fatal(err)
				}
				if end := rec.turnEnd(b, 1); end.State != messages.TurnCompleted {
					b.Fatalf("first turn: %+v", end)
				}
				opened += open.Sub(start)
				turned += time.Since(open)
				return s
			}
			closeIt := func(s transports.Session) {
				if err := s.Close(ctxT(b)); err != nil {
					b.Fatal(err)
				}
			}
			closeIt(first(spec())) // the pool learns the key from a start
			opened, turned = 0, 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				sp := spec()
				if c.size > 0 {
					deadline := time.Now().Add(liveTimeout)
					for tr.WarmIdle(sp) == 0 {
						if time.Now().After(deadline) {
							b.Fatal("the pool did not refill")
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
				b.StartTimer()
				s := first(sp)
				b.StopTimer()
				closeIt(s)
			}
			b.ReportMetric(float64((opened+turned).Milliseconds())/float64(b.N), "ms/first-turn")
			b.ReportMetric(float64(opened.Milliseconds())/float64(b.N), "ms/open")
			b.ReportMetric(float64(turned.Milliseconds())/float64(b.N), "ms/turn")
		})
	}
}
