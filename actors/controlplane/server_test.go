package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/opencode"
	"github.com/codesession/codesession/transports/script"
)

// liteTransport is the scripted backend under another id with no live
// controls and an external-attach template, for the 422 and attach paths.
type liteTransport struct{ *script.Transport }

const liteID = "script-lite"

func (l liteTransport) Descriptor() transports.Descriptor {
	d := l.Transport.Descriptor()
	d.ID, d.DisplayName = liteID, "script-lite (scripted, no live controls)"
	d.Live = messages.LiveControls{}
	d.ExternalAttach = &messages.ExternalAttach{CommandTemplate: `lite resume {sessionId} --dir "{cwd}"`, Note: "scripted"}
	return d
}

func withLite(o *DaemonOptions) {
	sc := testScenario()
	o.Backends = transports.NewRegistry(script.New(script.WithScenario(sc)), liteTransport{script.New(script.WithScenario(sc))})
}

func TestRoutesDriveASessionEndToEnd(t *testing.T) {
	f := newFixture(t)
	hz := f.call("GET", "/healthz", nil, "Authorization", "")
	assert.Equal(t, http.StatusOK, hz.status)

	var lb messages.ListBackendsResult
	f.ok("GET", "/api/backends", nil, &lb)
	require.Len(t, lb.Backends, 1)
	assert.Equal(t, script.ID, lb.Backends[0].Descriptor.ID)
	assert.True(t, lb.Backends[0].Availability.Available)

	st := f.start("ASK before you vet")
	sid := st.SessionID
	assert.True(t, messages.ValidSessionID(sid))
	r := f.read(sid)
	require.Equal(t, messages.KindClarification, r.Kind)
	var ans messages.AnswerResult
	f.ok("POST", "/api/code-sessions/"+sid+"/answer", map[string]any{"clarificationId": r.ClarificationID, "decision": "allow_once"}, &ans)
	assert.True(t, ans.OK)
	r = f.read(sid)
	require.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, "vetted", r.Text)

	var okRes messages.OKResult
	f.ok("POST", "/api/code-sessions/"+sid+"/guidance", map[string]any{"text": "now the docs"}, &okRes)
	assert.True(t, okRes.OK)
	r = f.read(sid)
	require.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, 2, r.Turn)
	assert.Contains(t, r.Text, "now the docs")
	assert.Contains(t, r.RoundHistory, messages.HistoryEntry{Turn: 2, Kind: messages.HistGuidance, Text: "user: now the docs", Pinned: true},
		"guidance through the control plane is the user's, pinned")

	var pr messages.SetPostureResult
	f.ok("POST", "/api/code-sessions/"+sid+"/posture", map[string]any{"posture": "plan"}, &pr)
	assert.Equal(t, messages.PosturePlan, pr.Posture)
	f.ok("POST", "/api/code-sessions/"+sid+"/interrupt", "", &okRes)
	assert.True(t, okRes.OK)

	var view sessionView
	f.ok("GET", "/api/code-sessions/"+sid+"?afterSeq=2&limit=3", nil, &view)
	assert.Equal(t, sid, view.Record.SessionID)
	require.Len(t, view.Events, 3)
	assert.Equal(t, uint64(3), view.Events[0].Seq)
	assert.Greater(t, view.LastSeq, uint64(5))
	assert.Nil(t, view.ExternalAttach, "the script backend has no attach template")

	var stop messages.StopResult
	f.ok("POST", "/api/code-sessions/"+sid+"/stop", map[string]any{"outcome": "success", "note": "looks right"}, &stop)
	assert.False(t, stop.AlreadyStopped)
	assert.Equal(t, messages.OutcomeSuccess, stop.Outcome)
	f.ok("POST", "/api/code-sessions/"+sid+"/stop", "", &stop)
	assert.True(t, stop.AlreadyStopped, "stop is idempotent")

	var list sessionsView
	f.ok("GET", "/api/code-sessions", nil, &list)
	require.Len(t, list.Sessions, 1)
	assert.Equal(t, messages.StatusEnded, list.Sessions[0].Status)
	assert.Equal(t, "looks right", list.Sessions[0].OutcomeNote)

	var res messages.StartResult
	f.ok("POST", "/api/code-sessions/"+sid+"/resume", map[string]any{"brief": "carry on"}, &res)
	assert.Equal(t, sid, res.SessionID)
	r = f.read(sid)
	require.Equal(t, messages.KindTurnComplete, r.Kind)
	assert.Equal(t, 3, r.Turn, "rounds continue")
	assert.Contains(t, r.Text, "carry on")
	f.ok("POST", "/api/code-sessions/"+sid+"/stop", "", &stop)

	rec, err := f.d.Runtime().Store().GetMeta(context.Background(), sid)
	require.NoError(t, err)
	assert.Len(t, rec.Runs, 2)
	for i, ev := range f.storeEvents(sid) {
		require.Equal(t, uint64(i+1), ev.Seq, "one gapless log")
	}

	// metrics: the runtime's families and the live feed's; the frozen
	// code_specialist_* ones count delegations, and there was none
	waitFor(t, "both runs settled in the metrics", func() bool {
		return strings.Contains(f.metrics(), `code_session_settled_total{backend="script",outcome=`)
	})
	m := f.metrics()
	assert.NotContains(t, m, `code_specialist_settled_total{`, "no delegation ran: the frozen families have no series")
	for _, want := range []string{
		`code_session_ops_total{op="start",outcome="ok"} 1`,
		`code_session_ops_total{op="resume",outcome="ok"} 1`,
		`code_session_sse_subscribers 0`,
		`code_session_backend_available{backend="script"} 1`,
		`code_session_http_requests_total{code="200",route="POST /api/code-sessions"} 1`,
		`code_session_live 0`,
	} {
		assert.Contains(t, m, want)
	}
}

