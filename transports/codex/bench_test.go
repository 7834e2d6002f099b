package codex

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkLineOverhead measures what the transport adds per app-server
// line (parse plus one core step, over the reference capture's lines) and
// reports it as a ratio to a baseline measured in the same run: decoding
// the same line into a generic map, the least any JSON-RPC client does.
func BenchmarkLineOverhead(b *testing.B) {
	var lines [][]byte
	for _, l := range readCapture(b, "codex_appserver.jsonl") {
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
