// Package acptest is what the ACP backends' tests share (each finds its
// pinned CLI with subprocesstest.Find): a transporttest harness that
// scripts modelmock from a conformance case in the agent's own tool
// vocabulary, plus the fake binaries of the bad cases. It is imported by
// tests only.
package acptest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

// Caps of the conformance sessions: the output cap below what the agents
// pass through of a read of transporttest.BigOutputBytes, the line cap
// below the long-line fault's line.
const (
	OutputCap     = 16 << 10
	LineCap       = 768 << 10
	longLineBytes = 1 << 20
)

// Home makes one HOME for every session of a test binary, removed when
// m's tests are done: an agent's first start in a fresh HOME (databases,
// caches) costs more than all its later ones. Call it from TestMain.
func Home(m *testing.M, prefix string) int {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	SharedHome = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	return code
}

// SharedHome is the HOME Home made.
var SharedHome string

// Tools is an agent's tool vocabulary: the model calls that write a file
// and that show a file's whole content in the tool's result (a read, or a
// shell's cat where a read reports only a summary over ACP), with names
// and inputs as the agent offers them to its model.
type Tools struct {
	Write func(path, content string) modelmock.ToolCall
	Read  func(path string) modelmock.ToolCall
}

// Backend is what one ACP backend's conformance run needs.
type Backend struct {
	// Bin is the real CLI.
	Bin string
	// New builds the transport with the given options.
	New func(opts ...acp.Option) transports.Transport
	// Spec points a session at the mock (Env, Home, Model).
	Spec  func(t testing.TB, mock *modelmock.Server) transports.SessionSpec
	Tools Tools
	// OutputCap replaces the package's OutputCap, for a CLI that cuts big
	// outputs itself below it.
	OutputCap int
	// Skip maps case names to the reason a case cannot be acted out.
	Skip map[string]string
}

func (b Backend) outputCap() int {
	if b.OutputCap > 0 {
		return b.OutputCap
	}
	return OutputCap
}

// Options are the transport options of every conformance session.
func Options(extra ...acp.Option) []acp.Option {
	return append([]acp.Option{acp.WithOutputCap(OutputCap), acp.WithLineCap(LineCap)}, extra...)
}

// Harness is the transporttest harness of b.
func Harness(b Backend) transporttest.Harness {
	return transporttest.Harness{
		// An agent CLI starts in seconds on an idle machine and in minutes
		// on a loaded one; the bound only stops hangs.
		Timeout: 2*time.Minute + 15*time.Second,
		New:     func(t *testing.T) transports.Transport { return b.New(Options(acp.WithBinary(b.Bin))...) },
		Prepare: func(t *testing.T, c *transporttest.Case) transporttest.Setup {
			if why, ok := b.Skip[c.Name]; ok {
				t.Skip(why)
			}
			return Prepare(t, c, b)
		},
	}
}

// Prepare scripts the mock for c and returns the case's setup.
func Prepare(t *testing.T, c *transporttest.Case, b Backend) transporttest.Setup {
	var sc modelmock.Scenario
	for _, tn := range c.Turns {
		sc.Rules = append(sc.Rules, modelmock.Rule{Match: modelmock.Match{Text: tn.Input}, Steps: Steps(t, c, tn, b.Tools)})
	}
	mock, err := modelmock.Start(t, &sc)
	if err != nil {
		t.Fatal(err)
	}
	setup := transporttest.Setup{Spec: b.Spec(t, mock), AgentSaw: mock.Saw, OutputCap: b.outputCap()}
	fake := func(script string) transports.Transport {
		path := filepath.Join(t.TempDir(), "fake-agent")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return b.New(Options(acp.WithOutputCap(b.outputCap()), acp.WithBinary(path))...)
	}
	switch c.Fault {
	case transporttest.FaultNone:
	case transporttest.FaultBinaryMissing:
		setup.Transport = b.New(acp.WithBinary(filepath.Join(t.TempDir(), "no-such-agent")))
	case transporttest.FaultImmediateExit:
		setup.Transport = fake("echo 'fake agent: exiting at once' >&2\nexit 3\n")
	case transporttest.FaultGarbageStdout:
		setup.Transport = fake(fmt.Sprintf("echo 'this line is not ACP'\nexec %q \"$@\"\n", b.Bin))
	case transporttest.FaultLongLine:
		setup.Transport = fake(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x\necho\nexec %q \"$@\"\n", longLineBytes, b.Bin))
	default:
		t.Fatalf("unknown fault %v", c.Fault)
	}
	return setup
}

// Steps turns a case turn's actions into model steps: a reply joins the
// step before unless that one called a tool; a tool call ends its step;
// a slow action streams its text in two chunks Duration apart, so the
// first arrives at once and the turn then keeps running.
func Steps(t *testing.T, c *transporttest.Case, tn transporttest.Turn, tools Tools) []modelmock.Step {
	var steps []modelmock.Step
	var cur modelmock.Step
	open := false
	flush := func() {
		if open {
			steps = append(steps, cur)
		}
		cur, open = modelmock.Step{}, false
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
			call := tools.Write(filepath.Join(c.Workspace, filepath.FromSlash(a.Path)), a.Content)
			cur.Tool, open = &call, true
			flush()
		case transporttest.ActSlow:
			flush()
			cur = modelmock.Step{Text: a.Text + " " + strings.Repeat(".", 8), Chunks: 2, ChunkDelay: modelmock.Duration(a.Duration)}
			open = true
		case transporttest.ActBigOutput:
			path := filepath.Join(c.Workspace, "big.txt")
			line := strings.Repeat("x", 49) + "\n"
			if err := os.WriteFile(path, []byte(strings.Repeat(line, a.Bytes/len(line)+1)), 0o644); err != nil {
				t.Fatal(err)
			}
			call := tools.Read(path)
			cur.Tool, open = &call, true
			flush()
		default:
			t.Fatalf("unknown action %v", a.Kind)
		}
	}
	flush()
	return steps
}

// Call is a tool call with input marshalled from v.
func Call(name string, v map[string]any) modelmock.ToolCall {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return modelmock.ToolCall{Name: name, Input: b}
}