func (f *fixture) metrics() string {
	f.t.Helper()
	req, err := http.NewRequest("GET", f.srv.URL+"/metrics", nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	require.Equal(f.t, http.StatusOK, res.StatusCode)
	b, err := io.ReadAll(res.Body)
	require.NoError(f.t, err)
	return string(b)
}

func TestEveryErrorCodeHasItsStatus(t *testing.T) {
	faulty := store.NewFaulty(store.NewMemory())
	f := newFixture(t, withLite, func(o *DaemonOptions) { o.Store = faulty })
	ctx := context.Background()
	live := f.start("SLOW work")
	unknown := messages.NewSessionID()

	var capped messages.StartResult
	f.ok("POST", "/api/code-sessions", map[string]any{"brief": "x", "cwd": f.cwd, "maxPosture": "default"}, &capped)
	var lite messages.StartResult
	f.ok("POST", "/api/code-sessions", map[string]any{"brief": "x", "cwd": f.cwd, "backend": liteID}, &lite)
	ended := f.start("short")
	f.read(ended.SessionID)
	f.ok("POST", "/api/code-sessions/"+ended.SessionID+"/stop", "", nil)
	// a session another scope (another process, say) drives
	foreign, err := f.d.Runtime().Start(ctx, "elsewhere", messages.Start{Brief: "SLOW", Cwd: f.cwd})
	require.NoError(t, err)

	cases := []struct {
		name         string
		method, path string
		body         any
		status       int
		code         messages.Code
	}{
		{"empty brief", "POST", "/api/code-sessions", `{"brief":""}`, 400, messages.CodeInvalid},
		{"a start cannot set env", "POST", "/api/code-sessions", `{"brief":"x","env":{"PATH":"/evil"}}`, 400, messages.CodeInvalid},
		{"unknown field", "POST", "/api/code-sessions", `{"brief":"x","sessionId":"` + unknown + `"}`, 400, messages.CodeInvalid},
		{"malformed JSON", "POST", "/api/code-sessions", `{"brief":`, 400, messages.CodeInvalid},
		{"wrong type", "POST", "/api/code-sessions", `{"brief":7}`, 400, messages.CodeInvalid},
		{"trailing data", "POST", "/api/code-sessions", `{"brief":"x"} {}`, 400, messages.CodeInvalid},
		{"relative cwd", "POST", "/api/code-sessions", `{"brief":"x","cwd":"repo"}`, 400, messages.CodeInvalid},
		{"unknown backend", "POST", "/api/code-sessions", `{"brief":"x","backend":"nope"}`, 400, messages.CodeInvalid},
		{"bad posture", "POST", "/api/code-sessions/" + live.SessionID + "/posture", `{"posture":"root"}`, 400, messages.CodeInvalid},
		{"bad decision", "POST", "/api/code-sessions/" + live.SessionID + "/answer", `{"clarificationId":"c","decision":"maybe"}`, 400, messages.CodeInvalid},
		{"negative timeout", "POST", "/api/code-sessions/" + live.SessionID + "/read-turn", `{"timeoutMs":-1}`, 400, messages.CodeInvalid},
		{"bad limit", "GET", "/api/code-sessions/" + live.SessionID + "?limit=0", nil, 400, messages.CodeInvalid},
		{"bad afterSeq", "GET", "/api/code-sessions/" + live.SessionID + "?afterSeq=-1", nil, 400, messages.CodeInvalid},
		{"malformed id", "GET", "/api/code-sessions/cs_12x", nil, 400, messages.CodeInvalid},
		{"bad topic", "GET", "/api/events?topics=everything", nil, 400, messages.CodeInvalid},
		{"afterSeq without session", "GET", "/api/events?afterSeq=3", nil, 400, messages.CodeInvalid},

		{"unknown session", "GET", "/api/code-sessions/" + unknown, nil, 404, messages.CodeNotFound},
		{"unknown session op", "POST", "/api/code-sessions/" + unknown + "/guidance", `{"text":"hi"}`, 404, messages.CodeNotFound},
		{"unknown session resume", "POST", "/api/code-sessions/" + unknown + "/resume", "", 404, messages.CodeNotFound},
		{"unknown session feed", "GET", "/api/events?sessionId=" + unknown, nil, 404, messages.CodeNotFound},
		{"no clarification pending", "POST", "/api/code-sessions/" + live.SessionID + "/answer", `{"clarificationId":"nope","decision":"deny"}`, 409, messages.CodeConflict},
		{"no route", "GET", "/api/nothing", nil, 404, messages.CodeNotFound},
		{"wrong method", "GET", "/api/code-sessions/" + live.SessionID + "/stop", nil, 404, messages.CodeNotFound},

		{"guidance to an ended session", "POST", "/api/code-sessions/" + ended.SessionID + "/guidance", `{"text":"more"}`, 409, messages.CodeNotLive},
		{"resume a live session", "POST", "/api/code-sessions/" + live.SessionID + "/resume", "", 409, messages.CodeAlreadyLive},
		{"a session another process drives", "POST", "/api/code-sessions/" + foreign.SessionID + "/guidance", `{"text":"hi"}`, 409, messages.CodeConflict},

		{"posture above the ceiling", "POST", "/api/code-sessions/" + capped.SessionID + "/posture", `{"posture":"full"}`, 422, messages.CodeCeilingExceeded},
		{"steer unsupported", "POST", "/api/code-sessions/" + lite.SessionID + "/guidance", `{"text":"x","mode":"steer"}`, 422, messages.CodeUnsupported},
		{"interrupt unsupported", "POST", "/api/code-sessions/" + lite.SessionID + "/interrupt", "", 422, messages.CodeUnsupported},

		{"read-turn long poll times out", "POST", "/api/code-sessions/" + live.SessionID + "/read-turn", `{"timeoutMs":200}`, 503, messages.CodeTimeout},
	}
	// the SLOW session's first turn blocks for a minute: read its clarification-free start first
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.call(c.method, c.path, c.body)
			assert.Equal(t, c.status, r.status, "%+v", r.Error)
			assert.False(t, r.OK)
			require.NotNil(t, r.Error)
			assert.Equal(t, c.code, r.Error.Code, r.Error.Message)
			assert.NotEmpty(t, r.Error.Message)
		})
	}

	t.Run("unauthorized", func(t *testing.T) {
		r := f.call("GET", "/api/code-sessions", nil, "Authorization", "")
		assert.Equal(t, 401, r.status)
		assert.Equal(t, messages.CodeUnauthorized, r.code())
	})
	t.Run("internal", func(t *testing.T) {
		faulty.SetFailure(func(op, _ string) error {
			if op == store.OpList {
				return store.Injected(op, "")
			}
			return nil
		})
		defer faulty.SetFailure(nil)
		r := f.call("GET", "/api/code-sessions", nil)
		assert.Equal(t, 500, r.status)
		assert.Equal(t, messages.CodeInternal, r.code())
	})
	t.Run("draining", func(t *testing.T) {
		_, err := f.d.Runtime().Stop(ctx, "elsewhere", messages.Stop{SessionID: foreign.SessionID})
		require.NoError(t, err)
		f.d.srv.Drain()
		r := f.call("GET", "/api/backends", nil)
		assert.Equal(t, 503, r.status)
		assert.Equal(t, messages.CodeInternal, r.code())
		assert.True(t, r.Error.Retryable)
		assert.Equal(t, 503, f.call("GET", "/healthz", nil).status)
	})
}

