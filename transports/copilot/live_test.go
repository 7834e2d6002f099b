package copilot

import (
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
	b := backend(t)
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "effort probe"}, Steps: []modelmock.Step{{Text: "ok"}}}}}
	spec := b.Spec
	b.Spec = func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
		s := spec(t, mock)
		s.Effort = messages.EffortHigh
		return s
	}
	l := acptest.OpenLive(t, b, sc, "", messages.PostureDefault)
	l.Turn(1, "effort probe", nil)
	mains := l.Mock.MainRequests()
	if len(mains) == 0 {
		t.Fatal("the model was never asked")
	}
	body := string(mains[len(mains)-1].Body)
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
