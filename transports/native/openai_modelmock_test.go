package native

// The OpenAI providers against modelmock's Responses and Chat Completions
// wires: the same scenarios as the Anthropic tests, spoken over each
// OpenAI wire through the official SDK. (openai_test.go keeps the
// request-shape checks modelmock does not script: reasoning effort, plan's
// tool list, cached-token usage.)

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

// openaiProviders are the OpenAI providers with the wire and path each
// speaks.
var openaiProviders = []struct{ provider, wire, path string }{
	{ProviderOpenAIResponses, "openai-responses", "/v1/responses"},
	{ProviderOpenAIChat, "openai-chat", "/v1/chat/completions"},
}

// openaiEnv points a session's provider at a mock.
func openaiEnv(provider string, mock *modelmock.Server) []string {
	return []string{EnvProvider + "=" + provider, EnvOpenAIBaseURL + "=" + mock.URL() + "/v1", EnvOpenAIAPIKey + "=sk-test"}
}

// openLiveOpenAIMock starts sc on a mock and opens a session with the
// OpenAI provider in a fresh workspace (default posture unless spec says).
func openLiveOpenAIMock(t *testing.T, provider string, sc *modelmock.Scenario, spec transports.SessionSpec) *live {
	t.Helper()
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	spec.Cwd = t.TempDir()
	if spec.Posture == "" {
		spec.Posture = messages.PostureDefault
	}
	spec.Model = "gpt-mock"
	spec.Env = append(openaiEnv(provider, mock), spec.Env...)
	tr := New(WithProcessEnv(nil), WithRetryPolicy(fastRetry))
	rec := transporttest.NewRecorder()
	s, err := tr.Open(context.Background(), spec, rec.Sink)
	require.NoError(t, err)
	t.Cleanup(func() {
		rec.Closing()
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		assert.NoError(t, s.Close(ctx))
		rec.MarkClosed()
		assert.Empty(t, rec.Check(), "event-stream invariants:\n%s", rec.Transcript())
	})
	return &live{t: t, mock: mock, ws: spec.Cwd, rec: rec, s: s}
}

func TestOpenAIModelmockTextTurn(t *testing.T) {
	t.Parallel()
	for _, p := range openaiProviders {
		t.Run(p.provider, func(t *testing.T) {
			t.Parallel()
			sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "hello"},
				Steps: []modelmock.Step{{Text: "Hello from the mock.", Chunks: 4}}}}}
			l := openLiveOpenAIMock(t, p.provider, sc, transports.SessionSpec{})
			evs := l.turn(1, "hello there", nil)
			end := closed(evs)
			require.Equal(t, messages.TurnCompleted, end.State, l.rec.Transcript())
			assert.Equal(t, "Hello from the mock.", end.Text)
			assert.Equal(t, 1, end.NumTurns)
			require.NotNil(t, end.Usage)
			assert.Equal(t, int64(100), end.Usage.InputTokens)
			assert.Equal(t, int64(20), end.Usage.OutputTokens)
			var deltas []string
			for _, ev := range evs {
				if ev.Type == messages.EvText && ev.Delta {
					deltas = append(deltas, ev.Text)
				}
			}
			assert.Len(t, deltas, 4, "streamed as deltas")
			assert.Equal(t, "Hello from the mock.", strings.Join(deltas, ""))

			reqs := l.mock.MainRequests()
			require.Len(t, reqs, 1)
			assert.Equal(t, p.path, reqs[0].Path)
			assert.Equal(t, p.wire, reqs[0].Wire)
			assert.Equal(t, "gpt-mock", reqs[0].Model)
			conv := reqs[0].Conversation()
			assert.True(t, conv.Stream)
			assert.Contains(t, conv.System, "coding agent")
			assert.ElementsMatch(t, ToolNames(), conv.Tools)
			assert.Equal(t, "hello there", conv.LastUserText())
			assert.Equal(t, "REDACTED", reqs[0].Header.Get("Authorization"))
		})
	}
}

func TestOpenAIModelmockWriteAskedThenAllowed(t *testing.T) {
	t.Parallel()
	for _, p := range openaiProviders {
		t.Run(p.provider, func(t *testing.T) {
			t.Parallel()
			sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Regex: `write (\S+)`}, Steps: []modelmock.Step{
				{Text: "Writing.", Tool: tool(ToolWrite, map[string]any{"path": "out/{{1}}", "content": "hi\n"})},
				{Text: "Wrote {{1}}: {{result}}"},
			}}}}
			l := openLiveOpenAIMock(t, p.provider, sc, transports.SessionSpec{})
			var asked []string
			evs := l.turn(1, "please write a.txt", func(q messages.Event) (messages.Decision, string) {
				asked = append(asked, q.ToolName)
				return messages.DecisionAllowOnce, ""
			})
			assert.Equal(t, []string{ToolWrite}, asked, "default posture asks before a write")
			end := closed(evs)
			require.Equal(t, messages.TurnCompleted, end.State, l.rec.Transcript())
			assert.Equal(t, "Wrote a.txt: created out/a.txt (3 bytes)", end.Text)
			assert.Equal(t, 2, end.NumTurns)
			assert.Equal(t, "created out/a.txt (3 bytes)", results(evs)[ToolWrite].Output)
			assert.True(t, fileExists(filepath.Join(l.ws, "out", "a.txt")))

			trs := l.mock.ToolResults()
			require.Len(t, trs, 1)
			assert.Equal(t, ToolWrite, trs[0].ToolName)
			assert.Equal(t, "created out/a.txt (3 bytes)", trs[0].Content)
			reqs := l.mock.MainRequests()
			require.Len(t, reqs, 2)
			assert.Equal(t, 0, reqs[1].Rule, "the second request continues the rule's turn")
			assert.Equal(t, "please write a.txt", reqs[1].Conversation().LastUserText())
		})
	}
}