func TestAuth(t *testing.T) {
	routes := [][2]string{{"GET", "/metrics"}, {"GET", "/api/backends"}, {"GET", "/api/code-sessions"},
		{"POST", "/api/code-sessions"}, {"GET", "/api/code-sessions/" + messages.NewSessionID()},
		{"POST", "/api/code-sessions/" + messages.NewSessionID() + "/stop"}, {"GET", "/api/events"}, {"GET", "/nothing"}}
	t.Run("on", func(t *testing.T) {
		f := newFixture(t)
		for _, rt := range routes {
			for _, hdr := range []string{"", "Bearer wrong", "Basic " + testToken, "Bearer", testToken} {
				r := f.call(rt[0], rt[1], `{}`, "Authorization", hdr)
				assert.Equal(t, 401, r.status, "%s %s with %q", rt[0], rt[1], hdr)
				assert.Equal(t, messages.CodeUnauthorized, r.code())
			}
		}
		assert.Equal(t, 200, f.call("GET", "/healthz", nil, "Authorization", "").status, "healthz is open")
		assert.Equal(t, 200, f.call("GET", "/api/code-sessions", nil, "Authorization", "bearer "+testToken).status, "the scheme is case-insensitive")
		assert.Equal(t, 200, f.call("GET", "/api/code-sessions", nil).status)
	})
	t.Run("off", func(t *testing.T) {
		f := newFixture(t, func(o *DaemonOptions) { o.Token = "" })
		assert.Equal(t, 200, f.call("GET", "/api/code-sessions", nil).status)
		assert.Equal(t, 200, f.call("GET", "/api/backends", nil, "Authorization", "Bearer whatever").status)
	})
}

