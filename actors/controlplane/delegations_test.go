package controlplane

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/script"
)

func opCall(in map[string]any) *modelmock.ToolCall {
	b, _ := json.Marshal(in)
	return &modelmock.ToolCall{Name: messages.ToolName, Input: b}
}

// driverScript: list-backends, start a script session, read its turn,
// stop it with a verdict, report.
func driverScript() *modelmock.Scenario {
	const sid = `(cs_[0-9a-f]{64})`
	return &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "DRIVE"}, Steps: []modelmock.Step{{Tool: opCall(map[string]any{"op": "list-backends"})}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"ok":true,"alreadyStopped"`}, Steps: []modelmock.Step{{Text: "REPORT: done"}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"kind":"turn_complete","sessionId":"` + sid}, Steps: []modelmock.Step{
			{Tool: opCall(map[string]any{"op": "stop", "sessionId": "{{1}}", "outcome": "success"})}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"sessionId":"` + sid}, Steps: []modelmock.Step{
			{Tool: opCall(map[string]any{"op": "read-turn", "sessionId": "{{1}}"})}}},
		{Match: modelmock.Match{ToolResultRegex: `^\{"backends"`}, Steps: []modelmock.Step{
			{Tool: opCall(map[string]any{"op": "start", "backend": "script", "brief": "say hello"})}}},
	}, ToolResultDefault: &modelmock.Step{Text: "REFUSED: {{result}}"}}
}

func TestDelegationsOverHTTP(t *testing.T) {
	mock, err := modelmock.Start(t, driverScript())
	require.NoError(t, err)
	f := newFixture(t, func(o *DaemonOptions) {
		o.Config.Env = map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test"}
	})
	assert.Equal(t, messages.CodeInvalid, f.call("POST", "/api/delegations", map[string]any{"brief": "x", "cwd": "relative"}).code())
	assert.Equal(t, messages.CodeCeilingExceeded, f.call("POST", "/api/delegations", map[string]any{"brief": "DRIVE", "maxPosture": "full"}).code(),
		"an override cannot widen the persona's ceiling")

	var rec driver.Record
	f.ok("POST", "/api/delegations", map[string]any{"brief": "DRIVE the script", "cwd": f.cwd, "backend": "script"}, &rec)
	require.True(t, driver.ValidID(rec.ID))
	var view DelegationView
	waitFor(t, "the delegation to settle", func() bool {
		f.ok("GET", "/api/delegations/"+rec.ID, nil, &view)
		return view.Delegation.State == driver.StateDone
	})
	require.Len(t, view.Sessions, 1, "the record links to the session it drove")
	sid := view.Sessions[0].SessionID
	assert.Equal(t, messages.StatusEnded, view.Sessions[0].Status)
	assert.Equal(t, messages.OutcomeSuccess, view.Delegation.Verdicts[sid])

	var list DelegationsView
	f.ok("GET", "/api/delegations", nil, &list)
	require.Len(t, list.Delegations, 1)
	assert.Equal(t, []string{sid}, list.Delegations[0].Sessions)
	assert.Equal(t, messages.CodeNotFound, f.call("GET", "/api/delegations/dl_000000000000000000000000", nil).code())

	// the driven session resumes through a fresh driver that adopts it
	var rv ResumeView
	f.ok("POST", "/api/code-sessions/"+sid+"/resume", map[string]any{"brief": "DRIVE it again"}, &rv)
	require.NotNil(t, rv.Delegation)
	assert.Equal(t, sid, rv.SessionID)
	assert.Equal(t, sid, rv.Delegation.ResumeOf)
	waitFor(t, "the resumed delegation to settle", func() bool {
		f.ok("GET", "/api/delegations/"+rv.Delegation.ID, nil, &view)
		return view.Delegation.State == driver.StateDone
	})
	assert.Equal(t, []string{sid}, view.Delegation.Sessions, "same session id")
	require.Len(t, view.Sessions, 1)
	assert.Len(t, view.Sessions[0].Runs, 2, "one new run")
	for i, ev := range f.storeEvents(sid) {
		require.Equal(t, uint64(i+1), ev.Seq, "one gapless log")
	}
	m := f.metrics()
	assert.Contains(t, m, `code_specialist_dispatched_total{backend="script"} 2`)
	assert.Contains(t, m, `code_specialist_settled_total{backend="script",state="done"} 2`)

	// a running delegation is cancelled over HTTP
	var cancelled driver.Record
	r := f.call("POST", "/api/delegations/"+rec.ID+"/cancel", "")
	require.Equal(t, http.StatusOK, r.status)
	require.NoError(t, json.Unmarshal(r.Data, &cancelled))
	assert.Equal(t, driver.StateDone, cancelled.State, "a settled delegation is left as it is")
}

