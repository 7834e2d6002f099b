package native

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
)

// benchScenario is bench's native scenario: thinking, text and an ls call,
// then a closing text.
func benchScenario() *modelmock.Scenario {
	return &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "bench"}, Steps: []modelmock.Step{
		{Thinking: "list the files first", Text: "Looking at the workspace.", Tool: &modelmock.ToolCall{Name: ToolLs, Input: json.RawMessage(`{}`)}},
		{Text: "Done: the workspace is listed."},
	}}}}
}

// BenchmarkTurn runs the bench suite's native turn (two model calls and an
// ls between them) on one session, 20 turns per session.
func BenchmarkTurn(b *testing.B) {
	mock, err := modelmock.Start(nil, benchScenario())
	if err != nil {
		b.Fatal(err)
	}
	defer mock.Close()
	tr := New(WithProcessEnv(nil))
	ends := make(chan messages.Event, 1)
	sink := func(turn int, ev messages.Event) {
		if ev.Type == messages.EvTurnEnd {
			ends <- ev
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; {
		b.StopTimer()
		s, err := tr.Open(ctx, transportsSpec(b, mock.URL(), b.TempDir()), sink)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for t := 1; t <= 20 && i < b.N; t, i = t+1, i+1 {
			if err := s.StartTurn(ctx, t, fmt.Sprintf("bench turn %d", t)); err != nil {
				b.Fatal(err)
			}
			if ev := <-ends; ev.State != messages.TurnCompleted {
				b.Fatalf("turn %d: %+v", t, ev)
			}
		}
		b.StopTimer()
		_ = s.Close(ctx)
		b.StartTimer()
	}
}

func transportsSpec(b *testing.B, url string, dir string) transports.SessionSpec {
	return transports.SessionSpec{Cwd: dir, Model: "claude-mock", Posture: messages.PostureDefault,
		Env: []string{EnvAnthropicBaseURL + "=" + url, EnvAnthropicAPIKey + "=bench-key"}}
}
