package controlplane

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// as is f with another token.
func (f *fixture) as(token string) *fixture {
	g := *f
	g.token = token
	return &g
}

// TestScopesPerToken: two tokens from the config's daemon section, two
// scopes. Neither sees the other's sessions (list, get, prefix, ops,
// feed); the capped one gets 422 at full on start, set-posture and resume;
// only an admin token reads and sets its scope's constraints.
func TestScopesPerToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := func(name, tok string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(tok+"\n"), 0o600))
		return p
	}
	const openTok, cappedTok = "open-token-0123456789", "capped-token-0123456789"
	f := newFixture(t, func(o *DaemonOptions) {
		o.Config.Daemon.Scopes = []config.Scope{
			{Name: "open", TokenFile: tokenFile("open", openTok), MaxPosture: messages.PostureFull},
			{Name: "capped", TokenFile: tokenFile("capped", cappedTok), Admin: true, MaxPosture: messages.PostureAcceptEdits,
				Backends: []string{script.ID}},
		}
	})
	open, capped := f.as(openTok), f.as(cappedTok)

	var a, b messages.StartResult
	open.ok("POST", "/api/code-sessions", map[string]any{"brief": "hello", "cwd": f.cwd, "maxPosture": "full"}, &a)
	assert.Equal(t, messages.PostureFull, a.MaxPosture)
	capped.ok("POST", "/api/code-sessions", map[string]any{"brief": "hello", "cwd": f.cwd}, &b)
	assert.Equal(t, messages.PostureAcceptEdits, b.MaxPosture, "an omitted ceiling is clamped to the scope's")

	// the capped token at full: start, set-posture
	r := capped.call("POST", "/api/code-sessions", map[string]any{"brief": "x", "cwd": f.cwd, "maxPosture": "full"})
	assert.Equal(t, http.StatusUnprocessableEntity, r.status)
	assert.Equal(t, messages.CodeCeilingExceeded, r.code())
	r = capped.call("POST", "/api/code-sessions/"+b.SessionID+"/posture", map[string]any{"posture": "full"})
	assert.Equal(t, http.StatusUnprocessableEntity, r.status)

	// neither sees the other's sessions
	list := func(g *fixture) []string {
		var v sessionsView
		g.ok("GET", "/api/code-sessions", nil, &v)
		var ids []string
		for _, rec := range v.Sessions {
			ids = append(ids, rec.SessionID)
		}
		return ids
	}
	assert.Equal(t, []string{a.SessionID}, list(open))
	assert.Equal(t, []string{b.SessionID}, list(capped))
	assert.Empty(t, list(f), "the default token's scope owns neither")
	for _, c := range []struct {
		g   *fixture
		sid string
	}{{open, b.SessionID}, {capped, a.SessionID}, {f, a.SessionID}} {
		assert.Equal(t, http.StatusNotFound, c.g.call("GET", "/api/code-sessions/"+c.sid, nil).status)
		assert.Equal(t, http.StatusNotFound, c.g.call("GET", "/api/code-sessions/"+c.sid[:12], nil).status, "a prefix resolves only among one's own")
		assert.Equal(t, http.StatusNotFound, c.g.call("POST", "/api/code-sessions/"+c.sid+"/stop", map[string]any{}).status)
	}
	assert.Equal(t, http.StatusBadRequest, capped.call("POST", "/api/code-sessions",
		map[string]any{"brief": "x", "cwd": f.cwd, "backend": "claude-code"}).status, "a backend outside the scope's list")

	// scope routes: read for anyone, set for an admin token only
	var sv scopeView
	open.ok("GET", "/api/scope", nil, &sv)
	assert.Equal(t, "open", sv.Scope)
	assert.False(t, sv.Admin)
	req := func(g *fixture, body string) resp {
		return g.call("PUT", "/api/scope", body, "Content-Type", "application/json")
	}
	assert.Equal(t, http.StatusUnauthorized, req(open, `{"maxPosture":"plan"}`).status)

	// resume at full: the admin raises its scope, starts at full, stops,
	// lowers the ceiling again; a resume asking for full is then refused,
	// and one asking for nothing resumes clamped to the ceiling
	require.True(t, req(capped, `{"maxPosture":"full","backends":["script"]}`).OK)
	var c messages.StartResult
	capped.ok("POST", "/api/code-sessions", map[string]any{"brief": "hello", "cwd": f.cwd, "maxPosture": "full"}, &c)
	capped.read(c.SessionID)
	capped.ok("POST", "/api/code-sessions/"+c.SessionID+"/stop", map[string]any{}, nil)
	require.True(t, req(capped, `{"maxPosture":"acceptEdits","backends":["script"]}`).OK)
	capped.ok("GET", "/api/scope", nil, &sv)
	assert.Equal(t, messages.PostureAcceptEdits, sv.Constraints.MaxPosture)
	r = capped.call("POST", "/api/code-sessions/"+c.SessionID+"/resume", map[string]any{"maxPosture": "full"})
	assert.Equal(t, http.StatusUnprocessableEntity, r.status)
	assert.Equal(t, messages.CodeCeilingExceeded, r.code())
	var res messages.StartResult
	capped.ok("POST", "/api/code-sessions/"+c.SessionID+"/resume", map[string]any{}, &res)
	assert.Equal(t, messages.PostureAcceptEdits, res.MaxPosture, "the record's full ceiling resumes clamped to the scope's")

	r = f.as("nobody-0123456789").call("GET", "/api/code-sessions", nil)
	assert.Equal(t, http.StatusUnauthorized, r.status)
}

