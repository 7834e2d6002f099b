package cluster

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func (n *Node) callsOf(op string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[op]
}

// TestListingNeverCallsAPeer: a listing comes from the directory, never
// from a fan-out to the peers. The old listing listed every live peer on
// each request, so one that had stopped answering (not yet declared dead)
// held every listing for the call's timeout. Here b lists while c is
// first alive, then marked suspect, then gone: no listing makes a remote
// call, c's session is marked suspect at once, and orphaned once c is dead.
func TestListingNeverCallsAPeer(t *testing.T) {
	base := t.TempDir()
	roots := []string{filepath.Join(base, "wa"), filepath.Join(base, "wb"), filepath.Join(base, "wc")}
	for _, r := range roots {
		require.NoError(t, mkdir(r))
	}
	// no background sync during the test: every list call it sees would be
	// the listing's
	nodes := startNodes(t, []spec{{id: "a", roots: roots[:1]}, {id: "b", roots: roots[1:2]}, {id: "c", roots: roots[2:]}},
		func(_ int, c *Config) { c.SyncInterval = time.Hour })
	a, b, c := nodes[0], nodes[1], nodes[2]
	ctx := ctxT(t)
	placed, err := a.Start(ctx, messages.Start{Brief: "listed", Cwd: roots[2]}, "")
	require.NoError(t, err)
	require.Equal(t, "c", placed.Node)
	var tr messages.TurnResult
	_, err = a.Do(ctx, placed.SessionID, messages.OpReadTurn, messages.ReadTurn{SessionID: placed.SessionID}, &tr)
	require.NoError(t, err)

	find := func(n *Node) (NodeRecord, bool) {
		recs, err := n.Sessions(ctx)
		require.NoError(t, err)
		for _, r := range recs {
			if r.SessionID == placed.SessionID {
				return r, true
			}
		}
		return NodeRecord{}, false
	}
	// b learns of the session from its feed, not from a listing
	require.Eventually(t, func() bool { r, ok := find(b); return ok && r.Node == "c" }, deadline, 20*time.Millisecond)
	lists := b.callsOf(opList)
	for range 20 {
		r, ok := find(b)
		require.True(t, ok)
		assert.Equal(t, "alive", r.NodeState)
	}
	assert.Equal(t, lists, b.callsOf(opList), "a listing listed a peer")

	// memberlist says c is suspect: its sessions are marked so at once
	meta, err := messages.MarshalMsgpack(c.Meta())
	require.NoError(t, err)
	b.memberChanged(&memberlist.Node{Name: "c", Meta: meta, State: memberlist.StateSuspect}, PeerSuspect)
	r, ok := find(b)
	require.True(t, ok)
	assert.Equal(t, "suspect", r.NodeState)
	assert.True(t, r.Status.Live(), "suspect is not yet orphaned: %s", r.Status)

	// c's process goes silent: every listing during its death answers from
	// the directory, and c's session ends up orphaned
	c.crash()
	require.Eventually(t, func() bool {
		r, ok := find(b)
		return ok && r.Status == messages.StatusOrphaned && r.NodeState == "dead"
	}, deadline, 20*time.Millisecond, "b never showed c's session orphaned: %s", describe(b))
	assert.Equal(t, lists, b.callsOf(opList), "a listing listed a peer")
	assert.Zero(t, b.callsOf(opGet), "a listing read a peer's session")
}
