package native

import (
	"context"
	"encoding/json"
	"os"
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

const testWait = 30 * time.Second

// fastRetry keeps retry tests short.
var fastRetry = RetryPolicy{MaxRetries: 3, Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, MaxRetryAfter: 5 * time.Second}

// live is one native session against a modelmock server.
type live struct {
	t    *testing.T
	mock *modelmock.Server
	ws   string
	rec  *transporttest.Recorder
	s    transports.Session
}

func tool(name string, input any) *modelmock.ToolCall {
	b, _ := json.Marshal(input)
	return &modelmock.ToolCall{Name: name, Input: b}
}

// openLive starts sc on a mock and opens a session in a fresh workspace.
func openLive(t *testing.T, sc *modelmock.Scenario, spec transports.SessionSpec, opts ...Option) *live {
	t.Helper()
	mock, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	if spec.Cwd == "" {
		spec.Cwd = t.TempDir()
	}
	if spec.Posture == "" {
		spec.Posture = messages.PostureDefault
	}
	if spec.Model == "" {
		spec.Model = "claude-mock"
	}
	spec.Env = append([]string{EnvAnthropicBaseURL + "=" + mock.URL(), EnvAnthropicAPIKey + "=test-key"}, spec.Env...)
	tr := New(append([]Option{WithProcessEnv(nil), WithRetryPolicy(fastRetry)}, opts...)...)
	rec := transporttest.NewRecorder()
	s, err := tr.Open(context.Background(), spec, rec.Sink)
	require.NoError(t, err)
	l := &live{t: t, mock: mock, ws: spec.Cwd, rec: rec, s: s}
	t.Cleanup(func() {
		rec.Closing()
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		assert.NoError(t, s.Close(ctx))
		rec.MarkClosed()
		assert.Empty(t, rec.Check(), "event-stream invariants:\n%s", rec.Transcript())
	})
	return l
}

// turn runs turn n with input, answering clarifications with answer (nil
// fails on one), and returns the turn's events once it closed.
func (l *live) turn(n int, input string, answer func(ev messages.Event) (messages.Decision, string)) []messages.Event {
	l.t.Helper()
	l.rec.TurnStarting(n)
	require.NoError(l.t, l.s.StartTurn(context.Background(), n, input))
	handled := 0
	for {
		var evs []messages.Event
		_, ok := l.rec.Wait(testWait, func(recs []transporttest.Record) bool {
			evs = inTurn(recs, n)
			return closed(evs) != nil || len(asked(evs)) > handled
		})
		require.True(l.t, ok, "turn %d did not close\n%s", n, l.rec.Transcript())
		if qs := asked(evs); len(qs) > handled {
			q := qs[handled]
			handled++
			require.NotNil(l.t, answer, "unexpected clarification %s", transporttest.Brief(q))
			d, reason := answer(q)
			require.NoError(l.t, l.s.Answer(context.Background(), q.ClarificationID, d, reason))
			continue
		}
		return evs
	}
}

func asked(evs []messages.Event) []messages.Event {
	var out []messages.Event
	for _, ev := range evs {
		if ev.Type == messages.EvClarification {
			out = append(out, ev)
		}
	}
	return out
}

func closed(evs []messages.Event) *messages.Event {
	for i := range evs {
		if transporttest.Closes(evs[i]) {
			return &evs[i]
		}
	}
	return nil
}

func results(evs []messages.Event) map[string]messages.Event {
	uses := map[string]string{}
	out := map[string]messages.Event{}
	for _, ev := range evs {
		switch ev.Type {
		case messages.EvToolUse:
			uses[ev.ToolUseID] = ev.ToolName
		case messages.EvToolResult:
			out[uses[ev.ToolUseID]] = ev
		}
	}
	return out
}

func TestTurnReadsAndEditsAFile(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "fix the greeting"}, Steps: []modelmock.Step{
		{Text: "Let me look.", Tool: tool("read", map[string]any{"path": "hello.go"})},
		{Tool: tool("edit", map[string]any{"path": "hello.go", "old_string": `"helo"`, "new_string": `"hello"`})},
		{Text: "Fixed the typo in hello.go."},
	}}}}
	l := openLive(t, sc, transports.SessionSpec{Posture: messages.PostureAcceptEdits},
		WithPrices(map[string]Price{"claude-mock": {Input: 3, Output: 15}}))
	require.NoError(t, os.WriteFile(filepath.Join(l.ws, "hello.go"), []byte("package main\n\nvar greeting = \"helo\"\n"), 0o644))

	evs := l.turn(1, "please fix the greeting", nil)
	end := closed(evs)
	require.Equal(t, messages.EvTurnEnd, end.Type, l.rec.Transcript())
	assert.Equal(t, messages.TurnCompleted, end.State)
	assert.Equal(t, "Fixed the typo in hello.go.", end.Text)
	assert.Equal(t, 3, end.NumTurns, "three model rounds")
	require.NotNil(t, end.Usage)
	assert.Equal(t, int64(300), end.Usage.InputTokens)
	assert.Equal(t, int64(60), end.Usage.OutputTokens)
	assert.InDelta(t, 3*(100*3+20*15)/1e6, end.CostUSD, 1e-12)
	assert.InDelta(t, end.CostUSD, end.TotalCostUSD, 1e-12)

	b, err := os.ReadFile(filepath.Join(l.ws, "hello.go"))
	require.NoError(t, err)
	assert.Equal(t, "package main\n\nvar greeting = \"hello\"\n", string(b))
	res := results(evs)
	assert.Contains(t, res["read"].Output, `var greeting = "helo"`)
	assert.Equal(t, "edited hello.go: replaced 1 occurrence (36 -> 37 bytes)", res["edit"].Output)
	assert.Empty(t, asked(evs), "acceptEdits runs reads and edits without asking")

	// The model saw the tool results, and streamed text arrived as deltas.
	trs := l.mock.ToolResults()
	require.Len(t, trs, 2)
	assert.Contains(t, trs[0].Content, "helo")
	var deltas string
	for _, ev := range evs {
		if ev.Type == messages.EvText && ev.Delta {
			deltas += ev.Text
		}
	}
	assert.Equal(t, "Let me look.Fixed the typo in hello.go.", deltas)
}

