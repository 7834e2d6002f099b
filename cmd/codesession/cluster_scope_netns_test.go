package main

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/cluster"
	"github.com/codesession/codesession/messages"
)

// TestClusterScopesAndListingsAcrossProcesses: three processes in network
// namespaces, each with the scopes alpha and beta. alpha's session runs on
// n3 and beta's on n2, both started through n1. On n2, beta's token is
// refused alpha's session (on n3) and alpha's token reads it; each
// scope's listing on n1 shows its own session only. Then n3 is SIGKILLed:
// every listing on n1 until n3 is declared dead answers, with n3's session
// in it (the listing reads the directory, never n3); how long they took is
// logged, not judged (bench cluster reports it as a ratio).
func TestClusterScopesAndListingsAcrossProcesses(t *testing.T) {
	skipOrFailWithoutNetns(t)
	lab := newNetnsLab(t, 3)
	bin := buildServe(t)
	scenario := writeScenario(t, opsScenario)
	roots := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	tokenDir := t.TempDir()
	tokens := map[string]string{}
	var scopes []map[string]any
	for _, name := range []string{"alpha", "beta"} {
		tokens[name] = name + "-token-0123456789abcdef"
		f := filepath.Join(tokenDir, name+".token")
		require.NoError(t, os.WriteFile(f, []byte(tokens[name]+"\n"), 0o600))
		scopes = append(scopes, map[string]any{"name": name, "tokenFile": f})
	}
	cfg := map[string]any{"cluster": map[string]any{"profile": "local"}, "daemon": map[string]any{"scopes": scopes}}
	n1 := lab.startNodeWith(bin, 1, roots[0], scenario, "", cfg, nil)
	n2 := lab.startNodeWith(bin, 2, roots[1], scenario, n1.gossip, cfg, nil)
	n3 := lab.startNodeWith(bin, 3, roots[2], scenario, n1.gossip, cfg, nil)
	waitAllVerified(t, n1, n2, n3)
	sids := map[string]string{}
	for sc, root := range map[string]string{"alpha": roots[2], "beta": roots[1]} {
		var placed cluster.Placed
		require.Nil(t, n1.apiAs(t, tokens[sc], "POST", "/api/code-sessions", map[string]any{"brief": sc + "'s", "cwd": root}, &placed))
		sids[sc] = placed.SessionID
		var tr messages.TurnResult
		require.Nil(t, n1.apiAs(t, tokens[sc], "POST", "/api/code-sessions/"+placed.SessionID+"/read-turn", map[string]any{"timeoutMs": 120000}, &tr))
		require.Equal(t, messages.KindTurnComplete, tr.Kind)
	}
	// on n2, alpha's session (on n3) is refused to beta, read by alpha
	e := n2.apiAs(t, tokens["beta"], "GET", "/api/code-sessions/"+sids["alpha"], nil, nil)
	require.NotNil(t, e, "beta read alpha's session through n2")
	assert.Equal(t, messages.CodeNotFound, e.Code)
	require.Nil(t, n2.apiAs(t, tokens["alpha"], "GET", "/api/code-sessions/"+sids["alpha"], nil, nil))
	e = n2.apiAs(t, tokens["beta"], "POST", "/api/code-sessions/"+sids["alpha"]+"/stop", map[string]any{}, nil)
	require.NotNil(t, e, "beta stopped alpha's session through n2")
	for sc, other := range map[string]string{"alpha": "beta", "beta": "alpha"} {
		waitFor(t, sc+"'s listing on n1 to show its own session only", func() bool {
			var list struct {
				Sessions []cluster.NodeRecord `json:"sessions"`
			}
			if n1.apiAs(t, tokens[sc], "GET", "/api/code-sessions", nil, &list) != nil {
				return false
			}
			ids := []string{}
			for _, r := range list.Sessions {
				ids = append(ids, r.SessionID)
			}
			require.NotContains(t, ids, sids[other], "%s's listing on n1 shows %s's session", sc, other)
			return slices.Equal(ids, []string{sids[sc]})
		})
	}

	// listings on n1 while n3 dies
	require.NoError(t, n3.cmd.Process.Signal(syscall.SIGKILL))
	n3.wait(t, time.Minute)
	var took []time.Duration
	for {
		t0 := time.Now()
		var list struct {
			Sessions []cluster.NodeRecord `json:"sessions"`
		}
		require.Nil(t, n1.apiAs(t, tokens["alpha"], "GET", "/api/code-sessions", nil, &list), "a listing on n1 during n3's death failed")
		took = append(took, time.Since(t0))
		require.Len(t, list.Sessions, 1, "alpha's listing on n1 during n3's death")
		r := list.Sessions[0]
		require.Equal(t, sids["alpha"], r.SessionID)
		require.Equal(t, "n3", r.Node)
		if r.Status == messages.StatusOrphaned {
			break
		}
		require.Less(t, len(took), 5000, "n3 was never declared dead")
		time.Sleep(20 * time.Millisecond)
	}
	slices.Sort(took)
	t.Logf("%d listings on n1 while n3 was dying: p50 %s, max %s", len(took), took[len(took)/2], took[len(took)-1])
}
