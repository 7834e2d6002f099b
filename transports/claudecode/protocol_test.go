package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/transporttest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden transcripts in testdata/claude")

// hostDriven are the host-driven captures.
var hostDriven = []string{"claude_full.jsonl", "claude_deny_interrupt.jsonl", "claude_maxturns.jsonl",
	"claude_resume.jsonl", "claude_pm_dontAsk.jsonl", "claude_pm_bypassPermissions.jsonl"}

// rawStdout are captures of the CLI's stdout, byte for byte.
var rawStdout = []string{"claude_oneshot_partial.jsonl", "sdk_wire_stdout.jsonl"}

// stdoutLines returns every line the CLI wrote in a capture.
func stdoutLines(t testing.TB, name string) [][]byte {
	t.Helper()
	for _, raw := range rawStdout {
		if raw == name {
			data, err := os.ReadFile(filepath.Join("testdata", "claude", name))
			require.NoError(t, err)
			return bytes.Split(bytes.TrimSpace(data), []byte("\n"))
		}
	}
	var out [][]byte
	for _, cl := range transporttest.ReadCapture(t, "testdata/claude/"+name) {
		if cl.Dir == "<<" {
			out = append(out, cl.Msg)
		}
	}
	return out
}

func TestParseEveryCapturedLine(t *testing.T) {
	types := map[string]int{}
	for _, name := range append(append([]string{}, hostDriven...), rawStdout...) {
		for i, b := range stdoutLines(t, name) {
			l, err := ParseLine(b)
			require.NoError(t, err, "%s line %d: %s", name, i+1, excerpt(b))
			_, unknown := l.(Unknown)
			assert.False(t, unknown, "%s line %d has an unknown type: %s", name, i+1, excerpt(b))
			types[l.lineType()]++
		}
	}
	for _, want := range []string{"system/init", "assistant", "user", "result", "control_request", "control_response",
		"system/status", "system/session_state_changed", "stream_event"} {
		assert.Positive(t, types[want], "the captures hold a %s line", want)
	}
}

func TestParseShapes(t *testing.T) {
	lines := stdoutLines(t, "claude_full.jsonl")
	var (
		inits    []SystemInit
		results  []Result
		asks     []ControlRequest
		errResps []ControlResponse
		users    []User
	)
	for _, b := range lines {
		l, err := ParseLine(b)
		require.NoError(t, err)
		switch l := l.(type) {
		case SystemInit:
			inits = append(inits, l)
		case Result:
			results = append(results, l)
		case ControlRequest:
			asks = append(asks, l)
		case ControlResponse:
			if !l.OK {
				errResps = append(errResps, l)
			}
		case User:
			users = append(users, l)
		}
	}
	require.NotEmpty(t, inits)
	assert.Equal(t, "e6674a66-e7af-4bc5-a46b-fb893e186319", inits[0].SessionID)
	assert.Equal(t, "claude-mock-1", inits[0].Model)
	assert.Equal(t, "default", inits[0].PermissionMode)
	assert.Equal(t, PinnedVersion, inits[0].Version)
	assert.Contains(t, inits[0].Tools, "AskUserQuestion", "present with a permission-prompt host")

	require.Len(t, results, 6)
	assert.Equal(t, Result{Subtype: "success", NumTurns: 1, TotalCostUSD: 0.0008, HasTotal: true, SinceLastCost: 0.0008,
		HasSinceLast: true, Result: "PONG(model=claude-mock-1): say pong", TerminalReason: "completed", StopReason: "end_turn",
		SessionID: "e6674a66-e7af-4bc5-a46b-fb893e186319", DurationMS: 108,
		Usage: messages.Usage{InputTokens: 100, OutputTokens: 20}}, results[0])
	interrupted := results[4]
	assert.Equal(t, "error_during_execution", interrupted.Subtype)
	assert.True(t, interrupted.IsError)
	assert.Equal(t, "aborted_streaming", interrupted.TerminalReason)
	assert.Empty(t, interrupted.StopReason, "stop_reason null")

	require.Len(t, asks, 2)
	assert.Equal(t, "can_use_tool", asks[0].Subtype)
	assert.Equal(t, "Write", asks[0].ToolName)
	assert.Equal(t, "toolu_msg_mock_7", asks[0].ToolUseID)
	assert.JSONEq(t, `{"file_path":"/home/dev/work/claude/allowed.txt","content":"written-by-mock\n"}`, string(asks[0].Input))
	assert.Empty(t, sessionRules(asks[0].Suggestions), "setMode is not a session rule")
	bash := asks[1]
	assert.Equal(t, "/home/dev/work/claude/denied.txt", bash.BlockedPath)
	rules := sessionRules(bash.Suggestions)
	require.Len(t, rules, 1, "only the addRules suggestion, not addDirectories")
	assert.JSONEq(t, `{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"echo hello-from-bash *"}],"behavior":"allow","destination":"session"}`, string(rules[0]))

	require.Len(t, errResps, 1)
	assert.Equal(t, "unsupported_request", errResps[0].ErrorCode)
	assert.Equal(t, messages.CodeUnsupported, controlErrorCode(errResps[0].ErrorCode))

	var replays int
	for _, u := range users {
		if u.IsReplay {
			replays++
		}
	}
	assert.Equal(t, 1, replays, "the set_model echo")
}