func TestOpenAIModelmockDenyReachesTheModel(t *testing.T) {
	t.Parallel()
	for _, p := range openaiProviders {
		t.Run(p.provider, func(t *testing.T) {
			t.Parallel()
			sc := &modelmock.Scenario{Rules: []modelmock.Rule{
				{Match: modelmock.Match{Text: "run it"}, Steps: []modelmock.Step{
					{Tool: tool(ToolBash, map[string]any{"command": "echo ran > ran.txt"})}}},
				{Match: modelmock.Match{ToolResult: "not now"}, Steps: []modelmock.Step{{Text: "Understood, not running it."}}},
			}}
			l := openLiveOpenAIMock(t, p.provider, sc, transports.SessionSpec{})
			evs := l.turn(1, "run it", func(q messages.Event) (messages.Decision, string) {
				assert.Equal(t, ToolBash, q.ToolName)
				return messages.DecisionDeny, "not now"
			})
			end := closed(evs)
			require.Equal(t, messages.TurnCompleted, end.State, l.rec.Transcript())
			assert.Equal(t, "Understood, not running it.", end.Text)
			res := results(evs)[ToolBash]
			assert.True(t, res.IsError)
			assert.Contains(t, res.Output, "denied by the user: not now")
			assert.False(t, fileExists(filepath.Join(l.ws, "ran.txt")))
			trs := l.mock.ToolResults()
			require.Len(t, trs, 1)
			assert.Contains(t, trs[0].Content, "not now", "the deny reason reaches the model")
			assert.Equal(t, ToolBash, trs[0].ToolName)
			assert.Equal(t, 1, l.mock.MainRequests()[1].Rule, "the tool-result rule answered")
		})
	}
}

func TestOpenAIModelmockRetriesA429AndNamesA401(t *testing.T) {
	t.Parallel()
	for _, p := range openaiProviders {
		t.Run(p.provider, func(t *testing.T) {
			t.Parallel()
			sc := &modelmock.Scenario{Rules: []modelmock.Rule{
				{Match: modelmock.Match{Text: "busy"}, Times: 1, Steps: []modelmock.Step{{Error: &modelmock.ErrorStep{Status: 429, RetryAfter: "0.2"}}}},
				{Match: modelmock.Match{Text: "busy"}, Steps: []modelmock.Step{{Text: "Served on the second try."}}},
				{Match: modelmock.Match{Text: "locked"}, Steps: []modelmock.Step{{Error: &modelmock.ErrorStep{Status: 401, Message: "bad key"}}}},
			}}
			l := openLiveOpenAIMock(t, p.provider, sc, transports.SessionSpec{})
			end := closed(l.turn(1, "are you busy", nil))
			require.Equal(t, messages.TurnCompleted, end.State, l.rec.Transcript())
			assert.Equal(t, "Served on the second try.", end.Text)
			reqs := l.mock.MainRequests()
			require.Len(t, reqs, 2)
			assert.Equal(t, 429, reqs[0].Status)
			assert.GreaterOrEqual(t, reqs[1].At.Sub(reqs[0].At), 200*time.Millisecond, "Retry-After is respected")

			end = closed(l.turn(2, "locked out", nil))
			assert.Equal(t, messages.TurnErrored, end.State)
			assert.Contains(t, end.Text, p.provider+" endpoint "+l.mock.URL())
			assert.Contains(t, end.Text, "401")
			assert.Len(t, l.mock.MainRequests(), 3, "a 401 is not retried")
		})
	}
}

// TestConformanceOpenAIResponses and TestConformanceOpenAIChat run the
// transporttest suite (as TestConformance does for anthropic) with each
// OpenAI provider against modelmock.
func TestConformanceOpenAIResponses(t *testing.T) { conformanceOpenAI(t, ProviderOpenAIResponses) }

func TestConformanceOpenAIChat(t *testing.T) { conformanceOpenAI(t, ProviderOpenAIChat) }

func conformanceOpenAI(t *testing.T, provider string) {
	runConformance(t, "TestOpenAIModelmockRetriesA429AndNamesA401", func(mock *modelmock.Server) transports.SessionSpec {
		return transports.SessionSpec{Model: "gpt-mock", Env: openaiEnv(provider, mock)}
	})
}
