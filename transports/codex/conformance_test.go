package codex

import (
	"strings"
	"testing"
	"time"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

// Caps of the conformance sessions: the output cap sits below what Codex
// lets through of a read of transporttest.BigOutputBytes (the line cap
// is transporttest.LineCap).
const (
	conformanceOutputCap = 4 << 10
)

// TestConformance runs the transport conformance suite against the real
// codex CLI, its model scripted by modelmock from each case's turns: a
// write is an apply_patch call (gated by Codex's approval policy in the
// default posture); a slow action is a slowly streamed answer; a big
// output is a read of a big file with a shell command. Codex's decline
// carries no message of its own: one more rule answers the deny reason
// the transport steers into the turn with the reply after the write.
func TestConformance(t *testing.T) {
	transporttest.RunCLI(t, transporttest.CLI{
		Name: "codex",
		Bin:  codexBinary(t),
		New: func(bin string, outputCap int) transports.Transport {
			return New(WithBinary(bin), WithOutputCap(outputCap), WithLineCap(transporttest.LineCap))
		},
		Start: startMock,
		Spec: func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
			return transports.SessionSpec{Home: t.TempDir(), Model: mockModel, Env: mockEnv(mock)}
		},
		Acts: transporttest.Acts{
			Write: func(s *transporttest.Steps, _ string, a transporttest.Action) {
				s.Add(patchStepContent(a.Path, a.Content))
			},
			Slow: func(s *transporttest.Steps, _ *transporttest.Case, a transporttest.Action) {
				s.Add(slowStep(a.Text, a.Duration))
			},
			Read: func(s *transporttest.Steps, _ string) { s.Add(shellStep("cat big.txt", false)) },
		},
		Rules: func(_ *transporttest.Case, tn transporttest.Turn, _ []modelmock.Step) []modelmock.Rule {
			if afterDeny := replyAfterGatedWrite(tn); afterDeny != "" {
				return []modelmock.Rule{{Match: modelmock.Match{Text: DenyPrefix}, Steps: []modelmock.Step{{Text: afterDeny}}}}
			}
			return nil
		},
		OutputCap: conformanceOutputCap,
	})
}

// replyAfterGatedWrite is the reply that follows the turn's last gated
// write ("" without one).
func replyAfterGatedWrite(tn transporttest.Turn) string {
	reply, gated := "", false
	for _, a := range tn.Actions {
		switch {
		case a.Kind == transporttest.ActWrite:
			gated = a.Gated
		case a.Kind == transporttest.ActReply && gated:
			reply, gated = a.Text, false
		}
	}
	return reply
}

// patchStepContent adds path with content (whole lines) by apply_patch.
func patchStepContent(path, content string) modelmock.Step {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for _, l := range strings.SplitAfter(strings.TrimSuffix(content, "\n"), "\n") {
		b.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
	}
	b.WriteString("*** End Patch\n")
	return patchRaw(b.String())
}

// slowStep streams text at once and then keeps streaming for d, one
// piece a second, so an interrupt or a steer finds the turn running.
func slowStep(text string, d time.Duration) modelmock.Step {
	n := int(d / time.Second)
	if n < 1 {
		n = 1
	}
	width := len(text) + 1
	first := text + strings.Repeat(" ", width-len(text))
	filler := strings.Repeat(".", width-1) + " "
	return modelmock.Step{Text: first + strings.Repeat(filler, n), Chunks: n + 1, ChunkDelay: modelmock.Duration(time.Second)}
}