// TestScopeTokenFileMustBePrivate: a token file others may read refuses
// the daemon's start.
func TestScopeTokenFileMustBePrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tok")
	require.NoError(t, os.WriteFile(p, []byte("a-token-0123456789\n"), 0o644))
	o := DaemonOptions{Config: testConfig(t), Token: testToken, Logger: quietLogger()}
	o.Config.Daemon.Scopes = []config.Scope{{Name: "x", TokenFile: p}}
	_, err := NewDaemon(o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "readable by others")
}

// TestReadWhilePendingReturnsTheQuestion: a second read while a
// clarification waits for its answer returns it again at once, and the
// record shows waiting until it is answered.
func TestReadWhilePendingReturnsTheQuestion(t *testing.T) {
	f := newFixture(t)
	st := f.start("ASK")
	first := f.read(st.SessionID)
	require.Equal(t, messages.KindClarification, first.Kind)
	again := f.read(st.SessionID)
	assert.Equal(t, messages.KindClarification, again.Kind)
	assert.Equal(t, first.ClarificationID, again.ClarificationID)
	assert.Equal(t, first.ToolName, again.ToolName)

	var v sessionView
	f.ok("GET", "/api/code-sessions/"+st.SessionID, nil, &v)
	assert.Equal(t, messages.StatusWaiting, v.Record.Status)
	var l sessionsView
	f.ok("GET", "/api/code-sessions", nil, &l)
	require.Len(t, l.Sessions, 1)
	assert.Equal(t, messages.StatusWaiting, l.Sessions[0].Status)

	f.ok("POST", "/api/code-sessions/"+st.SessionID+"/answer",
		map[string]any{"clarificationId": first.ClarificationID, "decision": "allow_once"}, nil)
	done := f.read(st.SessionID)
	assert.Equal(t, messages.KindTurnComplete, done.Kind)
	f.ok("GET", "/api/code-sessions/"+st.SessionID, nil, &v)
	assert.NotEqual(t, messages.StatusWaiting, v.Record.Status)
}

// TestMCPIsTheDefaultScopes: a scoped token cannot reach the default
// scope's sessions through /mcp.
func TestMCPIsTheDefaultScopes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tok")
	require.NoError(t, os.WriteFile(p, []byte("scoped-token-0123456789\n"), 0o600))
	f := newFixture(t, func(o *DaemonOptions) {
		o.Config.Daemon.Scopes = []config.Scope{{Name: "x", TokenFile: p}}
	})
	r := f.as("scoped-token-0123456789").call("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.NotEqual(t, http.StatusUnauthorized, f.call("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`).status)
}
