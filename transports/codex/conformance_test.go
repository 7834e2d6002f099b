package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

// Caps of the conformance sessions: the output cap sits below what Codex
// lets through of a read of transporttest.BigOutputBytes, and the line cap
// below the long-line fault's line.
const (
	conformanceOutputCap = 4 << 10
	conformanceLineCap   = 256 << 10
	longLineBytes        = 1 << 20
)

// TestConformance runs the transport conformance suite against the real
// codex CLI, its model scripted by modelmock from each case's turns.
func TestConformance(t *testing.T) {
	bin := codexBinary(t)
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) transports.Transport {
			return New(WithBinary(bin), WithOutputCap(conformanceOutputCap), WithLineCap(conformanceLineCap))
		},
		Prepare: func(t *testing.T, c *transporttest.Case) transporttest.Setup {
			return prepareConformance(t, c, bin)
		},
	})
}

// prepareConformance scripts the model for c: one rule per turn, keyed on
// the turn's (unique) input, one model step per tool call; and one rule
// answering the deny reason the transport steers into a turn after a
// decline (Codex's decline carries no message of its own).
func prepareConformance(t *testing.T, c *transporttest.Case, bin string) transporttest.Setup {
	var sc modelmock.Scenario
	for _, tn := range c.Turns {
		steps, afterDeny := conformanceSteps(t, c, tn)
		sc.Rules = append(sc.Rules, modelmock.Rule{Match: modelmock.Match{Text: tn.Input}, Steps: steps})
		if afterDeny != "" {
			sc.Rules = append(sc.Rules, modelmock.Rule{Match: modelmock.Match{Text: denyPrefix}, Steps: []modelmock.Step{{Text: afterDeny}}})
		}
	}
	mock := startMock(t, &sc)
	setup := transporttest.Setup{
		Spec: transports.SessionSpec{
			Home:  t.TempDir(),
			Model: mockModel,
			Env:   mockEnv(mock),
		},
		AgentSaw:  mock.Saw,
		OutputCap: conformanceOutputCap,
	}
	fake := func(script string) transports.Transport {
		path := filepath.Join(t.TempDir(), "codex")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return New(WithBinary(path), WithOutputCap(conformanceOutputCap), WithLineCap(conformanceLineCap))
	}
	switch c.Fault {
	case transporttest.FaultNone:
	case transporttest.FaultBinaryMissing:
		setup.Transport = New(WithBinary(filepath.Join(t.TempDir(), "no-such-codex")))
	case transporttest.FaultImmediateExit:
		setup.Transport = fake("echo 'fake codex: exiting at once' >&2\nexit 3\n")
	case transporttest.FaultGarbageStdout:
		setup.Transport = fake(fmt.Sprintf("echo 'this line is not JSON-RPC'\nexec %q \"$@\"\n", bin))
	case transporttest.FaultLongLine:
		setup.Transport = fake(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x\necho\nexec %q \"$@\"\n", longLineBytes, bin))
	default:
		t.Fatalf("unknown fault %v", c.Fault)
	}
	return setup
}

// denyPrefix starts the steering the transport sends after a deny.
const denyPrefix = DenyPrefix

// conformanceSteps turns a turn's actions into model steps: a reply joins
// the step before unless that step called a tool; a write is an apply_patch
// call (gated by Codex's approval policy in the default posture); a slow
// action is a slowly streamed answer; a big output is a read of a big file
// with a shell command. afterDeny is the reply that follows a gated write,
// which the deny rule answers when the write is declined.
func conformanceSteps(t *testing.T, c *transporttest.Case, tn transporttest.Turn) (steps []modelmock.Step, afterDeny string) {
	var cur modelmock.Step
	open, gatedBefore := false, false
	flush := func() {
		if open {
			steps = append(steps, cur)
		}
		cur, open = modelmock.Step{}, false
	}
	for _, a := range tn.Actions {
		switch a.Kind {
		case transporttest.ActReply:
			if gatedBefore {
				afterDeny, gatedBefore = a.Text, false
			}
			if open && cur.Text != "" && cur.Tool == nil {
				cur.Text += "\n" + a.Text
			} else {
				flush()
				cur.Text, open = a.Text, true
			}
		case transporttest.ActWrite:
			flush()
			cur, open = patchStepContent(a.Path, a.Content), true
			flush()
			gatedBefore = a.Gated
		case transporttest.ActSlow:
			flush()
			cur, open = slowStep(a.Text, a.Duration), true
			flush()
		case transporttest.ActBigOutput:
			path := filepath.Join(c.Workspace, "big.txt")
			line := strings.Repeat("x", 49) + "\n"
			if err := os.WriteFile(path, []byte(strings.Repeat(line, a.Bytes/len(line)+1)), 0o644); err != nil {
				t.Fatal(err)
			}
			flush()
			cur, open = shellStep("cat big.txt", false), true
			flush()
		default:
			t.Fatalf("unknown action %v", a.Kind)
		}
	}
	flush()
	return steps, afterDeny
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
