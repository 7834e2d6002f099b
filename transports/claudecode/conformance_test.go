package claudecode

import (
	"encoding/json"
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

// Caps of the conformance sessions: the output cap sits below what the CLI
// lets through of a read of transporttest.BigOutputBytes, and the line cap
// below the long-line fault's line.
const (
	conformanceOutputCap = 16 << 10
	conformanceLineCap   = 256 << 10
	longLineBytes        = 1 << 20
)

// TestConformance runs the transport conformance suite against the real
// claude CLI, its model scripted by modelmock from each case's turns.
func TestConformance(t *testing.T) {
	bin := claudeBinary(t)
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
// the turn's (unique) input, one model step per tool call.
func prepareConformance(t *testing.T, c *transporttest.Case, bin string) transporttest.Setup {
	var sc modelmock.Scenario
	for _, tn := range c.Turns {
		sc.Rules = append(sc.Rules, modelmock.Rule{Match: modelmock.Match{Text: tn.Input}, Steps: conformanceSteps(t, c, tn)})
	}
	mock, err := modelmock.Start(t, &sc)
	if err != nil {
		t.Fatal(err)
	}
	setup := transporttest.Setup{
		Spec: transports.SessionSpec{
			Home:  t.TempDir(),
			Model: "claude-mock-1",
			Env:   []string{"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=sk-ant-test"},
		},
		AgentSaw:  mock.Saw,
		OutputCap: conformanceOutputCap,
	}
	fake := func(script string) transports.Transport {
		path := filepath.Join(t.TempDir(), "claude")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return New(WithBinary(path), WithOutputCap(conformanceOutputCap), WithLineCap(conformanceLineCap))
	}
	switch c.Fault {
	case transporttest.FaultNone:
	case transporttest.FaultBinaryMissing:
		setup.Transport = New(WithBinary(filepath.Join(t.TempDir(), "no-such-claude")))
	case transporttest.FaultImmediateExit:
		setup.Transport = fake("echo 'fake claude: exiting at once' >&2\nexit 3\n")
	case transporttest.FaultGarbageStdout:
		setup.Transport = fake(fmt.Sprintf("echo 'this line is not stream-json'\nexec %q \"$@\"\n", bin))
	case transporttest.FaultLongLine:
		setup.Transport = fake(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x\necho\nexec %q \"$@\"\n", longLineBytes, bin))
	default:
		t.Fatalf("unknown fault %v", c.Fault)
	}
	return setup
}

// conformanceSteps turns a case turn's actions into model steps: a reply
// joins the step it follows unless that step called a tool; each tool call
// (a write, the sleep of a slow action, the read of a big output) ends its
// step, whose result the next step answers.
func conformanceSteps(t *testing.T, c *transporttest.Case, tn transporttest.Turn) []modelmock.Step {
	var steps []modelmock.Step
	var cur modelmock.Step
	open := false
	flush := func() {
		if open {
			steps = append(steps, cur)
		}
		cur, open = modelmock.Step{}, false
	}
	tool := func(name string, input map[string]any) {
		b, err := json.Marshal(input)
		if err != nil {
			t.Fatal(err)
		}
		cur.Tool, open = &modelmock.ToolCall{Name: name, Input: b}, true
		flush()
	}
	for _, a := range tn.Actions {
		switch a.Kind {
		case transporttest.ActReply:
			if open && cur.Text != "" {
				cur.Text += "\n" + a.Text
			} else {
				cur.Text, open = a.Text, true
			}
		case transporttest.ActWrite:
			tool("Write", map[string]any{"file_path": filepath.Join(c.Workspace, filepath.FromSlash(a.Path)), "content": a.Content})
		case transporttest.ActSlow:
			cur.Text, open = a.Text, true
			secs := int((a.Duration + time.Second - 1) / time.Second)
			tool("Bash", map[string]any{"command": fmt.Sprintf("sleep %d", secs), "description": "wait", "timeout": 600000})
		case transporttest.ActBigOutput:
			// a file of short lines, read whole: the CLI passes it through
			path := filepath.Join(c.Workspace, "big.txt")
			line := strings.Repeat("x", 49) + "\n"
			if err := os.WriteFile(path, []byte(strings.Repeat(line, a.Bytes/len(line)+1)), 0o644); err != nil {
				t.Fatal(err)
			}
			tool("Read", map[string]any{"file_path": path})
		default:
			t.Fatalf("unknown action %v", a.Kind)
		}
	}
	flush()
	return steps
}