func TestRequestBodiesAreLimitedAndStrict(t *testing.T) {
	f := newFixture(t, func(o *DaemonOptions) { o.Server.MaxBodyBytes = 4096 })
	big := `{"brief":"` + strings.Repeat("a", 5000) + `"}`
	r := f.call("POST", "/api/code-sessions", big)
	assert.Equal(t, 400, r.status)
	assert.Contains(t, r.Error.Message, "larger than 4096 bytes")

	r = f.call("POST", "/api/code-sessions", `{"brief":"x"}`+strings.Repeat(" ", 5000)+`{}`)
	assert.Equal(t, 400, r.status, "trailing data past the limit")

	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
		r = f.call("POST", "/api/code-sessions", `{"brief":"x"}`, "Content-Type", ct)
		assert.Equal(t, 400, r.status, "Content-Type %q", ct)
		assert.Contains(t, r.Error.Message, "application/json")
	}
	r = f.call("POST", "/api/code-sessions", `{"brief":"x","cwd":"`+f.cwd+`"}`, "Content-Type", "application/json; charset=utf-8")
	assert.Equal(t, 200, r.status, "%+v", r.Error)

	// field names are exact and appear once; encoding/json alone took
	// BRIEF for brief and kept the last of two briefs
	for body, want := range map[string]string{
		`{"BRIEF":"x"}`:                  `unknown field "BRIEF": field names are case-sensitive (did you mean "brief"?)`,
		`{"brief":"x","Cwd":"/"}`:        `did you mean "cwd"?`,
		`{"brief":"rm -rf","brief":"x"}`: "appears twice",
		`{"brief":"x","allowedTools":["Read"],"cwd":"/","cwd":"/tmp"}`: "appears twice",
		`{"brief":"x","nope":1}`: `unknown field "nope"`,
	} {
		r = f.call("POST", "/api/code-sessions", body)
		require.Equal(t, 400, r.status, body)
		assert.Equal(t, messages.CodeInvalid, r.code(), body)
		assert.Contains(t, r.Error.Message, want, body)
	}
	// a system prompt too long for a command line is refused before any
	// process starts (it failed the CLI with E2BIG)
	big2 := newFixture(t)
	r = big2.call("POST", "/api/code-sessions", `{"brief":"x","cwd":"`+big2.cwd+`","appendSystemPrompt":"`+strings.Repeat("p", messages.MaxAppendSystemPromptBytes+1)+`"}`)
	require.Equal(t, 400, r.status)
	assert.Equal(t, "appendSystemPrompt", r.Error.Field)
}

