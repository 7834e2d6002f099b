package acp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/gate"
	"github.com/codesession/codesession/transports/transporttest"
)

// events is a recording sink.
type events struct {
	mu  sync.Mutex
	evs []messages.Event
	ch  chan messages.Event
}

func (e *events) sink(turn int, ev messages.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
	if e.ch != nil {
		e.ch <- ev
	}
}

func (e *events) all() []messages.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]messages.Event(nil), e.evs...)
}

// replaySession is a session without a process, in turn 1 of the
// captured session sid, its workspace ws: what the client does with a
// capture's messages.
func replaySession(t *testing.T, ws string, sid string, p messages.Posture, rec *events) *session {
	w, err := gate.NewWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	tr := New(Agent{Descriptor: messages.Descriptor{ID: "replay"}})
	return &session{t: tr, sink: rec.sink, ws: w, posture: p, sid: acpsdk.SessionId(sid), turn: 1, running: true,
		asks: transports.NewAsks("replay-"), dec: newDecoder(tr.outputCap, "")}
}

// captured reads the agent's messages of a capture (one JSON object a
// line: {"dir":"<<","msg":{...}}) with the workspace path rewritten.
func captured(t *testing.T, name, capturedWS, ws string) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	for _, l := range transporttest.ReadCapture(t, "testdata/decode/"+name) {
		if l.Dir != "<<" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(l.Msg), capturedWS, ws)), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// replay feeds a capture's updates and permission requests to the client,
// answering each clarification with d.
func replay(t *testing.T, s *session, rec *events, msgs []map[string]json.RawMessage, d messages.Decision) []acpsdk.RequestPermissionResponse {
	c := &client{s: s}
	var answers []acpsdk.RequestPermissionResponse
	for _, m := range msgs {
		var method string
		_ = json.Unmarshal(m["method"], &method)
		switch method {
		case "session/update":
			var n acpsdk.SessionNotification
			if err := json.Unmarshal(m["params"], &n); err != nil {
				t.Fatalf("a captured session/update does not decode: %v", err)
			}
			if err := c.SessionUpdate(context.Background(), n); err != nil {
				t.Fatal(err)
			}
		case "session/request_permission":
			var p acpsdk.RequestPermissionRequest
			if err := json.Unmarshal(m["params"], &p); err != nil {
				t.Fatalf("a captured request_permission does not decode: %v", err)
			}
			done := make(chan acpsdk.RequestPermissionResponse, 1)
			go func() {
				r, _ := c.RequestPermission(context.Background(), p)
				done <- r
			}()
			deadline := time.After(time.Minute)
		wait:
			for {
				select {
				case r := <-done:
					answers = append(answers, r)
					break wait
				case <-deadline:
					t.Fatal("RequestPermission neither asked nor answered")
				case <-time.After(10 * time.Millisecond):
					for _, ev := range rec.all() {
						if ev.Type == messages.EvClarification {
							_ = s.asks.Answer(ev.ClarificationID, d, "not today")
						}
					}
				}
			}
		}
	}
	return answers
}

func TestReplayCaptures(t *testing.T) {
	for _, c := range []struct {
		capture, capturedWS, sid string
		kind                     string // the tool's kind
		path                     string // a path the tool names
		output                   string // in its result
		text                     string // the reply
		wantOption               string // the option allow_once picks
	}{
		{"opencode_acp.jsonl", "/home/dev/work/opencode_ask", "ses_dd67947acffeNFpamVrNVqdV4v", "execute", "oc_acp.txt", "(no output)", "TOOL_DONE: (no output)", "once"},
		{"copilot_acp.jsonl", "/home/dev/work/copilot", "39623084-97b5-4f88-ac81-bbfed80e373d", "execute", "c_acp.txt", "completed with exit code 0", "TOOL_DONE:", "allow_once"},
		{"gemini_acp_nofs.jsonl", "/home/dev/work/gemini", "efc38ecd-ee80-4082-b106-aee56b211a78", "edit", "g_acp.txt", "", "Successfully created", "proceed_once"},
	} {
		t.Run(c.capture, func(t *testing.T) {
			ws := t.TempDir()
			rec := &events{}
			s := replaySession(t, ws, c.sid, messages.PostureDefault, rec)
			answers := replay(t, s, rec, captured(t, c.capture, c.capturedWS, ws), messages.DecisionAllowOnce)
			if len(answers) != 1 || answers[0].Outcome.Selected == nil || string(answers[0].Outcome.Selected.OptionId) != c.wantOption {
				t.Fatalf("answers %+v: want one, option %q", answers, c.wantOption)
			}
			var use, asked, result *messages.Event
			text := ""
			evs := rec.all()
			for i := range evs {
				ev := &evs[i]
				switch ev.Type {
				case messages.EvToolUse:
					if use != nil {
						t.Errorf("a second EvToolUse: %+v", ev)
					}
					use = ev
				case messages.EvClarification:
					asked = ev
					if result != nil || use == nil {
						t.Error("the clarification came after the result, or before the use")
					}
				case messages.EvToolResult:
					result = ev
				case messages.EvText:
					text += ev.Text
				}
			}
			if use == nil || asked == nil || result == nil {
				t.Fatalf("want a use, a clarification and a result; got %+v", evs)
			}
			if use.ToolName != c.kind || asked.ToolName != c.kind {
				t.Errorf("tool named %q / %q: want the kind %q", use.ToolName, asked.ToolName, c.kind)
			}
			if !strings.Contains(string(asked.Input), c.path) {
				t.Errorf("the clarification's input %s does not name %s", asked.Input, c.path)
			}
			if result.ToolUseID != use.ToolUseID || !strings.Contains(result.Output, c.output) {
				t.Errorf("result %+v: want the use's id %s and output with %q", result, use.ToolUseID, c.output)
			}
			if !strings.Contains(text, c.text) {
				t.Errorf("text %q: want %q", text, c.text)
			}
		})
	}
}

