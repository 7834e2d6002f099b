package copilot

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/modelmock"
)

// TestLivePosture: plan sends Copilot's plan mode and refuses a write;
// full sends the agent mode and the write runs unasked; default asks, and
// a deny's reason reaches the model with the next prompt.
func TestLivePosture(t *testing.T) {
	acptest.PostureRun(t, backend(t), `"modeId":"`+modeURL+`plan"`, `"modeId":"`+modeURL+`agent"`)
}

// TestLiveEffort: an effort at start reaches the model request as
// Copilot's reasoning effort.
func TestLiveEffort(t *testing.T) {
	body := acptest.EffortRequest(t, backend(t), messages.EffortHigh)
	if !strings.Contains(body, `"reasoning_effort":"high"`) && !strings.Contains(body, `"effort":"high"`) {
		t.Errorf("the model request carries no high reasoning effort: %.600s", body)
	}
}

func TestArgs(t *testing.T) {
	got, err := Args(transports.SessionSpec{Model: "gpt-5", Effort: messages.EffortMax})
	if err != nil || strings.Join(got, " ") != "--acp --model gpt-5 --reasoning-effort max" {
		t.Errorf("Args = %q, %v", got, err)
	}
}

// TestLiveAllowedTools: allowedTools reaches copilot as --available-tools.
// A session allowed only to read is offered no write tool, and its model's
// scripted write creates nothing; a session allowed to write creates the
// file (both in posture full, where nothing asks).
func TestLiveAllowedTools(t *testing.T) {
	for _, c := range []struct {
		name    string
		allowed []string
		written bool
	}{
		{"read only", []string{"Read", "Grep", "Glob"}, false},
		{"write allowed", []string{"Read", "Write"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := backend(t)
			spec := b.Spec
			b.Spec = func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
				s := spec(t, mock)
				s.AllowedTools = c.allowed
				return s
			}
			call := b.Tools.Write("allowed-proof.txt", "written\n")
			sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "write allowed-proof"},
				Steps: []modelmock.Step{{Tool: &call}, {Text: "done"}}}}}
			l := acptest.OpenLive(t, b, sc, "", messages.PostureFull)
			l.Turn(1, "write allowed-proof", nil)
			mains := l.Mock.MainRequests()
			if len(mains) == 0 {
				t.Fatal("the model was never asked")
			}
			offered := offeredTools(t, mains[0].Body)
			if !slices.Contains(offered, "view") || slices.Contains(offered, "create") != c.written || slices.Contains(offered, "bash") {
				t.Errorf("tools offered to the model: %v (allowed %v)", offered, c.allowed)
			}
			results := l.Mock.ToolResults()
			if len(results) == 0 {
				t.Fatalf("the model's scripted write got no result\n%s", l.Rec.Transcript())
			}
			t.Logf("the write's result: %+v", results[0])
			if c.written {
				l.RequireFile("allowed-proof.txt", "written\n")
			} else {
				l.RequireNoFile("allowed-proof.txt")
			}
		})
	}
}

// offeredTools are the tool names of a Chat Completions request body.
func offeredTools(t *testing.T, body []byte) []string {
	var req struct {
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("the model request is not JSON: %v", err)
	}
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	return names
}

func TestAvailableTools(t *testing.T) {
	got, err := Args(transports.SessionSpec{AllowedTools: []string{"Read", "ls", "Write", "Bash", "view", "sql"}})
	want := "--acp --available-tools=view,create,bash,read_bash,stop_bash,list_bash,sql"
	if err != nil || strings.Join(got, " ") != want {
		t.Errorf("Args = %q, %v: want %q", got, err, want)
	}
	for _, refused := range [][]string{{"Read", "Bash(git *)"}, {"mcp__srv__tool"}, {"WebFetch"}, {}} {
		_, err := Args(transports.SessionSpec{AllowedTools: refused})
		var me *messages.Error
		if !errors.As(err, &me) || me.Code != messages.CodeUnsupported || me.Field != "allowedTools" {
			t.Errorf("allowedTools %q: %v: want an unsupported allowedTools error", refused, err)
			continue
		}
		if len(refused) > 0 && !strings.Contains(me.Message, refused[len(refused)-1]) {
			t.Errorf("the refusal of %q does not name the tool: %s", refused, me.Message)
		}
	}
	if !Agent().Descriptor.HonorsAllowed {
		t.Error("the descriptor says copilot does not honour allowedTools")
	}
}