func TestPathTraversalInIDsTouchesNothing(t *testing.T) {
	f := newFixture(t, func(o *DaemonOptions) { o.Store = nil }) // the real file store under the home
	ids := []string{
		"..%2F..%2F..%2Fetc%2Fpasswd", "cs_..%2F..%2Ftoken", "%2e%2e%2f%2e%2e", "cs_" + strings.Repeat("A", 64),
		"cs_" + strings.Repeat("a", 63) + "%2F", "cs_" + strings.Repeat("a", 64) + "%00", "cs_" + strings.Repeat("a", 65),
		"token", "..", "cs_%2e%2e",
	}
	for _, id := range ids {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/code-sessions/" + id, ""},
			{"POST", "/api/code-sessions/" + id + "/read-turn", `{"timeoutMs":100}`},
			{"POST", "/api/code-sessions/" + id + "/guidance", `{"text":"x"}`},
			{"POST", "/api/code-sessions/" + id + "/resume", `{}`},
			{"GET", "/api/events?sessionId=" + id, ""},
		} {
			r := f.call(c.method, c.path, c.body)
			assert.False(t, r.OK, "%s %s", c.method, c.path)
			assert.Contains(t, []int{400, 404}, r.status, "%s %s", c.method, c.path)
			if r.status == 400 {
				assert.Equal(t, messages.CodeInvalid, r.code())
			}
		}
	}
	// nothing was created: no session directory, nothing outside the home's own layout
	var made []string
	require.NoError(t, filepath.WalkDir(f.home, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(f.home, path)
		if d.IsDir() && (rel == "." || rel == "sessions" || rel == "runtimes" || rel == "run" || rel == filepath.Join("run", "procs") || rel == "wal") || rel == filepath.Join("wal", "log") || rel == filepath.Join("wal", "log.next") {
			return nil // the home's own layout (the store's write-ahead log and its next one, made ahead for a checkpoint; the process records)
		}
		if filepath.Dir(rel) == "runtimes" && strings.HasSuffix(rel, ".lock") {
			return nil
		}
		made = append(made, rel)
		return nil
	}))
	assert.Empty(t, made)
}