// TestPostures runs the same turn (write a file, run a command, answer) in
// every posture.
func TestPostures(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "write and run"}, Steps: []modelmock.Step{
		{Tool: tool("write", map[string]any{"path": "out/new.txt", "content": "new\n"})},
		{Tool: tool("bash", map[string]any{"command": "echo ran > ran.txt"})},
		{Text: "All done."},
	}}}}
	cases := []struct {
		posture  messages.Posture
		allowed  []string
		answers  []messages.Decision // in the order asked
		wrote    bool
		ran      bool
		offered  []string
		writeOut string
		bashOut  string
	}{
		{posture: messages.PosturePlan, offered: []string{"read", "glob", "grep", "ls"},
			writeOut: "refused: the session is in plan posture", bashOut: "refused: the session is in plan posture"},
		{posture: messages.PostureDefault, answers: []messages.Decision{messages.DecisionAllowOnce, messages.DecisionDeny},
			wrote: true, offered: ToolNames(), writeOut: "created out/new.txt", bashOut: "denied by the user: not now"},
		{posture: messages.PostureAcceptEdits, answers: []messages.Decision{messages.DecisionAllowOnce},
			wrote: true, ran: true, offered: ToolNames(), writeOut: "created out/new.txt", bashOut: "[exit code 0]"},
		{posture: messages.PostureFull, wrote: true, ran: true, offered: ToolNames(),
			writeOut: "created out/new.txt", bashOut: "[exit code 0]"},
		{posture: messages.PostureFull, allowed: []string{"read", "write"}, wrote: true, offered: []string{"read", "write"},
			writeOut: "created out/new.txt", bashOut: `refused: tool "bash" is not in this session's allowed tools`},
	}
	for _, c := range cases {
		name := string(c.posture)
		if c.allowed != nil {
			name += "+allowedTools"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l := openLive(t, sc, transports.SessionSpec{Posture: c.posture, AllowedTools: c.allowed})
			var got []string
			evs := l.turn(1, "please write and run", func(q messages.Event) (messages.Decision, string) {
				got = append(got, q.ToolName)
				require.Less(t, len(got)-1, len(c.answers), "asked more than expected: %v", got)
				return c.answers[len(got)-1], "not now"
			})
			assert.Len(t, got, len(c.answers), "clarifications asked: %v", got)
			end := closed(evs)
			assert.Equal(t, messages.TurnCompleted, end.State, l.rec.Transcript())
			res := results(evs)
			assert.Contains(t, res["write"].Output, c.writeOut)
			assert.Contains(t, res["bash"].Output, c.bashOut)
			assert.Equal(t, !c.wrote, res["write"].IsError)
			assert.Equal(t, c.wrote, fileExists(filepath.Join(l.ws, "out", "new.txt")))
			assert.Equal(t, c.ran, fileExists(filepath.Join(l.ws, "ran.txt")))
			reqs := l.mock.MainRequests()
			require.NotEmpty(t, reqs)
			var offered []string
			offered = append(offered, reqs[0].Conversation().Tools...)
			assert.ElementsMatch(t, c.offered, offered, "tools offered to the model")
			if c.posture == messages.PostureDefault {
				assert.Contains(t, l.mock.ToolResults()[1].Content, "not now", "the deny reason reaches the model")
			}
		})
	}
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestAllowSessionIsRemembered(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "two commands"}, Steps: []modelmock.Step{
		{Tool: tool("bash", map[string]any{"command": "true"})},
		{Tool: tool("bash", map[string]any{"command": "true"})},
		{Text: "ok"},
	}}}}
	l := openLive(t, sc, transports.SessionSpec{})
	n := 0
	l.turn(1, "run two commands", func(messages.Event) (messages.Decision, string) {
		n++
		return messages.DecisionAllowSession, ""
	})
	assert.Equal(t, 1, n, "allow_session answers the second call of the same tool")
}

