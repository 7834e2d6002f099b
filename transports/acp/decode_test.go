package acp

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/transporttest"
)

// update rewrites the decoder golden files: go test -run TestDecodeGolden -update.
var update = flag.Bool("update", false, "rewrite the decoder golden files (testdata/decode/*.golden)")

// goldenCap is the output cap of the golden replay: small, so a capture's
// longer tool output shows the cut.
const goldenCap = 200

// replayer is what the client reads of a capture, one line at a time: a
// fresh decoder at every session/prompt (as StartTurn starts one), the
// agent's session/update and session/request_permission through it.
type replayer struct{ d *decoder }

// line decodes one captured line into rendered lines: the events, and
// for a permission request what the gate decides on.
func (r *replayer) line(l transporttest.CaptureLine) ([]string, error) {
	var rec struct {
		Dir string
		Msg struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
	}
	rec.Dir = l.Dir
	if err := json.Unmarshal(l.Msg, &rec.Msg); err != nil {
		return nil, err
	}
	if rec.Dir == ">>" && rec.Msg.Method == "session/prompt" {
		r.d = newDecoder(goldenCap, "")
		return []string{"turn"}, nil
	}
	if rec.Dir != "<<" || rec.Msg.Method == "" {
		return nil, nil
	}
	if r.d == nil {
		r.d = newDecoder(goldenCap, "")
	}
	switch rec.Msg.Method {
	case "session/update":
		var n acpsdk.SessionNotification
		if err := json.Unmarshal(rec.Msg.Params, &n); err != nil {
			return nil, err
		}
		return render(r.d.update(n.Update)), nil
	case "session/request_permission":
		var p acpsdk.RequestPermissionRequest
		if err := json.Unmarshal(rec.Msg.Params, &p); err != nil {
			return nil, err
		}
		st, evs := r.d.permission(p.ToolCall)
		var kinds []string
		for _, o := range p.Options {
			kinds = append(kinds, string(o.Kind))
		}
		paths, _ := json.Marshal(toolPaths(st.locations, st.content, st.rawInput))
		return append(render(evs), fmt.Sprintf("permission tool=%s paths=%s options=%s", st.name(), paths, strings.Join(kinds, ","))), nil
	}
	return []string{"not decoded: " + rec.Msg.Method}, nil
}

// render is events one a line as JSON, long ones cut.
func render(evs []messages.Event) []string {
	var out []string
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		s := string(b)
		if err != nil {
			s = "error " + err.Error()
		}
		if len(s) > 400 {
			s = s[:400] + fmt.Sprintf("...(%d bytes)", len(s))
		}
		out = append(out, s)
	}
	return out
}

// TestDecodeGolden replays the ACP captures in testdata/decode through
// the decoder and compares what it reads with the golden files (-update
// rewrites them).
func TestDecodeGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/decode/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			var out strings.Builder
			r := &replayer{}
			for i, l := range transporttest.ReadCapture(t, in) {
				lines, err := r.line(l)
				require.NoError(t, err, "line %d", i+1)
				for _, s := range lines {
					fmt.Fprintf(&out, "%d: %s\n", i+1, s)
				}
			}
			transporttest.Golden(t, strings.TrimSuffix(in, ".jsonl")+".golden", out.String(), *update)
		})
	}
}

// FuzzDecode feeds one decoder a run of session/update and permission
// request params (one a line, either kind), seeded from the captures, and
// holds what it emits to the events' contract whatever the input: a
// call's EvToolUse comes once and before its one EvToolResult, a use's
// input is JSON, a result's output over the cap is cut and says so, text is never empty.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob("testdata/decode/*.jsonl")
	if err != nil || len(files) == 0 {
		f.Fatalf("no captures (%v)", err)
	}
	for _, in := range files {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		var seed [][]byte
		for l := range bytes.SplitSeq(b, []byte("\n")) {
			var rec struct {
				Msg struct {
					Params json.RawMessage `json:"params"`
				} `json:"msg"`
			}
			if json.Unmarshal(l, &rec) == nil && len(rec.Msg.Params) > 0 {
				seed = append(seed, rec.Msg.Params)
				f.Add([]byte(rec.Msg.Params))
			}
		}
		f.Add(bytes.Join(seed, []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const outCap = 64
		d := newDecoder(outCap, "")
		var evs []messages.Event
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			var n acpsdk.SessionNotification
			if json.Unmarshal(l, &n) == nil {
				evs = append(evs, d.update(n.Update)...)
			}
			var p acpsdk.RequestPermissionRequest
			if json.Unmarshal(l, &p) == nil && p.ToolCall.ToolCallId != "" {
				st, use := d.permission(p.ToolCall)
				evs = append(append(evs, use...), d.notRun(string(p.ToolCall.ToolCallId), st, "denied")...)
			}
		}
		used, done := map[string]bool{}, map[string]bool{}
		for _, ev := range evs {
			switch ev.Type {
			case messages.EvText, messages.EvThinking:
				if ev.Text == "" {
					t.Fatalf("an empty %s", ev.Type)
				}
			case messages.EvToolUse:
				if used[ev.ToolUseID] {
					t.Fatalf("tool %q used twice", ev.ToolUseID)
				}
				used[ev.ToolUseID] = true
				if !json.Valid(ev.Input) {
					t.Fatalf("tool %q's input is not JSON: %q", ev.ToolUseID, ev.Input)
				}
			case messages.EvToolResult:
				if !used[ev.ToolUseID] || done[ev.ToolUseID] {
					t.Fatalf("tool %q's result without its use before, or twice", ev.ToolUseID)
				}
				done[ev.ToolUseID] = true
				// an agent's own cut (agentTruncation) is Truncated at any size
				if (ev.OriginalBytes > outCap && !ev.Truncated) || (!ev.Truncated && len(ev.Output) > outCap) {
					t.Fatalf("tool %q's output (%d bytes) and its cut (%v, %d) disagree", ev.ToolUseID, len(ev.Output), ev.Truncated, ev.OriginalBytes)
				}
			default:
				t.Fatalf("the decoder emitted %s", ev.Type)
			}
		}
	})
}