func TestExternalAttach(t *testing.T) {
	f := newFixture(t, withLite)
	var st messages.StartResult
	f.ok("POST", "/api/code-sessions", map[string]any{"brief": "hello", "cwd": f.cwd, "backend": liteID}, &st)
	f.read(st.SessionID)
	var view sessionView
	f.ok("GET", "/api/code-sessions/"+st.SessionID, nil, &view)
	require.NotNil(t, view.ExternalAttach)
	ext := view.Record.LatestRun().ExternalSessionID
	require.NotEmpty(t, ext)
	assert.Equal(t, `cd `+f.cwd+` && lite resume `+ext+` --dir "`+f.cwd+`"`, view.ExternalAttach.Command, "it runs as is from any directory")
	assert.Equal(t, "scripted", view.ExternalAttach.Note)
	assert.Equal(t, TwoDriversCaution, view.ExternalAttach.Caution, "live: two drivers")

	f.ok("POST", "/api/code-sessions/"+st.SessionID+"/stop", "", nil)
	var after sessionView
	f.ok("GET", "/api/code-sessions/"+st.SessionID, nil, &after)
	require.NotNil(t, after.ExternalAttach)
	assert.Equal(t, view.ExternalAttach.Command, after.ExternalAttach.Command)
	assert.Empty(t, after.ExternalAttach.Caution, "ended: no caution")
}

// TestRenderAttachRunsAsIs: the command changes to the session's cwd, sets
// the HOME the backend ran with and names the binary the daemon ran, each
// quoted; the note's placeholders are filled (before, "run it in {cwd}"
// was printed as is).
func TestRenderAttachRunsAsIs(t *testing.T) {
	rec := messages.SessionRecord{Cwd: "/my repo", Status: messages.StatusEnded, Runs: []messages.Run{{ExternalSessionID: "abc-1"}}}
	tmpl := &messages.ExternalAttach{CommandTemplate: "claude --resume {sessionId}", Note: "run it in {cwd} with the session's HOME"}
	v := RenderAttachFor(tmpl, rec, AttachLaunch{Bin: "/opt/tools/claude code/bin/claude", Home: "/home/it's"})
	require.NotNil(t, v)
	assert.Equal(t, `cd '/my repo' && HOME='/home/it'\''s' '/opt/tools/claude code/bin/claude' --resume abc-1`, v.Command)
	assert.Equal(t, "run it in /my repo with the session's HOME", v.Note)
	v = RenderAttachFor(tmpl, rec, AttachLaunch{})
	require.NotNil(t, v)
	assert.Equal(t, `cd '/my repo' && claude --resume abc-1`, v.Command)
	assert.Nil(t, RenderAttachFor(tmpl, messages.SessionRecord{Cwd: "/r"}, AttachLaunch{Bin: "/b"}), "no external id: nothing to attach to")
}

func TestRenderAttach(t *testing.T) {
	rec := func(ext, cwd string, status messages.Status) messages.SessionRecord {
		return messages.SessionRecord{Cwd: cwd, Status: status, Runs: []messages.Run{{ExternalSessionID: "old"}, {ExternalSessionID: ext}}}
	}
	tmpl := func(s string) *messages.ExternalAttach { return &messages.ExternalAttach{CommandTemplate: s} }
	cases := []struct {
		name string
		t    *messages.ExternalAttach
		rec  messages.SessionRecord
		want string // "" means absent
	}{
		{"no template", nil, rec("abc", "/r", messages.StatusEnded), ""},
		{"latest run", tmpl("claude --resume {sessionId}"), rec("abc-1", "/r", messages.StatusEnded), "claude --resume abc-1"},
		{"no external id", tmpl("codex resume {sessionId}"), rec("", "/r", messages.StatusEnded), ""},
		{"needs a cwd it lacks", tmpl(`opencode "{cwd}" --session {sessionId}`), rec("s1", "", messages.StatusOrphaned), ""},
		{"quoted cwd with spaces", tmpl(`opencode "{cwd}" --session {sessionId}`), rec("s1", "/my repo", messages.StatusEnded), `opencode "/my repo" --session s1`},
		{"quoted cwd that could expand", tmpl(`opencode "{cwd}" --session {sessionId}`), rec("s1", "/x$(rm -rf ~)", messages.StatusEnded), ""},
		{"quoted cwd with a quote", tmpl(`opencode "{cwd}" --session {sessionId}`), rec("s1", `/x"; rm -rf ~; "`, messages.StatusEnded), ""},
		{"unquoted odd id is single-quoted", tmpl("tool {sessionId}"), rec("a b;c'd", "/r", messages.StatusEnded), `tool 'a b;c'\''d'`},
		{"control characters", tmpl("tool {sessionId}"), rec("a\nb", "/r", messages.StatusEnded), ""},
		{"unknown placeholder kept", tmpl("tool {other} {sessionId}"), rec("s", "/r", messages.StatusEnded), "tool {other} s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := RenderAttach(c.t, c.rec)
			if c.want == "" {
				assert.Nil(t, v)
				return
			}
			require.NotNil(t, v)
			assert.Equal(t, "cd "+shellQuote(c.rec.Cwd)+" && "+c.want, v.Command)
			assert.Empty(t, v.Caution)
		})
	}
	v := RenderAttach(tmpl("claude --resume {sessionId}"), rec("abc", "/r", messages.StatusRunning))
	require.NotNil(t, v)
	assert.Equal(t, TwoDriversCaution, v.Caution)
}