func TestRoundCapStopsALoopingModel(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "loop forever"}, Steps: []modelmock.Step{{Tool: tool("ls", map[string]any{})}}},
		{Match: modelmock.Match{ToolResultRegex: "."}, Steps: []modelmock.Step{{Tool: tool("ls", map[string]any{})}}},
	}, ToolResultDefault: &modelmock.Step{Tool: tool("ls", map[string]any{})}}
	l := openLive(t, sc, transports.SessionSpec{}, WithMaxRounds(4))
	evs := l.turn(1, "loop forever", nil)
	end := closed(evs)
	assert.Equal(t, messages.TurnCompleted, end.State, "the cap is a clean stop")
	assert.Equal(t, 4, end.NumTurns)
	assert.Contains(t, end.Text, "per-turn round cap")
	assert.Len(t, l.mock.MainRequests(), 4)
	var warned bool
	for _, ev := range evs {
		warned = warned || ev.Type == messages.EvWarning && strings.Contains(ev.Text, "round cap")
	}
	assert.True(t, warned, "the cap that fired is reported")

	// The next turn still works: the unanswered tool results are merged
	// with the new prompt, and the model sees the whole conversation.
	evs = l.turn(2, "now say hi", nil)
	assert.Equal(t, messages.TurnCompleted, closed(evs).State)
	reqs := l.mock.MainRequests()
	last := reqs[len(reqs)-1].Conversation()
	assert.Equal(t, "now say hi", last.LastUserText())
	assert.Contains(t, last.Messages[0].Parts[0].Text, "loop forever", "previous turns are part of the conversation")
}

func TestRetriesA429(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "busy"}, Times: 1, Steps: []modelmock.Step{{Error: &modelmock.ErrorStep{Status: 429, RetryAfter: "0.2"}}}},
		{Match: modelmock.Match{Text: "busy"}, Steps: []modelmock.Step{{Text: "Served on the second try."}}},
	}}
	l := openLive(t, sc, transports.SessionSpec{})
	start := time.Now()
	evs := l.turn(1, "are you busy", nil)
	end := closed(evs)
	assert.Equal(t, messages.TurnCompleted, end.State, l.rec.Transcript())
	assert.Equal(t, "Served on the second try.", end.Text)
	reqs := l.mock.MainRequests()
	require.Len(t, reqs, 2)
	assert.Equal(t, 429, reqs[0].Status)
	assert.GreaterOrEqual(t, reqs[1].At.Sub(reqs[0].At), 200*time.Millisecond, "Retry-After is respected")
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	var warned bool
	for _, ev := range evs {
		warned = warned || ev.Type == messages.EvWarning && strings.Contains(ev.Text, "429")
	}
	assert.True(t, warned, "the retry is reported")
}

