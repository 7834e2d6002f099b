package acp

import (
	"os"
	"path/filepath"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/gate"
)

func TestDecide(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "gone"), filepath.Join(ws, "dangling")); err != nil {
		t.Fatal(err)
	}
	w, err := gate.NewWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(ws, "a.txt")
	out := filepath.Join(root, "outside.txt")
	for _, c := range []struct {
		posture messages.Posture
		kind    string
		paths   []string
		want    verdict
	}{
		{messages.PostureDefault, "edit", []string{in}, verdictAsk},
		{messages.PostureDefault, "edit", []string{"a.txt"}, verdictAsk},
		{messages.PostureDefault, "execute", []string{ws}, verdictAsk},
		{messages.PostureDefault, "read", []string{in}, verdictAllow},
		{messages.PostureDefault, "read", []string{out}, verdictReject},
		{messages.PostureDefault, "edit", []string{in, out}, verdictReject},
		{messages.PostureFull, "edit", []string{"../outside.txt"}, verdictReject},
		{messages.PostureFull, "edit", []string{filepath.Join(ws, "dangling", "x")}, verdictReject},
		{messages.PostureAcceptEdits, "edit", []string{in}, verdictAllow},
		{messages.PostureAcceptEdits, "delete", []string{in}, verdictAllow},
		{messages.PostureAcceptEdits, "execute", nil, verdictAsk},
		{messages.PostureFull, "execute", nil, verdictAllow},
		{messages.PosturePlan, "edit", []string{in}, verdictReject},
		{messages.PosturePlan, "execute", nil, verdictReject},
		{messages.PosturePlan, "search", []string{ws}, verdictAllow},
	} {
		got, why := decide(w, c.posture, c.kind, c.paths)
		if got != c.want {
			t.Errorf("decide(%s, %s, %v) = %v (%s): want %v", c.posture, c.kind, c.paths, got, why, c.want)
		}
		if got != verdictAsk && why == "" {
			t.Errorf("decide(%s, %s, %v) = %v without a reason", c.posture, c.kind, c.paths, got)
		}
	}
}

func TestOutcomeByKind(t *testing.T) {
	// the three agents' option ids
	agents := map[string][]acpsdk.PermissionOption{
		"opencode": {{OptionId: "once", Kind: "allow_once"}, {OptionId: "always", Kind: "allow_always"}, {OptionId: "reject", Kind: "reject_once"}},
		"gemini":   {{OptionId: "proceed_always", Kind: "allow_always"}, {OptionId: "proceed_once", Kind: "allow_once"}, {OptionId: "cancel", Kind: "reject_once"}},
		"copilot":  {{OptionId: "allow_once", Kind: "allow_once"}, {OptionId: "reject_once", Kind: "reject_once"}},
	}
	want := map[string]map[messages.Decision]string{
		"opencode": {messages.DecisionAllowOnce: "once", messages.DecisionAllowSession: "always", messages.DecisionDeny: "reject"},
		"gemini":   {messages.DecisionAllowOnce: "proceed_once", messages.DecisionAllowSession: "proceed_always", messages.DecisionDeny: "cancel"},
		"copilot":  {messages.DecisionAllowOnce: "allow_once", messages.DecisionAllowSession: "allow_once", messages.DecisionDeny: "reject_once"},
	}
	for agent, opts := range agents {
		for d, id := range want[agent] {
			o := outcomeFor(opts, d)
			if o.Selected == nil || string(o.Selected.OptionId) != id {
				t.Errorf("%s %s: got %+v, want option %q", agent, d, o, id)
			}
		}
		if o := outcomeFor(opts, messages.DecisionCancel); o.Cancelled == nil {
			t.Errorf("%s cancel: got %+v, want the cancelled outcome", agent, o)
		}
	}
	if o := outcomeFor(nil, messages.DecisionAllowOnce); o.Cancelled == nil {
		t.Errorf("no options: got %+v, want cancelled", o)
	}
}

func TestToolPaths(t *testing.T) {
	raw := map[string]any{"filePath": "/w/a.go", "command": "rm -rf /", "nested": map[string]any{"path": "b.txt"},
		"list": []any{map[string]any{"file_path": "/w/c"}}}
	got := toolPaths([]acpsdk.ToolCallLocation{{Path: "/w"}}, []acpsdk.ToolCallContent{{Diff: &acpsdk.ToolCallContentDiff{Path: "/w/d"}}}, raw)
	want := []string{"/w", "/w/a.go", "/w/c", "/w/d", "b.txt"}
	if len(got) != len(want) {
		t.Fatalf("toolPaths = %v: want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("toolPaths = %v: want %v", got, want)
		}
	}
}
