package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
)

// TestScopedTokensAcrossNodes: two daemons with the same scopes alpha and
// beta. alpha's token starts a session through a that runs on b; on a,
// alpha's token lists, reads and drives it, and beta's token neither sees
// nor drives it, on either node. The old gateway took only the daemon
// token and forwarded every call under the daemon's scope. The owner
// checks the scope itself: a's node asking b for the session under beta's
// scope (no gateway in between) is told it does not exist.
func TestScopedTokensAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	var scopes []config.Scope
	tokens := map[string]string{}
	for _, name := range []string{"alpha", "beta"} {
		tok := name + "-token-0123456789"
		f := filepath.Join(dir, name+".token")
		require.NoError(t, os.WriteFile(f, []byte(tok+"\n"), 0o600))
		scopes = append(scopes, config.Scope{Name: name, TokenFile: f})
		tokens[name] = tok
	}
	ra, rb := filepath.Join(dir, "wa"), filepath.Join(dir, "wb")
	require.NoError(t, mkdir(ra))
	require.NoError(t, mkdir(rb))
	a := startDaemonNode(t, "a", ra, "", scopes...)
	b := startDaemonNode(t, "b", rb, a.node.cfg.ListenAddr, scopes...)
	converged(t, a.node, b.node)

	var placed Placed
	require.Nil(t, a.apiAs(t, tokens["alpha"], "POST", "/api/code-sessions", map[string]any{"brief": "alpha's", "cwd": rb}, &placed))
	require.Equal(t, "b", placed.Node)
	sid := placed.SessionID

	list := func(dn *daemonNode, scope string) []string {
		var l struct {
			Sessions []NodeRecord `json:"sessions"`
		}
		require.Nil(t, dn.apiAs(t, tokens[scope], "GET", "/api/code-sessions", nil, &l))
		var ids []string
		for _, r := range l.Sessions {
			ids = append(ids, r.SessionID)
		}
		return ids
	}
	require.Eventually(t, func() bool { return len(list(a, "alpha")) == 1 }, deadline, 20e6, "a never listed alpha's session")
	assert.Equal(t, []string{sid}, list(a, "alpha"))
	for _, dn := range []*daemonNode{a, b} {
		assert.Empty(t, list(dn, "beta"), "beta sees alpha's session on %s", dn.node.ID())
	}

	// alpha reads and drives it through a
	var view sessionView
	require.Nil(t, a.apiAs(t, tokens["alpha"], "GET", "/api/code-sessions/"+sid, nil, &view))
	assert.Equal(t, "b", view.Node)
	var tr messages.TurnResult
	require.Nil(t, a.apiAs(t, tokens["alpha"], "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 60000}, &tr))
	assert.Equal(t, messages.KindTurnComplete, tr.Kind)

	// beta is refused on both nodes, as if the session did not exist
	for _, dn := range []*daemonNode{a, b} {
		e := dn.apiAs(t, tokens["beta"], "GET", "/api/code-sessions/"+sid, nil, nil)
		require.NotNil(t, e, "beta read alpha's session on %s", dn.node.ID())
		assert.Equal(t, messages.CodeNotFound, e.Code, "on %s: %+v", dn.node.ID(), e)
		e = dn.apiAs(t, tokens["beta"], "POST", "/api/code-sessions/"+sid+"/stop", map[string]any{}, nil)
		require.NotNil(t, e, "beta stopped alpha's session on %s", dn.node.ID())
		assert.Equal(t, messages.CodeNotFound, e.Code, "on %s: %+v", dn.node.ID(), e)
	}

	// the owner checks the forwarded scope itself
	_, _, err := a.node.Get(WithScope(ctxT(t), "beta"), sid, 0, 10)
	assert.Equal(t, messages.CodeNotFound, messages.ErrorCode(err), "%v", err)
	_, _, err = a.node.Get(WithScope(ctxT(t), "alpha"), sid, 0, 10)
	assert.NoError(t, err)

	// and the session still runs: beta's stop did nothing
	var st messages.StopResult
	require.Nil(t, a.apiAs(t, tokens["alpha"], "POST", "/api/code-sessions/"+sid+"/stop", map[string]any{}, &st))
	assert.False(t, st.AlreadyStopped)
}

// TestRemoteResumeChecksTheOwnersAllowlist: alpha's session runs on b with
// the script backend; then b's allowlist refuses script (a's does not).
// A resume through a under alpha's token is refused by b, the owner. The
// old handler resumed it (no check on the owner, and the gateway's resume
// checks nothing).
func TestRemoteResumeChecksTheOwnersAllowlist(t *testing.T) {
	dir := t.TempDir()
	tok := "alpha-token-0123456789"
	f := filepath.Join(dir, "alpha.token")
	require.NoError(t, os.WriteFile(f, []byte(tok+"\n"), 0o600))
	ra, rb := filepath.Join(dir, "wa"), filepath.Join(dir, "wb")
	require.NoError(t, mkdir(ra))
	require.NoError(t, mkdir(rb))
	a := startDaemonNode(t, "a", ra, "", config.Scope{Name: "alpha", TokenFile: f})
	b := startDaemonNode(t, "b", rb, a.node.cfg.ListenAddr, config.Scope{Name: "alpha", TokenFile: f})
	converged(t, a.node, b.node)

	var placed Placed
	require.Nil(t, a.apiAs(t, tok, "POST", "/api/code-sessions", map[string]any{"brief": "alpha's", "cwd": rb}, &placed))
	require.Equal(t, "b", placed.Node)
	sid := placed.SessionID
	var st messages.StopResult
	require.Nil(t, a.apiAs(t, tok, "POST", "/api/code-sessions/"+sid+"/stop", map[string]any{}, &st))

	script := "script"
	b.refuse.Store(&script)
	e := a.apiAs(t, tok, "POST", "/api/code-sessions/"+sid+"/resume", map[string]any{"brief": "again"}, nil)
	require.NotNil(t, e, "b resumed a session on a backend its allowlist refuses")
	assert.Equal(t, messages.CodeInvalid, e.Code, "%+v", e)
	assert.Equal(t, "backend", e.Field)

	b.refuse.Store(nil)
	var res Placed
	require.Nil(t, a.apiAs(t, tok, "POST", "/api/code-sessions/"+sid+"/resume", map[string]any{"brief": "again"}, &res))
	assert.Equal(t, "b", res.Node)
}

// TestScopedAllSessionsFeedAcrossNodes: alpha's and beta's sessions both
// run on b; on a, alpha's all-sessions feed carries alpha's session's
// events and none of beta's, and beta's feed the other way round. The old
// feed showed another node's sessions to the default token only, so
// alpha's feed stayed empty.
func TestScopedAllSessionsFeedAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	var scopes []config.Scope
	tokens := map[string]string{}
	for _, name := range []string{"alpha", "beta"} {
		tok := name + "-token-0123456789"
		f := filepath.Join(dir, name+".token")
		require.NoError(t, os.WriteFile(f, []byte(tok+"\n"), 0o600))
		scopes = append(scopes, config.Scope{Name: name, TokenFile: f})
		tokens[name] = tok
	}
	ra, rb := filepath.Join(dir, "wa"), filepath.Join(dir, "wb")
	require.NoError(t, mkdir(ra))
	require.NoError(t, mkdir(rb))
	a := startDaemonNode(t, "a", ra, "", scopes...)
	b := startDaemonNode(t, "b", rb, a.node.cfg.ListenAddr, scopes...)
	converged(t, a.node, b.node)

	ctx := ctxT(t)
	feeds := map[string]<-chan controlplane.EventData{}
	for _, sc := range []string{"alpha", "beta"} {
		feeds[sc] = sseEventsAs(t, ctx, a, tokens[sc], "", "")
	}
	sids := map[string]string{}
	for _, sc := range []string{"alpha", "beta"} {
		var placed Placed
		require.Nil(t, a.apiAs(t, tokens[sc], "POST", "/api/code-sessions", map[string]any{"brief": sc + "'s", "cwd": rb}, &placed))
		require.Equal(t, "b", placed.Node)
		sids[sc] = placed.SessionID
		var tr messages.TurnResult
		require.Nil(t, a.apiAs(t, tokens[sc], "POST", "/api/code-sessions/"+placed.SessionID+"/read-turn", map[string]any{"timeoutMs": 60000}, &tr))
		require.Equal(t, messages.KindTurnComplete, tr.Kind)
		// a later turn, once a's directory has the record: the scoped feed
		// shows a foreign session from its record's scope
		require.Eventually(t, func() bool { _, ok := a.node.peerRecord(placed.SessionID); return ok }, deadline, 20e6)
		require.Nil(t, a.apiAs(t, tokens[sc], "POST", "/api/code-sessions/"+placed.SessionID+"/guidance", map[string]any{"text": "more " + sc}, nil))
		require.Nil(t, a.apiAs(t, tokens[sc], "POST", "/api/code-sessions/"+placed.SessionID+"/read-turn", map[string]any{"timeoutMs": 60000}, &tr))
		require.Equal(t, messages.KindTurnComplete, tr.Kind)
	}
	for _, sc := range []string{"alpha", "beta"} {
		other := map[string]string{"alpha": "beta", "beta": "alpha"}[sc]
		sawGuidance := false
		timeout := time.After(deadline)
		for !sawGuidance {
			select {
			case d, ok := <-feeds[sc]:
				require.True(t, ok, "%s's feed ended", sc)
				require.NotEqual(t, sids[other], d.SessionID, "%s's feed carried %s's session", sc, other)
				if d.SessionID == sids[sc] && d.Event.Type == messages.EvGuidance && d.Event.Text == "more "+sc {
					sawGuidance = true
				}
			case <-timeout:
				t.Fatalf("%s's all-sessions feed on a never showed its session on b", sc)
			}
		}
	}
	// alpha's feed has seen beta's later turn go by (it came after alpha's
	// guidance over the same wire): nothing of beta's is left queued for it
	for len(feeds["alpha"]) > 0 {
		d := <-feeds["alpha"]
		require.NotEqual(t, sids["beta"], d.SessionID, "alpha's feed carried beta's session")
	}
}