func TestUnauthorizedIsAClearError(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "hello"}, Steps: []modelmock.Step{{Error: &modelmock.ErrorStep{Status: 401, Message: "invalid x-api-key"}}}},
	}}
	l := openLive(t, sc, transports.SessionSpec{})
	evs := l.turn(1, "hello", nil)
	end := closed(evs)
	assert.Equal(t, messages.TurnErrored, end.State)
	for _, want := range []string{l.mock.URL(), "401", "invalid x-api-key", "API key"} {
		assert.Contains(t, end.Text, want)
	}
	assert.Len(t, l.mock.MainRequests(), 1, "a 401 is not retried")
}

func TestInterruptCancelsTheStream(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "slow"}, Steps: []modelmock.Step{{Text: "Starting a long answer... and the rest", Chunks: 2, ChunkDelay: modelmock.Duration(10 * time.Minute)}}},
	}}
	l := openLive(t, sc, transports.SessionSpec{})
	l.rec.TurnStarting(1)
	require.NoError(t, l.s.StartTurn(context.Background(), 1, "answer slow"))
	_, ok := l.rec.Wait(testWait, func(recs []transporttest.Record) bool {
		for _, ev := range inTurn(recs, 1) {
			if ev.Type == messages.EvText {
				return true
			}
		}
		return false
	})
	require.True(t, ok, l.rec.Transcript())
	// the turn closes within testWait only if the interrupt cut the
	// 10-minute stream short
	require.NoError(t, l.s.(transports.Interrupter).Interrupt(context.Background()))
	_, ok = l.rec.Wait(testWait, func(recs []transporttest.Record) bool { return closed(inTurn(recs, 1)) != nil })
	require.True(t, ok)
	assert.Equal(t, messages.TurnInterrupted, closed(l.rec.Turn(1)).State)

	evs := l.turn(2, "say hi", nil)
	assert.Equal(t, messages.TurnCompleted, closed(evs).State)
}

// TestCommandsReturnWhileTheModelStalls: the session says its commands
// return at once (transports.Prompt: the runtime then calls them on its
// host's goroutine), and they do while a model call stalls mid-stream.
func TestCommandsReturnWhileTheModelStalls(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "slow"}, Steps: []modelmock.Step{{Text: "Starting a long answer... and the rest", Chunks: 2, ChunkDelay: modelmock.Duration(10 * time.Minute)}}},
	}}
	l := openLive(t, sc, transports.SessionSpec{})
	p, ok := l.s.(transports.Prompt)
	require.True(t, ok)
	require.True(t, p.Prompt())
	l.rec.TurnStarting(1)
	require.NoError(t, l.s.StartTurn(context.Background(), 1, "answer slow"))
	_, ok = l.rec.Wait(testWait, func(recs []transporttest.Record) bool {
		for _, ev := range inTurn(recs, 1) {
			if ev.Type == messages.EvText {
				return true
			}
		}
		return false
	})
	require.True(t, ok, l.rec.Transcript())
	returned := make(chan error, 3)
	go func() {
		ctx := context.Background()
		returned <- l.s.StartTurn(ctx, 2, "again")
		returned <- l.s.(transports.PostureSetter).SetPosture(ctx, messages.PosturePlan)
		returned <- l.s.Answer(ctx, "never-raised", messages.DecisionAllowOnce, "")
	}()
	for _, code := range []messages.Code{messages.CodeConflict, "", messages.CodeNotFound} {
		select {
		case err := <-returned:
			if code == "" {
				assert.NoError(t, err)
			} else {
				assert.Equal(t, code, messages.AsError("", err).Code, "%v", err)
			}
		case <-time.After(testWait): // only stops a hang
			t.Fatal("a command waited on the stalled model call")
		}
	}
	require.NoError(t, l.s.(transports.Interrupter).Interrupt(context.Background()))
	_, ok = l.rec.Wait(testWait, func(recs []transporttest.Record) bool { return closed(inTurn(recs, 1)) != nil })
	require.True(t, ok)
}

