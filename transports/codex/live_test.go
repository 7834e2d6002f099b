package codex

import (
	"strings"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
)

func TestLiveText(t *testing.T) {
	m := startMock(t, &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "say hi"}, Steps: []modelmock.Step{{Thinking: "pondering", Text: "hi there"}}},
	}})
	s, rec, _ := openLive(t, m, messages.PostureDefault)
	if s.ThreadID() == "" {
		t.Fatal("no thread id")
	}
	if err := s.StartTurn(ctxT(t), 1, "say hi"); err != nil {
		t.Fatal(err)
	}
	end := rec.turnEnd(t, 1)
	if end.Type != messages.EvTurnEnd || end.State != messages.TurnCompleted {
		t.Fatalf("turn 1 closed with %+v\n%s", end, rec.dump())
	}
	if got := rec.text(1); got != "hi there" {
		t.Errorf("text %q, want %q\n%s", got, "hi there", rec.dump())
	}
	if end.Usage == nil || end.Usage.InputTokens == 0 {
		t.Errorf("turn end has no usage: %+v", end.Usage)
	}
	if end.CostUSD != 0 || end.TotalCostUSD != 0 {
		t.Errorf("codex reports no USD; the turn end invents some: %+v", end)
	}
	thinking := false
	for _, ev := range rec.turnEvents(1) {
		thinking = thinking || (ev.Type == messages.EvThinking && strings.Contains(ev.Text, "pondering"))
	}
	if !thinking {
		t.Errorf("the reasoning summary did not arrive as EvThinking\n%s", rec.dump())
	}
}