func TestTokenFile(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	tok, created, err := LoadOrCreateToken(home)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Len(t, tok, 64)
	fi, err := os.Stat(TokenPath(home))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	again, created, err := LoadOrCreateToken(home)
	require.NoError(t, err)
	assert.False(t, created, "printed once: the second start reads it")
	assert.Equal(t, tok, again)
	read, err := ReadToken(home)
	require.NoError(t, err)
	assert.Equal(t, tok, read)

	require.NoError(t, os.Chmod(TokenPath(home), 0o644))
	_, _, err = LoadOrCreateToken(home)
	assert.ErrorContains(t, err, "readable by others")
	require.NoError(t, os.WriteFile(TokenPath(home), []byte("\n"), 0o600))
	require.NoError(t, os.Chmod(TokenPath(home), 0o600))
	_, err = ReadToken(home)
	assert.ErrorContains(t, err, "empty")
}

func TestReadTurnWaitBounds(t *testing.T) {
	f := newFixture(t)
	st := f.start("SLOW")
	r := f.call("POST", "/api/code-sessions/"+st.SessionID+"/read-turn", `{"timeoutMs":300001}`)
	assert.Equal(t, 400, r.status)
	r = f.call("POST", "/api/code-sessions/"+st.SessionID+"/read-turn", `{"timeoutMs":150}`)
	assert.Equal(t, 503, r.status)
	assert.True(t, r.Error.Retryable)
	// the wait the request asked for bounded it (not the server's default)
	assert.Contains(t, r.Error.Message, "no result within 150ms")
	// the result is not lost by the polls that timed out
	f.ok("POST", "/api/code-sessions/"+st.SessionID+"/interrupt", "", nil)
	res := f.read(st.SessionID)
	assert.Equal(t, messages.KindTurnComplete, res.Kind)
	assert.Equal(t, messages.TurnInterrupted, res.State)
}

// TestSessionIDPrefixes: every route that names a session takes a unique
// prefix of its id (with or without "cs_"), as docker and nomad do; a
// prefix of no session is not_found, one of several is invalid, and a
// stray short word is refused before anything is looked up.
func TestSessionIDPrefixes(t *testing.T) {
	f := newFixture(t)
	a := f.start("hello")
	b := f.start("hello again")
	common := 3
	for common < len(a.SessionID) && a.SessionID[common] == b.SessionID[common] {
		common++
	}
	for _, id := range []string{a.SessionID[:common+4], a.SessionID[3 : common+4]} { // unique, with and without cs_
		r := f.call("GET", "/api/code-sessions/"+id, nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %+v", id, r.Error)
		assert.Contains(t, string(r.Data), a.SessionID)
	}
	// two stored records whose ids share their first eight hex digits
	st := f.d.Runtime().Store()
	rec, err := st.GetMeta(context.Background(), a.SessionID)
	require.NoError(t, err)
	for _, tail := range []string{"0", "1"} {
		rec.SessionID = "cs_abcd1234" + strings.Repeat(tail, 56)
		require.NoError(t, st.Create(context.Background(), rec))
	}
	r := f.call("GET", "/api/code-sessions/abcd1234", nil)
	require.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, r.Error.Message, "is the start of 2 session ids: give more of it")
	r = f.call("GET", "/api/code-sessions/abcd12341", nil)
	require.Equal(t, http.StatusOK, r.status, "%+v", r.Error)
	assert.Contains(t, string(r.Data), "cs_abcd1234"+strings.Repeat("1", 56))
	other := "cs_" + strings.Repeat("0", 8)
	if strings.HasPrefix(a.SessionID, other) || strings.HasPrefix(b.SessionID, other) {
		other = "cs_" + strings.Repeat("f", 8)
	}
	r = f.call("POST", "/api/code-sessions/"+other+"/stop", map[string]any{})
	assert.Equal(t, http.StatusNotFound, r.status, "%+v", r.Error)
	for _, bad := range []string{"cs_ab", "zzzz", "ABCD"} {
		r := f.call("GET", "/api/code-sessions/"+bad, nil)
		assert.Equal(t, http.StatusBadRequest, r.status, "%s: %+v", bad, r.Error)
	}
}

