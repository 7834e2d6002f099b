package claudecode

import (
	"fmt"
	"testing"
	"time"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

// Caps of the conformance sessions: the output cap sits below what the CLI
// lets through of a read of transporttest.BigOutputBytes (the line cap
// is transporttest.LineCap).
const (
	conformanceOutputCap = 16 << 10
)

// TestConformance runs the transport conformance suite against the real
// claude CLI, its model scripted by modelmock from each case's turns:
// writes by Write, a slow action as a Bash sleep, the big output as a
// Read of a file of short lines (the CLI passes it through).
func TestConformance(t *testing.T) {
	transporttest.RunCLI(t, transporttest.CLI{
		Name: "claude",
		Bin:  claudeBinary(t),
		New: func(bin string, outputCap int) transports.Transport {
			return New(WithBinary(bin), WithOutputCap(outputCap), WithLineCap(transporttest.LineCap))
		},
		Spec: func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
			return transports.SessionSpec{Home: t.TempDir(), Model: "claude-mock-1",
				Env: []string{"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test"}}
		},
		Acts: transporttest.Acts{
			Write: func(s *transporttest.Steps, path string, a transporttest.Action) {
				s.Call(transporttest.Call("Write", map[string]any{"file_path": path, "content": a.Content}))
			},
			Slow: func(s *transporttest.Steps, _ *transporttest.Case, a transporttest.Action) {
				s.Text(a.Text)
				secs := int((a.Duration + time.Second - 1) / time.Second)
				s.Call(transporttest.Call("Bash", map[string]any{"command": fmt.Sprintf("sleep %d", secs), "description": "wait", "timeout": 600000}))
			},
			Read: func(s *transporttest.Steps, path string) {
				s.Call(transporttest.Call("Read", map[string]any{"file_path": path}))
			},
		},
		OutputCap: conformanceOutputCap,
	})
}
