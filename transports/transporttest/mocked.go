package transporttest

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
)

// CLI is a backend that runs a real agent CLI whose model modelmock
// scripts: everything its conformance run needs, as data. RunCLI turns
// it into a Harness, so a backend's conformance test is one call:
//
//	transporttest.RunCLI(t, transporttest.CLI{
//		Name: "claude", Bin: bin,
//		New:  func(bin string, outputCap int) transports.Transport { ... },
//		Spec: func(t testing.TB, mock *modelmock.Server) transports.SessionSpec { ... },
//		Acts: transporttest.Acts{Write: ..., Slow: ..., Read: ...},
//	})
//
// Each case's turns become one modelmock rule each, keyed on the turn's
// (unique) input, whose steps Acts builds; the bad cases run the
// transport on a missing executable or on a shell script that exits at
// once or writes noise before it execs the real CLI.
type CLI struct {
	// Name is the CLI's, used in the fake executables' names and messages.
	Name string
	// Bin is the real CLI.
	Bin string
	// New builds the transport on the executable bin with output cap
	// outputCap (the backend's line cap is its own choice).
	New func(bin string, outputCap int) transports.Transport
	// Spec points a session at mock (Env, Home, Model).
	Spec func(t testing.TB, mock *modelmock.Server) transports.SessionSpec
	// Start replaces modelmock.Start (a mock with options of its own).
	Start func(t *testing.T, sc *modelmock.Scenario) *modelmock.Server
	// Acts says how the agent acts out each kind of action.
	Acts Acts
	// Rules, when set, adds rules for a turn after its own (follow-ups
	// such as the one a deny sends), given the turn's steps.
	Rules func(c *Case, tn Turn, steps []modelmock.Step) []modelmock.Rule
	// OutputCap is the cap of every session (required); BigOutputCap,
	// when set, replaces it for a case with a big output (a CLI that cuts
	// a tool's output itself, below OutputCap).
	OutputCap, BigOutputCap int
	// Exec is the shell command a noisy fake execs after its noise;
	// default the real Bin with the fake's arguments.
	Exec string
	// Timeout is the Harness's.
	Timeout time.Duration
	// Skip maps case names to the reason a case cannot be acted out.
	Skip map[string]string
}

// Acts are how an agent acts out a case's actions as model steps: a
// reply is always text (Steps.Text); Write is called with the file's
// absolute path, Read with the big file's (its whole content must reach
// the tool's result), Slow with the action (its text must reach the
// client at once, and the turn then keep running for a.Duration).
type Acts struct {
	Write func(s *Steps, path string, a Action)
	Slow  func(s *Steps, c *Case, a Action)
	Read  func(s *Steps, path string)
}

// RunCLI runs the suite against b.
func RunCLI(t *testing.T, b CLI) {
	t.Helper()
	Run(t, b.Harness())
}

// Harness is b's Harness.
func (b CLI) Harness() Harness {
	return Harness{
		Timeout: b.Timeout,
		New:     func(t *testing.T) transports.Transport { return b.New(b.Bin, b.OutputCap) },
		Prepare: func(t *testing.T, c *Case) Setup {
			if why, ok := b.Skip[c.Name]; ok {
				t.Skip(why)
			}
			return b.prepare(t, c)
		},
	}
}

func (b CLI) prepare(t *testing.T, c *Case) Setup {
	var sc modelmock.Scenario
	for _, tn := range c.Turns {
		steps := MockSteps(t, c, tn, b.Acts)
		sc.Rules = append(sc.Rules, modelmock.Rule{Match: modelmock.Match{Text: tn.Input}, Steps: steps})
		if b.Rules != nil {
			sc.Rules = append(sc.Rules, b.Rules(c, tn, steps)...)
		}
	}
	var mock *modelmock.Server
	if b.Start != nil {
		mock = b.Start(t, &sc)
	} else {
		var err error
		if mock, err = modelmock.Start(t, &sc); err != nil {
			t.Fatal(err)
		}
	}
	setup := Setup{Spec: b.Spec(t, mock), AgentSaw: mock.Saw, OutputCap: b.OutputCap}
	if b.BigOutputCap > 0 && HasAction(c, ActBigOutput) {
		setup.OutputCap = b.BigOutputCap
	}
	setup.Transport = b.Fault(t, c, setup.OutputCap)
	return setup
}