// goneWriter is a client that hung up mid-answer: what is written stays
// in the server's buffer, as net/http buffers it, and pushing it to the
// connection fails, as a write to a reset connection does.
type goneWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *goneWriter) Header() http.Header         { return w.header }
func (w *goneWriter) WriteHeader(code int)        { w.status = code }
func (w *goneWriter) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *goneWriter) FlushError() error           { return syscall.ECONNRESET }

// A read-turn answer that could not be written (the client hung up
// mid-answer) is not consumed: the next read gets the same result. Before,
// the result was gone with the connection.
func TestReadTurnAnswerLostInTheWriteIsReadAgain(t *testing.T) {
	f := newFixture(t)
	st := f.start("hello")
	req := httptest.NewRequest("POST", "/api/code-sessions/"+st.SessionID+"/read-turn", strings.NewReader(`{"timeoutMs":20000}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.token)
	w := &goneWriter{header: http.Header{}}
	f.d.Handler().ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.status, "the answer had begun: %s", w.body.String())
	var lost struct {
		OK   bool                `json:"ok"`
		Data messages.TurnResult `json:"data"`
	}
	require.NoError(t, json.Unmarshal(w.body.Bytes(), &lost))
	require.True(t, lost.OK)
	assert.Equal(t, w.header.Get("Content-Length"), strconv.Itoa(w.body.Len()), "the answer says its length")

	again := f.read(st.SessionID)
	assert.Equal(t, lost.Data, again, "the result the client never got is read again")
	assert.Equal(t, messages.KindTurnComplete, again.Kind)
}

// TestRenderAttachSetsTheLaunchEnv: the environment a backend says its
// resume needs (codex's CODEX_HOME) is set in the command, quoted; a
// malformed name is left out.
func TestRenderAttachSetsTheLaunchEnv(t *testing.T) {
	rec := messages.SessionRecord{Cwd: "/r", Status: messages.StatusEnded, Runs: []messages.Run{{ExternalSessionID: "th-1"}}}
	tmpl := &messages.ExternalAttach{CommandTemplate: "codex resume {sessionId}"}
	v := RenderAttachFor(tmpl, rec, AttachLaunch{Home: "/home/u", Env: []string{"CODEX_HOME=/cache/codex homes/cs_1", "A=1", "bad name=x", "=y"}})
	require.NotNil(t, v)
	assert.Equal(t, `cd /r && HOME=/home/u CODEX_HOME='/cache/codex homes/cs_1' A=1 codex resume th-1`, v.Command)
}

// TestOpencodeAttachNeedsTheCwd: opencode's attach names the project
// directory; without a cwd on the record there is no command (opencode
// would open the session wherever the shell is).
func TestOpencodeAttachNeedsTheCwd(t *testing.T) {
	tmpl := opencode.New().Descriptor().ExternalAttach
	rec := messages.SessionRecord{Status: messages.StatusEnded, Runs: []messages.Run{{ExternalSessionID: "ses_1"}}}
	assert.Nil(t, RenderAttach(tmpl, rec))
	rec.Cwd = "/w"
	v := RenderAttach(tmpl, rec)
	require.NotNil(t, v)
	assert.Equal(t, "cd /w && opencode /w --session ses_1", v.Command)
}