// TestReplayPostures: the same captured question is not asked under
// full, and is rejected (with a note for the next prompt) under plan.
func TestReplayPostures(t *testing.T) {
	for _, c := range []struct {
		posture messages.Posture
		want    string
	}{{messages.PostureFull, "proceed_once"}, {messages.PosturePlan, "cancel"}, {messages.PostureAcceptEdits, "proceed_once"}} {
		ws := t.TempDir()
		rec := &events{}
		s := replaySession(t, ws, "efc38ecd-ee80-4082-b106-aee56b211a78", c.posture, rec)
		answers := replay(t, s, rec, captured(t, "gemini_acp_nofs.jsonl", "/home/dev/work/gemini", ws), messages.DecisionDeny)
		if len(answers) != 1 || answers[0].Outcome.Selected == nil || string(answers[0].Outcome.Selected.OptionId) != c.want {
			t.Errorf("%s: answers %+v: want option %q", c.posture, answers, c.want)
		}
		for _, ev := range rec.all() {
			if ev.Type == messages.EvClarification {
				t.Errorf("%s: a clarification was raised: %+v", c.posture, ev)
			}
		}
		if c.posture == messages.PosturePlan && len(s.notes) != 1 {
			t.Errorf("plan: notes %q: want the refusal, for the next prompt", s.notes)
		}
	}
}

// TestReplayGateRefuses: a captured question about a path outside the
// workspace is rejected in every posture without asking.
func TestReplayGateRefuses(t *testing.T) {
	ws := t.TempDir()
	rec := &events{}
	s := replaySession(t, ws, "efc38ecd-ee80-4082-b106-aee56b211a78", messages.PostureFull, rec)
	// the capture's workspace is left as it was: outside ws
	answers := replay(t, s, rec, captured(t, "gemini_acp_nofs.jsonl", "/nothing-to-rewrite", ws), messages.DecisionAllowOnce)
	if len(answers) != 1 || answers[0].Outcome.Selected == nil || string(answers[0].Outcome.Selected.OptionId) != "cancel" {
		t.Fatalf("answers %+v: want the reject option", answers)
	}
	warned := false
	for _, ev := range rec.all() {
		warned = warned || (ev.Type == messages.EvWarning && strings.Contains(ev.Text, gate.ReasonEscapes))
	}
	if !warned {
		t.Errorf("no warning names the gate's reason; events %+v", rec.all())
	}
	// the refused write never ran: its result says so, once
	results := 0
	for _, ev := range rec.all() {
		if ev.Type == messages.EvToolResult {
			results++
			if !ev.IsError || !strings.HasPrefix(ev.Output, "refused: ") {
				t.Errorf("the refused call's result: %+v", ev)
			}
		}
	}
	if results != 1 {
		t.Errorf("%d tool results for the refused call: want 1; events %+v", results, rec.all())
	}
}

// TestDenyReasonNextPrompt: a deny's reason is kept for the next prompt.
func TestDenyReasonNextPrompt(t *testing.T) {
	ws := t.TempDir()
	rec := &events{}
	s := replaySession(t, ws, "ses_dd67947acffeNFpamVrNVqdV4v", messages.PostureDefault, rec)
	answers := replay(t, s, rec, captured(t, "opencode_acp.jsonl", "/home/dev/work/opencode_ask", ws), messages.DecisionDeny)
	if len(answers) != 1 || answers[0].Outcome.Selected == nil || answers[0].Outcome.Selected.OptionId != "reject" {
		t.Fatalf("answers %+v: want opencode's reject", answers)
	}
	if len(s.notes) != 1 || !strings.Contains(s.notes[0], "not today") {
		t.Errorf("notes %q: want the deny's reason", s.notes)
	}
}

// TestAgentTruncation: an agent's own "truncated" raw output makes the
// result Truncated, sized by the files it saved under its HOME, and only
// those (qwen 0.24's shell result; see agentTruncation).
func TestAgentTruncation(t *testing.T) {
	home, other := t.TempDir(), t.TempDir()
	saved := filepath.Join(home, ".qwen", "tmp", "out.output")
	outside := filepath.Join(other, "secret")
	for _, p := range []string{saved, outside} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 100_000), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		raw  any
		cut  bool
		orig int
	}{
		{"no raw output", nil, false, 0},
		{"not cut", map[string]any{"truncated": false, "outputFiles": []any{saved}}, false, 0},
		{"cut, saved in HOME", map[string]any{"truncated": true, "outputFiles": []any{saved}}, true, 100_000},
		{"cut, saved elsewhere", map[string]any{"truncated": true, "outputFiles": []any{outside, "relative"}}, true, 0},
		{"cut, a path escaping HOME", map[string]any{"truncated": true, "outputFiles": []any{home + "/../" + filepath.Base(other) + "/secret"}}, true, 0},
	} {
		cut, orig := agentTruncation(c.raw, home)
		if cut != c.cut || orig != c.orig {
			t.Errorf("%s: (%v, %d): want (%v, %d)", c.name, cut, orig, c.cut, c.orig)
		}
	}
}
