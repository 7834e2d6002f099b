package script_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
	"github.com/codesession/codesession/transports/transporttest"
)

// conformanceCap is the output cap of the conformance sessions: below
// transporttest.BigOutputBytes, so the output-capped case is cut.
const conformanceCap = 16 << 10

// TestConformance runs the transport conformance suite against the script
// backend. Each case's turns become a scenario file named by
// CODESESSION_SCRIPT; the bad cases that need a process (a binary, its
// stdout) do not apply to an in-process agent and are skipped.
func TestConformance(t *testing.T) {
	transporttest.Run(t, scriptHarness())
}

// scriptHarness is the script backend's conformance harness.
func scriptHarness() transporttest.Harness {
	return transporttest.Harness{
		New: func(t *testing.T) transports.Transport {
			return script.New(script.WithOutputCap(conformanceCap))
		},
		Prepare: prepareScript,
	}
}

// prepareScript writes c as a scenario: one turn per case turn, matched by
// its input, each opening with a thinking step that repeats the input (so
// the events show what the scripted agent was given; the suite's
// SawInEvents stands in for AgentSaw), then one step per action.
func prepareScript(t *testing.T, c *transporttest.Case) transporttest.Setup {
	var sc script.Scenario
	switch c.Fault {
	case transporttest.FaultNone:
		for _, tn := range c.Turns {
			steps := []script.Step{script.Thinking("Received: {{input}}")}
			for _, a := range tn.Actions {
				steps = append(steps, scriptSteps(t, a)...)
			}
			sc.Turns = append(sc.Turns, script.Turn{Match: tn.Input, Steps: steps})
		}
	case transporttest.FaultImmediateExit:
		// The in-process agent's way of dying as soon as it is used.
		sc.Turns = []script.Turn{{Steps: []script.Step{script.Crash("the scripted backend exited at once")}}}
	case transporttest.FaultBinaryMissing:
		t.Skip("not applicable: the script backend runs in-process and has no executable")
	case transporttest.FaultGarbageStdout, transporttest.FaultLongLine:
		t.Skip("not applicable: the script backend runs in-process and reads no stdout")
	default:
		t.Fatalf("unknown fault %v", c.Fault)
	}
	data, err := json.MarshalIndent(&sc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// Outside the workspace, which holds only what the agent writes.
	path := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return transporttest.Setup{
		Spec:      transports.SessionSpec{Env: []string{script.EnvScenario + "=" + path}},
		OutputCap: conformanceCap,
	}
}

func scriptSteps(t *testing.T, a transporttest.Action) []script.Step {
	switch a.Kind {
	case transporttest.ActReply:
		return []script.Step{script.Text(a.Text)}
	case transporttest.ActWrite:
		s := script.Write(a.Path, a.Content)
		if a.Gated {
			s = s.Asking()
		}
		return []script.Step{s}
	case transporttest.ActSlow:
		return []script.Step{script.Text(a.Text), script.Delay(a.Duration)}
	case transporttest.ActBigOutput:
		return []script.Step{script.Tool("Read", map[string]string{"file_path": "big.txt"}, strings.Repeat("x", a.Bytes))}
	}
	t.Fatalf("unknown action %v", a.Kind)
	return nil
}