func TestInterruptKillsARunningCommand(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "sleep"}, Steps: []modelmock.Step{{Tool: tool("bash", map[string]any{"command": "sleep 3600"})}}},
	}}
	l := openLive(t, sc, transports.SessionSpec{Posture: messages.PostureFull})
	l.rec.TurnStarting(1)
	require.NoError(t, l.s.StartTurn(context.Background(), 1, "sleep a while"))
	_, ok := l.rec.Wait(testWait, func(recs []transporttest.Record) bool {
		for _, ev := range inTurn(recs, 1) {
			if ev.Type == messages.EvToolUse {
				return true
			}
		}
		return false
	})
	require.True(t, ok)
	time.Sleep(100 * time.Millisecond)
	// the turn closes within testWait only if the interrupt killed the
	// hour-long command
	require.NoError(t, l.s.(transports.Interrupter).Interrupt(context.Background()))
	_, ok = l.rec.Wait(testWait, func(recs []transporttest.Record) bool { return closed(inTurn(recs, 1)) != nil })
	require.True(t, ok)
	evs := l.rec.Turn(1)
	assert.Equal(t, messages.TurnInterrupted, closed(evs).State)
	assert.Contains(t, results(evs)["bash"].Output, "killed: the turn was interrupted")
}

func TestInterruptWhileAsking(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "ask"}, Steps: []modelmock.Step{{Tool: tool("bash", map[string]any{"command": "true"})}}},
	}}
	l := openLive(t, sc, transports.SessionSpec{})
	l.rec.TurnStarting(1)
	require.NoError(t, l.s.StartTurn(context.Background(), 1, "ask me"))
	var id string
	_, ok := l.rec.Wait(testWait, func(recs []transporttest.Record) bool {
		if qs := asked(inTurn(recs, 1)); len(qs) > 0 {
			id = qs[0].ClarificationID
			return true
		}
		return false
	})
	require.True(t, ok)
	require.NoError(t, l.s.(transports.Interrupter).Interrupt(context.Background()))
	_, ok = l.rec.Wait(testWait, func(recs []transporttest.Record) bool { return closed(inTurn(recs, 1)) != nil })
	require.True(t, ok)
	assert.Equal(t, messages.TurnInterrupted, closed(l.rec.Turn(1)).State)
	err := l.s.Answer(context.Background(), id, messages.DecisionAllowOnce, "")
	var me *messages.Error
	require.ErrorAs(t, err, &me)
	assert.Equal(t, messages.CodeConflict, me.Code)
}

func TestSetPostureAppliesLive(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "write"}, Steps: []modelmock.Step{{Tool: tool("write", map[string]any{"path": "a.txt", "content": "a"})}, {Text: "ok"}}},
	}}
	l := openLive(t, sc, transports.SessionSpec{Posture: messages.PosturePlan})
	require.NoError(t, l.s.(transports.PostureSetter).SetPosture(context.Background(), messages.PostureAcceptEdits))
	evs := l.turn(1, "write a", nil)
	assert.False(t, results(evs)["write"].IsError)
	assert.FileExists(t, filepath.Join(l.ws, "a.txt"))
}