// Fault is the transport of c's fault with output cap outputCap: the real
// CLI for a case without one; the missing executable; a script that
// exits at once; a script that writes a line that is not the protocol, or
// a line over any line cap, before it execs the real CLI (Exec).
func (b CLI) Fault(t *testing.T, c *Case, outputCap int) transports.Transport {
	fake := func(script string) transports.Transport {
		path := filepath.Join(t.TempDir(), b.Name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return b.New(path, outputCap)
	}
	exec := b.Exec
	if exec == "" {
		exec = fmt.Sprintf("%q \"$@\"", b.Bin)
	}
	switch c.Fault {
	case FaultNone:
		return b.New(b.Bin, outputCap)
	case FaultBinaryMissing:
		return b.New(filepath.Join(t.TempDir(), "no-such-"+b.Name), outputCap)
	case FaultImmediateExit:
		return fake(fmt.Sprintf("echo 'fake %s: exiting at once' >&2\nexit 3\n", b.Name))
	case FaultGarbageStdout:
		return fake(fmt.Sprintf("echo 'this line is not the protocol of %s'\nexec %s\n", b.Name, exec))
	case FaultLongLine:
		return fake(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x\necho\nexec %s\n", LongLineBytes, exec))
	}
	t.Fatalf("unknown fault %v", c.Fault)
	return nil
}

// LongLineBytes is the length of the long-line fault's line: over the
// line cap of every conformance transport.
const LongLineBytes = 1 << 20

// LineCap is the line cap a backend's conformance transport takes: far
// above any line a CLI writes in the cases, below LongLineBytes.
const LineCap = 256 << 10

// HasAction reports whether a turn of c has an action of kind k.
func HasAction(c *Case, k ActionKind) bool {
	for _, tn := range c.Turns {
		for _, a := range tn.Actions {
			if a.Kind == k {
				return true
			}
		}
	}
	return false
}

// MockSteps turns a turn's actions into model steps by acts: a reply is
// text, the rest is what acts says.
func MockSteps(t *testing.T, c *Case, tn Turn, acts Acts) []modelmock.Step {
	var s Steps
	for _, a := range tn.Actions {
		switch a.Kind {
		case ActReply:
			s.Text(a.Text)
		case ActWrite:
			acts.Write(&s, filepath.Join(c.Workspace, filepath.FromSlash(a.Path)), a)
		case ActSlow:
			acts.Slow(&s, c, a)
		case ActBigOutput:
			acts.Read(&s, WriteBigFile(t, c, a.Bytes))
		default:
			t.Fatalf("unknown action %v", a.Kind)
		}
	}
	return s.Done()
}

// WriteBigFile writes the workspace's big.txt, n bytes or a little more
// of 50-byte lines (which the CLIs pass through whole), and returns its path.
func WriteBigFile(t testing.TB, c *Case, n int) string {
	path := filepath.Join(c.Workspace, "big.txt")
	line := strings.Repeat("x", 49) + "\n"
	if err := os.WriteFile(path, []byte(strings.Repeat(line, n/len(line)+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Steps builds one turn's model steps: text joins the open step, a tool
// call ends the step it joins, and a step of its own ends the open one.
// The zero value is empty.
type Steps struct {
	steps []modelmock.Step
	cur   modelmock.Step
	open  bool
}

// Text adds text to the open step (after a newline) or opens one with it.
func (s *Steps) Text(text string) {
	if s.open && s.cur.Text != "" {
		s.cur.Text += "\n" + text
		return
	}
	s.cur.Text, s.open = text, true
}

// Call ends the open step (or a new one) with a tool call.
func (s *Steps) Call(call modelmock.ToolCall) {
	s.cur.Tool, s.open = &call, true
	s.flush()
}

// Add ends the open step and adds st as a step of its own.
func (s *Steps) Add(st modelmock.Step) {
	s.flush()
	s.steps = append(s.steps, st)
}

// Open ends the open step and opens st, which later text joins.
func (s *Steps) Open(st modelmock.Step) {
	s.flush()
	s.cur, s.open = st, true
}

// Done ends the open step and returns the steps.
func (s *Steps) Done() []modelmock.Step {
	s.flush()
	return s.steps
}

func (s *Steps) flush() {
	if s.open {
		s.steps = append(s.steps, s.cur)
	}
	s.cur, s.open = modelmock.Step{}, false
}

// Call is a model tool call with input marshalled from v.
func Call(name string, v map[string]any) modelmock.ToolCall {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return modelmock.ToolCall{Name: name, Input: b}
}
