// Package acptest is what the ACP backends' tests share: the Backend of
// an agent (Of finds its pinned CLI), its conformance run (a
// transporttest.CLI scripting modelmock in the agent's own tool
// vocabulary) and the live rigs of its pool, postures, attach and
// containment. It is imported by tests only.
package acptest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
	"github.com/codesession/codesession/transports/transporttest"
)

// Caps of the conformance sessions: the output cap below what the agents
// pass through of a read of transporttest.BigOutputBytes, the line cap
// below the long-line fault's line.
const (
	OutputCap = 16 << 10
	LineCap   = 768 << 10
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

// Of is a's Backend: b with the pinned CLI found (subprocesstest.Find:
// a's EnvBinary, else its command on PATH; a skip, or a failure under
// CI, without it) and the transport built on a.
func Of(t testing.TB, a acp.Agent, b Backend) Backend {
	b.Bin = subprocesstest.Find(t, a.EnvBinary, a.Install, a.Command)
	b.New = func(opts ...acp.Option) transports.Transport { return acp.New(a, opts...) }
	return b
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

// denyReason is why no ACP backend acts out the clarify-deny case.
const denyReason = "ACP carries no reason with a rejection, so the reason reaches the agent with the next prompt, not in this turn; TestDenyReasonNextTurn checks the deny"

// Conformance runs the transport conformance suite against b.
func Conformance(t *testing.T, b Backend) { transporttest.Run(t, Harness(b)) }

// Harness is the transporttest harness of b: the agent's tools act out
// the actions; a slow action streams its text in two chunks Duration
// apart, so the first arrives at once and the turn then keeps running.
func Harness(b Backend) transporttest.Harness {
	skip := map[string]string{transporttest.CaseClarifyDeny: denyReason}
	maps.Copy(skip, b.Skip)
	return transporttest.CLI{
		Name: "fake-agent",
		Bin:  b.Bin,
		New: func(bin string, outputCap int) transports.Transport {
			return b.New(Options(acp.WithOutputCap(outputCap), acp.WithBinary(bin))...)
		},
		Spec: b.Spec,
		Acts: transporttest.Acts{
			Write: func(s *transporttest.Steps, path string, a transporttest.Action) {
				s.Call(b.Tools.Write(path, a.Content))
			},
			Read: func(s *transporttest.Steps, path string) { s.Call(b.Tools.Read(path)) },
			Slow: func(s *transporttest.Steps, _ *transporttest.Case, a transporttest.Action) {
				s.Open(modelmock.Step{Text: a.Text + " " + strings.Repeat(".", 8), Chunks: 2, ChunkDelay: modelmock.Duration(a.Duration)})
			},
		},
		OutputCap: b.outputCap(),
		// An agent CLI starts in seconds on an idle machine and in minutes
		// on a loaded one; the bound only stops hangs.
		Timeout: 2*time.Minute + 15*time.Second,
		Skip:    skip,
	}.Harness()
}

// Call is a tool call with input marshalled from v.
func Call(name string, v map[string]any) modelmock.ToolCall { return transporttest.Call(name, v) }

// EffortRejected checks that tr (an agent without an effort setting)
// refuses an effort loudly, with an unsupported *messages.Error, before
// any process starts.
func EffortRejected(t *testing.T, tr transports.Transport) {
	_, err := tr.Open(context.Background(), transports.SessionSpec{Cwd: t.TempDir(), Effort: messages.EffortHigh}, func(int, messages.Event) {})
	var me *messages.Error
	if !errors.As(err, &me) || me.Code != messages.CodeUnsupported {
		t.Fatalf("Open with effort: %v: want an unsupported *messages.Error", err)
	}
}

// EffortRequest opens a live session of b started with effort e (none:
// "") in the default posture, runs one turn, and returns the body of the
// model request it made: where an agent with an effort setting says it.
func EffortRequest(t *testing.T, b Backend, e messages.Effort) string {
	t.Helper()
	spec := b.Spec
	b.Spec = func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
		s := spec(t, mock)
		s.Effort = e
		return s
	}
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "effort probe"}, Steps: []modelmock.Step{{Text: "ok"}}}}}
	l := OpenLive(t, b, sc, "", messages.PostureDefault)
	l.Turn(1, "effort probe", nil)
	mains := l.Mock.MainRequests()
	if len(mains) == 0 {
		t.Fatal("the model was never asked")
	}
	return string(mains[len(mains)-1].Body)
}

// GeminiTools are the tools of gemini and of qwen (its fork): a shell's
// cat shows a file whole, where read_file reports "Read lines 1-2000 of
// ..." over ACP, not the content.
var GeminiTools = Tools{
	Write: func(path, content string) modelmock.ToolCall {
		return Call("write_file", map[string]any{"file_path": path, "content": content})
	},
	Read: func(path string) modelmock.ToolCall {
		return Call("run_shell_command", map[string]any{"command": "cat " + path, "description": "print the big file"})
	},
}

// OpencodeTools are the tools of opencode and of kilo (its fork).
var OpencodeTools = Tools{
	Write: func(path, content string) modelmock.ToolCall {
		return Call("write", map[string]any{"filePath": path, "content": content})
	},
	Read: func(path string) modelmock.ToolCall { return Call("read", map[string]any{"filePath": path}) },
}

// OpencodeSpec points opencode or kilo at the mock through a provider
// (mock/mock-model, mock/mock-model-2) in the JSON configuration the
// variable envConfig holds.
func OpencodeSpec(envConfig string) func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
	return func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
		provider := `{"provider":{"mock":{"npm":"@ai-sdk/openai-compatible","name":"Loopback Mock",` +
			`"options":{"baseURL":"` + mock.URL() + `/v1","apiKey":"sk-mock"},` +
			`"models":{"mock-model":{"name":"Mock Model","tool_call":true,"limit":{"context":128000,"output":8192}},` +
			`"mock-model-2":{"name":"Mock Model 2","tool_call":true,"limit":{"context":128000,"output":8192}}}}}}`
		return transports.SessionSpec{Home: SharedHome, Model: "mock/mock-model", Env: []string{envConfig + "=" + provider}}
	}
}
