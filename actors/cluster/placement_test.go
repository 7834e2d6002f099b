package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// placementNode is a node with the given peers in its table, no network.
func placementNode(selfLoad int, peers map[string]peer) *Node {
	n := &Node{cfg: Config{NodeID: "self"}, peers: map[string]*peer{}}
	n.meta = Meta{ID: "self", Backends: []string{"script"}, Load: selfLoad}
	for id, p := range peers {
		p.meta.ID = id
		if p.meta.Backends == nil {
			p.meta.Backends = []string{"script"}
		}
		n.peers[id] = &p
	}
	return n
}

// TestPlacementPicksTheLeastLoaded: among the nodes that fit, the one with
// the fewest live sessions takes the start, whichever node is asked; ties
// go to the asked node, then to the smaller id; a dead, unverified or
// unfit node never does however idle it is.
func TestPlacementPicksTheLeastLoaded(t *testing.T) {
	alive := func(load int) peer { return peer{state: PeerAlive, verified: true, meta: Meta{Load: load}} }
	cases := []struct {
		name     string
		selfLoad int
		peers    map[string]peer
		want     string
	}{
		{"a lighter peer beats this node", 5, map[string]peer{"b": alive(1), "c": alive(3)}, "b"},
		{"the lightest of three peers", 9, map[string]peer{"b": alive(4), "c": alive(2), "d": alive(7)}, "c"},
		{"this node when it is lightest", 0, map[string]peer{"b": alive(1), "c": alive(2)}, "self"},
		{"a tie goes to this node", 2, map[string]peer{"b": alive(2)}, "self"},
		{"a tie between peers goes to the smaller id", 5, map[string]peer{"d": alive(1), "c": alive(1)}, "c"},
		{"a dead idle peer is passed over", 5, map[string]peer{"b": {state: PeerDead, verified: true}, "c": alive(3)}, "c"},
		{"an unverified idle peer is passed over", 5, map[string]peer{"b": {state: PeerAlive}, "c": alive(3)}, "c"},
		{"an idle peer that gossips Leaving is passed over", 5,
			map[string]peer{"b": {state: PeerAlive, verified: true, meta: Meta{Leaving: true}}, "c": alive(3)}, "c"},
		{"this node over a leaving peer however idle", 5, map[string]peer{"b": {state: PeerAlive, verified: true, meta: Meta{Leaving: true}}}, "self"},
		{"an idle peer without the backend is passed over", 5,
			map[string]peer{"b": {state: PeerAlive, verified: true, meta: Meta{Backends: []string{"codex"}}}, "c": alive(4)}, "c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := placementNode(tc.selfLoad, tc.peers)
			c, err := n.place(messages.Start{Brief: "x"}, "script", "")
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.meta.ID)
			assert.Equal(t, tc.want == "self", c.local)
		})
	}
}

// TestPlacementRefusesALeavingNodeByName: a start that names a node in its
// last moments of leaving is refused with a reason, not placed there.
func TestPlacementRefusesALeavingNodeByName(t *testing.T) {
	n := placementNode(5, map[string]peer{"b": {state: PeerAlive, verified: true, meta: Meta{Leaving: true}}})
	_, err := n.place(messages.Start{Brief: "x"}, "script", "b")
	require.Error(t, err)
	assert.True(t, messages.IsCode(err, messages.CodeInvalid), "%v", err)
	assert.Contains(t, err.Error(), "leaving")
}
