package droid

import (
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
)

// The live tests run the real droid CLI (the pinned version) against
// modelmock on 127.0.0.1, each with its own workspace and HOME.

// TestLivePostureAsDroidReportedIt sets every posture and reads back the
// autonomy level droid itself reports (settings_updated) after each.
func TestLivePostureAsDroidReportedIt(t *testing.T) {
	t.Parallel()
	l := newLive(t, nil, liveOpts{posture: messages.PosturePlan, effort: messages.EffortHigh})
	s := l.sess.(*session)
	// a Chat Completions model has no reasoning efforts: droid reports
	// "none" and the session says so
	w := l.rec.wait(t, time.Minute, func(te turnEvent) bool {
		return te.ev.Type == messages.EvWarning && strings.Contains(te.ev.Text, "reasoning effort")
	})
	assert.Contains(t, w.ev.Text, `"none"`)
	reported := func() string {
		s.Lock()
		defer s.Unlock()
		return s.Core.settings.AutonomyLevel
	}
	assert.Equal(t, "off", reported(), "plan at open")
	for _, p := range []messages.Posture{messages.PostureAcceptEdits, messages.PostureFull, messages.PostureDefault, messages.PosturePlan} {
		require.NoError(t, s.SetPosture(ctxFor(t, time.Minute), p))
		assert.Equal(t, AutonomyLevel(p), reported(), "posture %s", p)
	}
	for _, te := range l.rec.all() {
		assert.NotContains(t, te.ev.Text, "reports autonomy level", "no mismatch warning")
	}
}

// TestLiveEffortReachesTheModel opens a session per effort on droid's
// OpenAI Responses provider and checks the reasoning effort in the request
// the model received. (A generic Chat Completions model reports effort
// "none"; the session then warns, checked below.)
func TestLiveEffortReachesTheModel(t *testing.T) {
	t.Parallel()
	bin := droidBinary(t)
	// low and medium pass through like high (seen when this was written);
	// two sessions keep the package's run time down
	for _, eff := range []messages.Effort{messages.EffortHigh, messages.EffortMax} {
		t.Run(string(eff), func(t *testing.T) {
			t.Parallel()
			mock, err := modelmock.Start(t, nil)
			require.NoError(t, err)
			home := t.TempDir()
			settings := `{"customModels":[{"model":"gpt-5.5","displayName":"Loopback Mock (responses)","baseUrl":"` + mock.URL() +
				`/v1","apiKey":"sk-mock","provider":"openai","maxOutputTokens":8192}]}`
			require.NoError(t, os.MkdirAll(filepath.Join(home, ".factory"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(home, ".factory", "settings.json"), []byte(settings), 0o600))
			rec := newRecorder()
			tr := New(WithBinary(bin))
			sess, err := tr.Open(ctxFor(t, 2*time.Minute), transports.SessionSpec{Cwd: t.TempDir(), Home: home,
				Model: "custom:Loopback-Mock-(responses)-0", Effort: eff}, rec.sink)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, sess.Close(ctxFor(t, time.Minute))) })
			require.NoError(t, sess.StartTurn(ctxFor(t, time.Minute), 1, "effort check"))
			end := rec.turnEnd(t, 1)
			require.Equal(t, messages.TurnCompleted, end.State, dump(rec.all()))
			var got []string
			for _, r := range mock.MainRequests() {
				var body struct {
					Reasoning struct {
						Effort string `json:"effort"`
					} `json:"reasoning"`
				}
				if json.Unmarshal(r.Body, &body) == nil && strings.Contains(string(r.Body), "effort check") {
					got = append(got, body.Reasoning.Effort)
				}
			}
			require.NotEmpty(t, got, "no request carried the prompt")
			s := sess.(*session)
			s.Lock()
			applied := s.Core.settings.ReasoningEffort
			s.Unlock()
			t.Logf("effort %s: droid applied %q, the model received %v", eff, applied, got)
			if applied == ReasoningEffort(eff) {
				assert.Equal(t, ReasoningEffort(eff), got[0])
			} else {
				// droid changed it: the session must have said so
				warned := false
				for _, te := range rec.all() {
					warned = warned || (te.ev.Type == messages.EvWarning && strings.Contains(te.ev.Text, "reasoning effort"))
				}
				assert.True(t, warned, "droid applied %q for %q without a warning", applied, eff)
			}
		})
	}
}