func TestCloseMidTurn(t *testing.T) {
	t.Parallel()
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "slow"}, Steps: []modelmock.Step{{Text: "a b", Chunks: 2, ChunkDelay: modelmock.Duration(10 * time.Minute)}}},
	}}
	l := openLive(t, sc, transports.SessionSpec{})
	l.rec.TurnStarting(1)
	require.NoError(t, l.s.StartTurn(context.Background(), 1, "slow please"))
	_, ok := l.rec.Wait(testWait, func(recs []transporttest.Record) bool { return len(inTurn(recs, 1)) > 0 })
	require.True(t, ok)
	l.rec.Closing()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	require.NoError(t, l.s.Close(ctx))
	err := l.s.StartTurn(context.Background(), 2, "again")
	var me *messages.Error
	require.ErrorAs(t, err, &me)
	assert.Equal(t, messages.CodeNotLive, me.Code)
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	tr := New(WithProcessEnv(nil))
	sink := func(int, messages.Event) {}
	cases := []struct {
		name  string
		spec  transports.SessionSpec
		field string
		code  messages.Code
	}{
		{"no key", transports.SessionSpec{Cwd: t.TempDir()}, "env.OPENAI_API_KEY", messages.CodeInvalid},
		{"anthropic without key", transports.SessionSpec{Cwd: t.TempDir(), Env: []string{"CODESESSION_NATIVE_PROVIDER=anthropic"}}, "env.ANTHROPIC_API_KEY", messages.CodeInvalid},
		{"unknown provider", transports.SessionSpec{Cwd: t.TempDir(), Env: []string{"CODESESSION_NATIVE_PROVIDER=gemini"}}, "env.CODESESSION_NATIVE_PROVIDER", messages.CodeInvalid},
		{"missing cwd", transports.SessionSpec{Cwd: "/nonexistent-codesession", Env: []string{"ANTHROPIC_API_KEY=k"}}, "cwd", messages.CodeInvalid},
		{"unknown tool", transports.SessionSpec{Cwd: t.TempDir(), AllowedTools: []string{"Write"}, Env: []string{"ANTHROPIC_API_KEY=k"}}, "allowedTools", messages.CodeInvalid},
		{"resume", transports.SessionSpec{Cwd: t.TempDir(), ResumeExternalID: "native-x", Env: []string{"ANTHROPIC_API_KEY=k"}}, "", messages.CodeUnsupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tr.Open(context.Background(), c.spec, sink)
			var me *messages.Error
			require.ErrorAs(t, err, &me)
			assert.Equal(t, c.code, me.Code)
			assert.Equal(t, c.field, me.Field)
		})
	}
}

// inTurn is the events of turn n among recs; Recorder.Wait's predicates
// use it (they must not call the recorder).
func inTurn(recs []transporttest.Record, n int) []messages.Event {
	var out []messages.Event
	for _, r := range recs {
		if r.Turn == n {
			out = append(out, r.Event)
		}
	}
	return out
}

// TestAnthropicRequestShape checks what the loop sends: the system prompt,
// effort as output_config.effort (max passes: the API has it), the tools
// with their input schemas, the model, and the key in x-api-key.
func TestAnthropicRequestShape(t *testing.T) {
	t.Parallel()
	l := openLive(t, &modelmock.Scenario{}, transports.SessionSpec{Effort: messages.EffortMax, AppendSystemPrompt: "Be brief."})
	l.turn(1, "hello", nil)
	reqs := l.mock.MainRequests()
	require.Len(t, reqs, 1)
	var body struct {
		Model        string `json:"model"`
		MaxTokens    int    `json:"max_tokens"`
		Stream       bool   `json:"stream"`
		OutputConfig struct {
			Effort string `json:"effort"`
		} `json:"output_config"`
		System []struct {
			Text string `json:"text"`
		} `json:"system"`
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(reqs[0].Body, &body))
	assert.Equal(t, "claude-mock", body.Model)
	assert.Equal(t, DefaultMaxTokens, body.MaxTokens)
	assert.True(t, body.Stream)
	assert.Equal(t, "max", body.OutputConfig.Effort)
	require.Len(t, body.System, 1)
	assert.Contains(t, body.System[0].Text, l.ws)
	assert.Contains(t, body.System[0].Text, "Be brief.")
	require.Len(t, body.Tools, len(ToolNames()))
	assert.Equal(t, "object", body.Tools[0].InputSchema["type"])
	assert.Contains(t, body.Tools[0].InputSchema["properties"], "path")
	assert.Equal(t, []any{"path"}, body.Tools[0].InputSchema["required"])
	assert.Equal(t, []string{"REDACTED"}, reqs[0].Header["Authorization"], "the key goes the way the SDK sends it (v2.15: a bearer token)")
}