// TestDelegationsHonourScopedTokens: a scoped token starts delegations
// held to its scope (its ceiling clamps an omitted one and refuses an
// explicit one above it; its backends bound the pin) and sees only its
// own scope's delegations and their sessions; another token's are
// not_found to it.
func TestDelegationsHonourScopedTokens(t *testing.T) {
	mock, err := modelmock.Start(t, driverScript())
	require.NoError(t, err)
	dir := t.TempDir()
	tokenFile := func(name, tok string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(tok+"\n"), 0o600))
		return p
	}
	const aTok, bTok = "scope-a-token-0123456789", "scope-b-token-0123456789"
	f := newFixture(t, func(o *DaemonOptions) {
		o.Config.Env = map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test"}
		o.Config.Daemon.Scopes = []config.Scope{
			{Name: "a", TokenFile: tokenFile("a", aTok), MaxPosture: messages.PostureDefault, Backends: []string{script.ID}},
			{Name: "b", TokenFile: tokenFile("b", bTok), MaxPosture: messages.PostureFull},
		}
	})
	a, b := f.as(aTok), f.as(bTok)

	r := a.call("POST", "/api/delegations", map[string]any{"brief": "DRIVE", "cwd": f.cwd, "maxPosture": "acceptEdits"})
	assert.Equal(t, messages.CodeCeilingExceeded, r.code(), "above the token's scope ceiling, though within the persona's")
	r = a.call("POST", "/api/delegations", map[string]any{"brief": "DRIVE", "cwd": f.cwd, "backend": "native"})
	assert.Equal(t, messages.CodeInvalid, r.code(), "a backend outside the token's scope")

	var rec driver.Record
	a.ok("POST", "/api/delegations", map[string]any{"brief": "DRIVE the script", "cwd": f.cwd}, &rec)
	assert.Equal(t, "a", rec.Owner)
	assert.Equal(t, messages.PostureDefault, rec.Constraints.MaxPosture, "the persona's ceiling clamped to the scope's")
	assert.Equal(t, script.ID, rec.Constraints.Backend, "the scope's one backend pins it")
	var view DelegationView
	waitFor(t, "the delegation to settle", func() bool {
		a.ok("GET", "/api/delegations/"+rec.ID, nil, &view)
		return view.Delegation.State == driver.StateDone
	})
	require.Len(t, view.Sessions, 1)
	sid := view.Sessions[0].SessionID
	assert.Equal(t, messages.PostureDefault, view.Sessions[0].MaxPosture)

	ids := func(g *fixture) []string {
		var list DelegationsView
		g.ok("GET", "/api/delegations", nil, &list)
		out := []string{}
		for _, d := range list.Delegations {
			out = append(out, d.ID)
		}
		return out
	}
	assert.Equal(t, []string{rec.ID}, ids(a))
	assert.Empty(t, ids(b), "another scope's token sees none of a's")
	assert.Empty(t, ids(f), "nor the default token: a's delegation is a's (as its sessions are)")
	assert.Equal(t, messages.CodeNotFound, b.call("GET", "/api/delegations/"+rec.ID, nil).code())
	assert.Equal(t, messages.CodeNotFound, b.call("POST", "/api/delegations/"+rec.ID+"/cancel", "").code())
	assert.Equal(t, http.StatusOK, a.call("GET", "/api/code-sessions/"+sid, nil).status, "the driver's session is its dispatcher's to see")
	assert.Equal(t, messages.CodeNotFound, b.call("GET", "/api/code-sessions/"+sid, nil).code())
}

// TestDriversQuestionIsOnTheFeed: a driven session's clarification its
// driver hands to the human (askHuman) is a code_session_question on the
// feed (waiting, with the delegation and the clarification), durable on
// the record before the frame; the human's answer over HTTP lets the
// driver go on, and the feed says the question is answered.
func TestDriversQuestionIsOnTheFeed(t *testing.T) {
	mock, err := modelmock.Start(t, driverScript())
	require.NoError(t, err)
	asking := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{
		script.Tool("Bash", map[string]any{"command": "make test"}, "ok").Asking(), script.Text("tests pass")}}}
	f := newFixture(t, func(o *DaemonOptions) {
		o.Config.Env = map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test"}
		o.Backends = transports.NewRegistry(script.New(script.WithScenario(asking)))
	})
	feed := f.sse("topics="+TopicQuestion, "")
	require.Equal(t, http.StatusOK, feed.status)
	var rec driver.Record
	f.ok("POST", "/api/delegations", map[string]any{"brief": "DRIVE the script", "cwd": f.cwd, "askHuman": true}, &rec)

	question := func(state string) QuestionData {
		evs := feed.until(t, func(e sseEvent) bool {
			return e.event == TopicQuestion && strings.Contains(e.data, `"state":"`+state+`"`)
		})
		var q QuestionData
		require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-1].data), &q))
		return q
	}
	q := question(QuestionWaiting)
	assert.Equal(t, rec.ID, q.DelegationID)
	assert.Equal(t, "Bash", q.ToolName)
	require.NotEmpty(t, q.ClarificationID)
	var view DelegationView
	f.ok("GET", "/api/delegations/"+rec.ID, nil, &view)
	require.NotNil(t, view.Delegation.Question, "the record has the question the frame announced")
	assert.Equal(t, q.ClarificationID, view.Delegation.Question.ClarificationID)
	assert.Equal(t, driver.StateRunning, view.Delegation.State, "the driver waits")

	f.ok("POST", "/api/code-sessions/"+q.SessionID+"/answer", map[string]any{"clarificationId": q.ClarificationID, "decision": "allow_once"}, nil)
	a := question(QuestionAnswered)
	assert.Equal(t, q.ClarificationID, a.ClarificationID)
	waitFor(t, "the delegation to settle", func() bool {
		f.ok("GET", "/api/delegations/"+rec.ID, nil, &view)
		return view.Delegation.State == driver.StateDone
	})
	assert.Equal(t, messages.OutcomeSuccess, view.Delegation.Verdicts[q.SessionID])
}