// TestLiveAcceptEditsAndTheGate runs one acceptEdits session: a command
// is asked about even when the model declares it low-risk (droid would run
// it by that declaration at autonomy low, which codesession never uses
// below full), denied, not run, and the reason reaches the model; a Create
// inside the workspace runs without a clarification (codesession approves
// it after the gate); a Create outside is refused by the gate without a
// clarification and the model is told why, where droid at autonomy low
// would have written it.
func TestLiveAcceptEditsAndTheGate(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "outside.txt")
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{
		Match: modelmock.Match{Regex: `RUN (\S+) RISK=(\w+)`},
		Steps: []modelmock.Step{{Tool: &modelmock.ToolCall{Name: "Execute",
			Input: json.RawMessage(`{"command":"touch {{1}}","riskLevel":"{{2}}","riskLevelReason":"the mock says so"}`)}}},
	}, {
		Match: modelmock.Match{Regex: `CREATE (\S+)`},
		Steps: []modelmock.Step{{Tool: &modelmock.ToolCall{Name: "Create",
			Input: json.RawMessage(`{"file_path":"{{1}}","content":"x"}`)}}},
	}}}
	l := newLive(t, sc, liveOpts{posture: messages.PostureAcceptEdits})

	low := filepath.Join(l.spec.Cwd, "low.txt")
	require.NoError(t, l.sess.StartTurn(ctxFor(t, time.Minute), 1, "RUN "+low+" RISK=low"))
	cl := l.rec.wait(t, 2*time.Minute, func(te turnEvent) bool { return te.turn == 1 && te.ev.Type == messages.EvClarification })
	assert.Equal(t, "Execute", cl.ev.ToolName)
	assert.Contains(t, string(cl.ev.Input), `"riskLevel":"low"`)
	require.NoError(t, l.sess.Answer(ctxFor(t, time.Minute), cl.ev.ClarificationID, messages.DecisionDeny, "commands need a human"))
	end := l.rec.turnEnd(t, 1)
	require.Equal(t, messages.TurnCompleted, end.State, dump(l.rec.all()))
	assert.NoFileExists(t, low)
	assert.True(t, l.mock.Saw("commands need a human"), "the deny reason reached the model")

	inside := filepath.Join(l.spec.Cwd, "inside.txt")
	require.NoError(t, l.sess.StartTurn(ctxFor(t, time.Minute), 2, "CREATE "+inside))
	end = l.rec.turnEnd(t, 2)
	require.Equal(t, messages.TurnCompleted, end.State, dump(l.rec.all()))
	assert.FileExists(t, inside)
	assert.Empty(t, l.rec.ofType(2, messages.EvClarification))

	require.NoError(t, l.sess.StartTurn(ctxFor(t, time.Minute), 3, "CREATE "+outside))
	end = l.rec.turnEnd(t, 3)
	require.Equal(t, messages.TurnCompleted, end.State, dump(l.rec.all()))
	assert.NoFileExists(t, outside)
	assert.Empty(t, l.rec.ofType(3, messages.EvClarification))
	assert.True(t, l.mock.Saw("codesession refused your Create call"), "the refusal reached the model")
	assert.True(t, l.mock.Saw("resolves outside the workspace"))
}

func TestLiveAllowedToolsRejected(t *testing.T) {
	_, err := New(WithBinary(droidBinary(t))).Open(ctxFor(t, time.Minute),
		transports.SessionSpec{Cwd: t.TempDir(), AllowedTools: []string{"Read"}}, func(int, messages.Event) {})
	assert.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
}
