package claudecode

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
)

// benchScenario: every turn is thinking and text, a Bash call that runs
// without asking, and a closing text: about eight CLI lines.
func benchScenario() *modelmock.Scenario {
	return &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "bench"}, Steps: []modelmock.Step{
		{Thinking: "a short plan", Text: "Looking.", Tool: &modelmock.ToolCall{Name: "Bash", Input: json.RawMessage(`{"command":"echo bench","description":"echo"}`)}},
		{Text: "Done: {{result}}"},
	}}}}
}

// latencies collects durations.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// stats returns the mean and the 99th percentile.
func (l *latencies) stats() (mean, p99 time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), l.d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum / time.Duration(len(s)), s[(len(s)*99)/100], len(s)
}

// BenchmarkLineOverhead runs turns of the real CLI against modelmock and
// reports, from the same run: the transport's own cost per CLI line (from
// the stdout read to the sink having taken each event the line caused:
// µs/event, p99-µs/event), next to
// the turn's wall time (StartTurn to EvTurnEnd at the sink), which is
// almost all the CLI's and the model server's. The ratio is the share of a
// turn the transport adds; no check depends on the machine's speed.
func BenchmarkLineOverhead(b *testing.B) {
	var lines, turns latencies
	l := newLive(b, benchScenario(), liveOpts{topts: []Option{WithTraceForTest(func(readAt time.Time, ev messages.Event) {
		lines.add(time.Since(readAt))
	})}})
	ctx := ctxFor(b, 10*time.Minute)
	from := 0
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		start := time.Now()
		if err := l.sess.StartTurn(ctx, i, fmt.Sprintf("bench %d", i)); err != nil {
			b.Fatal(err)
		}
		te, at := l.rec.wait(b, time.Minute, from, func(te turnEvent) bool { return te.turn == i && te.ev.Type == messages.EvTurnEnd })
		turns.add(time.Since(start))
		from = at + 1
		if te.ev.State != messages.TurnCompleted {
			b.Fatalf("turn %d: %+v", i, te.ev)
		}
	}
	b.StopTimer()
	report(b, &lines, &turns)
}

// report puts the line cost next to the turn time.
func report(b *testing.B, lines, turns *latencies) {
	lm, lp99, ln := lines.stats()
	tm, tp99, tn := turns.stats()
	if ln == 0 || tn == 0 {
		b.Fatal("nothing measured")
	}
	perTurn := float64(ln) / float64(tn)
	b.ReportMetric(float64(lm.Nanoseconds())/1e3, "µs/event")
	b.ReportMetric(float64(lp99.Nanoseconds())/1e3, "p99-µs/event")
	b.ReportMetric(perTurn, "events/turn")
	b.ReportMetric(float64(tm.Nanoseconds())/1e6, "ms/turn")
	b.ReportMetric(float64(tp99.Nanoseconds())/1e6, "p99-ms/turn")
	b.ReportMetric(100*perTurn*float64(lm)/float64(tm), "%overhead")
}

// BenchmarkParseAndMap is the pure part of the per-line cost: parsing a
// captured line and mapping it through the core, without I/O or goroutine
// hand-offs (compare µs/event of BenchmarkLineOverhead).
func BenchmarkParseAndMap(b *testing.B) {
	var lines [][]byte
	for _, l := range stdoutLines(b, "claude_full.jsonl") {
		if len(l) < 20<<10 { // the 40 KB initialize response is parsed once per session
			lines = append(lines, l)
		}
	}
	c := newCore(coreConfig{outputCap: DefaultOutputCap, lineCap: DefaultLineCap})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		line := lines[i%len(lines)]
		l, err := ParseLine(line)
		if err != nil {
			b.Fatal(err)
		}
		if !c.Running {
			_, _ = c.startTurn(c.Number+1, "x")
		}
		_ = c.Line(l)
	}
}
