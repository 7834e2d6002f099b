package droid

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

const (
	conformanceOutputCap = 16 << 10
	conformanceLineCap   = 256 << 10
	longLineBytes        = 1 << 20
	bigOutputCap         = 1 << 10
)

func bigOutput(c *transporttest.Case) bool {
	for _, tn := range c.Turns {
		for _, a := range tn.Actions {
			if a.Kind == transporttest.ActBigOutput {
				return true
			}
		}
	}
	return false
}

// TestConformance runs the transport conformance suite against the real
// droid CLI, its model scripted by modelmock (Chat Completions) from each
// case's turns.
func TestConformance(t *testing.T) {
	bin := droidBinary(t)
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) transports.Transport {
			return New(WithBinary(bin), WithOutputCap(conformanceOutputCap), WithLineCap(conformanceLineCap))
		},
		Prepare: func(t *testing.T, c *transporttest.Case) transporttest.Setup {
			return prepareConformance(t, c, bin)
		},
		Timeout: 2 * time.Minute,
	})
}

// prepareConformance scripts the model for c: one rule per turn keyed on
// its input, and for each gated write one more rule that answers the
// follow-up carrying a deny reason with the rest of the turn.
func prepareConformance(t *testing.T, c *transporttest.Case, bin string) transporttest.Setup {
	var sc modelmock.Scenario
	for _, tn := range c.Turns {
		steps, denials := conformanceSteps(t, c, tn)
		sc.Rules = append(sc.Rules, modelmock.Rule{Match: modelmock.Match{Text: tn.Input}, Steps: steps})
		sc.Rules = append(sc.Rules, denials...)
	}
	mock, err := modelmock.Start(t, &sc)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	writeFactorySettings(t, home, mock.URL())
	setup := transporttest.Setup{
		Spec:      transports.SessionSpec{Home: home, Model: mockModelID},
		AgentSaw:  mock.Saw,
		OutputCap: conformanceOutputCap,
	}
	fake := func(script string) transports.Transport {
		path := filepath.Join(t.TempDir(), "droid")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return New(WithBinary(path), WithOutputCap(conformanceOutputCap), WithLineCap(conformanceLineCap))
	}
	switch c.Fault {
	case transporttest.FaultNone:
		if bigOutput(c) {
			// droid cuts a tool's output itself (a command's to about 3 KB):
			// the cap must sit below what reaches the transport
			setup.OutputCap = bigOutputCap
			setup.Transport = New(WithBinary(bin), WithOutputCap(bigOutputCap), WithLineCap(conformanceLineCap))
		}
	case transporttest.FaultBinaryMissing:
		setup.Transport = New(WithBinary(filepath.Join(t.TempDir(), "no-such-droid")))
	case transporttest.FaultImmediateExit:
		setup.Transport = fake("echo 'fake droid: exiting at once' >&2\nexit 3\n")
	// the noise cases run the fake droid of fake_test.go behind the noise:
	// what they test is the transport's reading, and each real droid start
	// costs the package run time it cannot spare on a loaded machine
	case transporttest.FaultGarbageStdout:
		setup.Transport = fake(fmt.Sprintf("echo 'this line is not stream-jsonrpc'\nexec %s\n", fakeDroidCommand(t)))
	case transporttest.FaultLongLine:
		setup.Transport = fake(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x\necho\nexec %s\n", longLineBytes, fakeDroidCommand(t)))
	default:
		t.Fatalf("unknown fault %v", c.Fault)
	}
	return setup
}

// fakeDroidCommand is a shell command running the fake droid.
func fakeDroidCommand(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("env %s=1 %q", envFakeDroid, exe)
}

// conformanceSteps turns a turn's actions into model steps (a reply joins
// the step before unless that one called a tool; each tool call ends its
// step), plus, for each gated write, a rule that answers the deny
// follow-up with the steps after the write.
func conformanceSteps(t *testing.T, c *transporttest.Case, tn transporttest.Turn) ([]modelmock.Step, []modelmock.Rule) {
	var steps []modelmock.Step
	var cur modelmock.Step
	open := false
	type denial struct {
		path string
		from int
	}
	var denials []denial
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
			switch {
			case open && cur.Text != "":
				cur.Text += "\n" + a.Text
			default:
				cur.Text, open = a.Text, true
			}
		case transporttest.ActWrite:
			path := filepath.Join(c.Workspace, filepath.FromSlash(a.Path))
			tool("Create", map[string]any{"file_path": path, "content": a.Content})
			if a.Gated {
				denials = append(denials, denial{path: path, from: len(steps)})
			}
		case transporttest.ActSlow:
			// droid asks before any command at autonomy off, so the
			// slowness is the model's: a read-only LS, then a response held
			// back for the duration (droid.interrupt_session aborts it)
			cur.Text, open = a.Text, true
			tool("LS", map[string]any{"directory_path": c.Workspace})
			cur.Delay, open = modelmock.Duration(a.Duration), true
		case transporttest.ActBigOutput:
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
	var rules []modelmock.Rule
	for _, d := range denials {
		rest := steps[d.from:]
		if len(rest) == 0 {
			rest = []modelmock.Step{{Text: "Understood."}}
		}
		rules = append(rules, modelmock.Rule{Match: modelmock.Match{Text: "The user denied your Create call (" + d.path}, Steps: rest})
	}
	return steps, rules
}