func TestParseLineErrors(t *testing.T) {
	for _, bad := range []string{"", "   ", "not json", "[1,2]", `{"type":`, `{"no":"type"}`, `"string"`,
		`{"type":"result","num_turns":"three"}`, `{"type":"assistant","message":{"content":42}}`,
		`{"type":"control_request","request":{"subtype":"can_use_tool"}}`} {
		l, err := ParseLine([]byte(bad))
		assert.Error(t, err, "%q", bad)
		assert.Nil(t, l)
	}
	_, err := ParseLine([]byte("garbage"))
	assert.True(t, errors.Is(err, ErrNotJSON))
	l, err := ParseLine([]byte(`{"type":"brand_new_thing","x":1}`))
	require.NoError(t, err)
	assert.Equal(t, Unknown{Type: "brand_new_thing"}, l)
	l, err = ParseLine([]byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]}]}}`))
	require.NoError(t, err)
	assert.Equal(t, "a\n[image]\nb", l.(User).Content[0].Text, "tool result blocks flatten to text")
}

func TestStdinLinesMatchTheSDK(t *testing.T) {
	// what the Agent SDK wrote, field for field
	sdk := map[string]json.RawMessage{}
	for _, l := range bytes.Split(bytes.TrimSpace(mustRead(t, "sdk_wire_stdin.jsonl")), []byte("\n")) {
		var head struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal(l, &head))
		if _, ok := sdk[head.Type]; !ok {
			sdk[head.Type] = l
		}
	}
	assert.JSONEq(t, string(sdk["user"]), strings.Replace(string(userLine("TOOL:WRITE /home/dev/work/claude/sdk_written.txt hello-from-sdk")), "\n", "", 1))
	allow := allowLine("cb6348c6-abbb-4c53-b83b-892e359c0892", json.RawMessage(`{"file_path":"/home/dev/work/claude/sdk_written.txt","content":"hello-from-sdk\n"}`), "toolu_msg_mock_49", nil)
	assert.JSONEq(t, string(sdk["control_response"]), string(allow))
	assert.JSONEq(t, `{"type":"control_response","response":{"subtype":"success","request_id":"r","response":{"behavior":"deny","message":"no way","interrupt":true}}}`,
		string(denyLine("r", "no way", "", true)))
	assert.JSONEq(t, `{"type":"control_request","request_id":"req_1","request":{"subtype":"interrupt","cancel_queued":true}}`,
		string(controlRequestLine("req_1", map[string]any{"subtype": "interrupt", "cancel_queued": true})))
	assert.True(t, bytes.HasSuffix(userLine("x"), []byte("}\n")), "one line each")
}

func mustRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "claude", name))
	require.NoError(t, err)
	return b
}

// TestReplayCaptures feeds each host-driven capture through the core, as
// the shell would (the host's user messages as turns, its answers as
// Answer, its interrupt as an interrupt), and holds the events and stdin
// writes to a golden transcript.
func TestReplayCaptures(t *testing.T) {
	for _, name := range hostDriven {
		t.Run(name, func(t *testing.T) {
			got := replay(t, name)
			golden := filepath.Join("testdata", "claude", strings.TrimSuffix(name, ".jsonl")+".events")
			if *rewrite {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run with -rewrite to create it")
			assert.Equal(t, string(want), got)
		})
	}
}

func replay(t *testing.T, name string) string {
	c := newCore(coreConfig{outputCap: 200, lineCap: DefaultLineCap})
	var b strings.Builder
	out := func(e effects) {
		for _, w := range e.Writes {
			fmt.Fprintf(&b, "  write %s", w)
		}
		for _, te := range e.Events {
			fmt.Fprintf(&b, "  turn %d %s\n", te.Turn, render(te.Ev))
		}
		if e.Settle {
			b.WriteString("  (settle timer)\n")
		}
	}
	turn := 0
	for _, cl := range transporttest.ReadCapture(t, "testdata/claude/"+name) {
		switch cl.Dir {
		case ">>":
			var m struct {
				Type    string `json:"type"`
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
				Request struct {
					Subtype string `json:"subtype"`
				} `json:"request"`
				Response struct {
					RequestID string `json:"request_id"`
					Response  struct {
						Behavior  string `json:"behavior"`
						Message   string `json:"message"`
						Interrupt bool   `json:"interrupt"`
					} `json:"response"`
				} `json:"response"`
			}
			require.NoError(t, json.Unmarshal(cl.Msg, &m))
			switch {
			case m.Type == "user":
				turn++
				fmt.Fprintf(&b, "> turn %d: %q\n", turn, m.Message.Content)
				e, err := c.startTurn(turn, m.Message.Content)
				require.NoError(t, err)
				out(e)
			case m.Type == "control_request" && m.Request.Subtype == "interrupt":
				fmt.Fprintf(&b, "> interrupt: %v\n", c.Interrupt())
			case m.Type == "control_response":
				d, reason := messages.DecisionAllowOnce, ""
				switch {
				case m.Response.Response.Behavior == "deny" && m.Response.Response.Interrupt:
					d, reason = messages.DecisionCancel, m.Response.Response.Message
				case m.Response.Response.Behavior == "deny":
					d, reason = messages.DecisionDeny, m.Response.Response.Message
				}
				fmt.Fprintf(&b, "> answer %s %s %q\n", m.Response.RequestID, d, reason)
				e, err := c.Answer(m.Response.RequestID, d, reason)
				require.NoError(t, err)
				out(e)
			}
		case "<<":
			l, err := ParseLine(cl.Msg)
			require.NoError(t, err)
			if _, ok := l.(ControlResponse); ok {
				continue // the shell's, not the core's
			}
			out(c.Line(l))
		case "exit":
			var m struct {
				Code int `json:"returncode"`
			}
			require.NoError(t, json.Unmarshal(cl.Msg, &m))
			fmt.Fprintf(&b, "< exit %d\n", m.Code)
			out(c.Exited(cli.ExitOwn, fmt.Sprintf("exit status %d", m.Code), ""))
		}
	}
	return b.String()
}

// render writes an event's set fields in a fixed order.
func render(ev messages.Event) string {
	raw, _ := json.Marshal(ev)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	delete(m, "type")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(string(ev.Type))
	for _, k := range keys {
		v, _ := json.Marshal(m[k])
		s := string(v)
		if len(s) > 160 {
			s = s[:160] + "..."
		}
		fmt.Fprintf(&b, " %s=%s", k, s)
	}
	return b.String()
}

// TestParseStreamEvents: the partial-messages capture's text deltas add up
// to the assistant message that follows them; other stream events and a
// subagent's deltas carry nothing.
func TestParseStreamEvents(t *testing.T) {
	var deltas strings.Builder
	var whole string
	for _, b := range stdoutLines(t, "claude_oneshot_partial.jsonl") {
		l, err := ParseLine(b)
		require.NoError(t, err)
		switch l := l.(type) {
		case StreamEvent:
			if l.Kind == "text" {
				deltas.WriteString(l.Text)
			}
		case Assistant:
			for _, c := range l.Content {
				if c.Type == "text" {
					whole += c.Text
				}
			}
		}
	}
	require.NotEmpty(t, whole)
	assert.Equal(t, whole, deltas.String())
	for line, want := range map[string]StreamEvent{
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}},"parent_tool_use_id":null}`: {Kind: "thinking", Text: "hm"},
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"sub"}},"parent_tool_use_id":"toolu_1"}`:   {},
		`{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{"}}}`:                      {},
		`{"type":"stream_event","event":{"type":"message_stop"}}`:                                                                                              {},
	} {
		l, err := ParseLine([]byte(line))
		require.NoError(t, err)
		assert.Equal(t, want, l, line)
	}
	_, err := ParseLine([]byte(`{"type":"stream_event","event":"nope"}`))
	assert.Error(t, err, "a malformed stream event is a parse error, not a silent nothing")
}