// TestScopedAllSessionsFeedSeesARemoteSessionFromItsFirstEvent: alpha's
// all-sessions feed on a, and a session alpha starts on b through a: the
// feed carries the session's events from seq 1, gapless, up to the end of
// its first turn. The old feed handed another node's events on before a
// knew the session's record, and the scoped feed dropped every event
// until the record came (it showed them to the default token only).
func TestScopedAllSessionsFeedSeesARemoteSessionFromItsFirstEvent(t *testing.T) {
	dir := t.TempDir()
	tok := "alpha-token-0123456789"
	f := filepath.Join(dir, "alpha.token")
	require.NoError(t, os.WriteFile(f, []byte(tok+"\n"), 0o600))
	alpha := config.Scope{Name: "alpha", TokenFile: f}
	ra, rb := filepath.Join(dir, "wa"), filepath.Join(dir, "wb")
	require.NoError(t, mkdir(ra))
	require.NoError(t, mkdir(rb))
	a := startDaemonNode(t, "a", ra, "", alpha)
	b := startDaemonNode(t, "b", rb, a.node.cfg.ListenAddr, alpha)
	converged(t, a.node, b.node)

	ctx := ctxT(t)
	feed := sseEventsAs(t, ctx, a, tok, "", "")
	for i := range 3 { // a few sessions: each is a fresh race with its record
		var placed Placed
		require.Nil(t, a.apiAs(t, tok, "POST", "/api/code-sessions", map[string]any{"brief": fmt.Sprintf("first %d", i), "cwd": rb}, &placed))
		require.Equal(t, "b", placed.Node)
		var tr messages.TurnResult
		require.Nil(t, a.apiAs(t, tok, "POST", "/api/code-sessions/"+placed.SessionID+"/read-turn", map[string]any{"timeoutMs": 60000}, &tr))
		require.Equal(t, messages.KindTurnComplete, tr.Kind)
		var v struct {
			Events  []messages.PersistedEvent `json:"events"`
			LastSeq uint64                    `json:"lastSeq"`
		}
		require.Nil(t, a.apiAs(t, tok, "GET", "/api/code-sessions/"+placed.SessionID+"?limit=5000", nil, &v))
		var seqs []uint64
		timeout := time.After(deadline)
		for len(seqs) == 0 || seqs[len(seqs)-1] < v.LastSeq {
			select {
			case d, ok := <-feed:
				require.True(t, ok, "alpha's feed ended; saw %v", seqs)
				if d.SessionID == placed.SessionID {
					seqs = append(seqs, d.Seq)
				}
			case <-timeout:
				t.Fatalf("alpha's feed never reached seq %d of session %d; saw %v", v.LastSeq, i, seqs)
			}
		}
		// the feed coalesces a run of text deltas into one event (the
		// run's last seq): every other event of the log is in it, in order
		var want []uint64
		for _, ev := range v.Events {
			if !(ev.Event.Type == messages.EvText && ev.Event.Delta) {
				want = append(want, ev.Seq)
			}
		}
		require.True(t, slices.IsSorted(seqs) && len(slices.Compact(slices.Clone(seqs))) == len(seqs), "in order, no repeats: %v", seqs)
		for _, s := range want {
			require.Contains(t, seqs, s, "session %d: alpha's feed lacks seq %d of the log (it has %v)", i, s, seqs)
		}
	}
}
