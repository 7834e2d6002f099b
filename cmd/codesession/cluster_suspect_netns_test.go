package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/cluster"
	"github.com/codesession/codesession/messages"
)

// cutRoute stops node from (1-based) sending anything to node to on the
// cluster network, or lets it again: an unreachable route in from's
// namespace (plain routing: this kernel has neither iptables nor netem).
// One direction only; the other is to's own route.
func (l *netnsLab) cutRoute(from, to int, cut bool) {
	verb := "add"
	if !cut {
		verb = "del"
	}
	l.ip("-n", l.nodes[from-1], "route", verb, "unreachable", fmt.Sprintf("10.77.0.%d/32", to))
}

// peerStateLine is a node's debug line for a peer marked suspect
// (cluster.Node.logPeerState): the node, the peer, the suspecter.
var peerStateLine = regexp.MustCompile(`msg="cluster: peer state changed" node=(\S+) peer=(\S+) state=suspect suspectedBy=(\S+)`)

// suspecters lists, in order, who suspected peer each time node's log
// says node marked it suspect.
func suspecters(log, node, peer string) []string {
	var by []string
	for _, m := range peerStateLine.FindAllStringSubmatch(log, -1) {
		if m[1] == node && m[2] == peer {
			by = append(by, m[3])
		}
	}
	return by
}

// TestClusterGossipsSuspicion: three nodes in network namespaces; n3
// holds a session. n1 can no longer send to n3, and n2 can no longer
// send to n1 (without that cut, n1's indirect probe of n3 through n2
// would answer for n3 and no one would suspect it: SWIM's indirect probes
// are there for exactly this). So n1's probes of n3 fail directly,
// indirectly and over TCP, while n2 reaches n3 as before. n2 marks n3,
// and so n3's session in its listing, suspect, suspected by n1: the
// suspicion reached n2 by gossip (n2's log says so; the moment is too
// short to catch by reading the listing). Before gossiped suspicion a
// node marked a peer suspect only on its own failed probe, and n2 listed
// n3's session alive throughout. n3 refutes each suspicion (n2 passes it
// on to n3), so n2 marks it alive again during the cut too; after the
// heal every node lists it alive.
func TestClusterGossipsSuspicion(t *testing.T) {
	skipOrFailWithoutNetns(t)
	lab := newNetnsLab(t, 3)
	bin := buildServe(t)
	scenario := writeScenario(t, opsScenario)
	roots := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	local := map[string]any{"cluster": map[string]any{"profile": "local"}}
	debug := []string{"CODESESSION_LOG_LEVEL=debug"} // memberlist's failed-probe lines are logged at debug
	n1 := lab.startNodeWith(bin, 1, roots[0], scenario, "", local, debug)
	n2 := lab.startNodeWith(bin, 2, roots[1], scenario, n1.gossip, local, debug)
	n3 := lab.startNodeWith(bin, 3, roots[2], scenario, n1.gossip, local, nil)
	waitAllVerified(t, n1, n2, n3)
	var placed cluster.Placed
	require.Nil(t, n2.api(t, "POST", "/api/code-sessions", map[string]any{"brief": "on the suspect node", "cwd": roots[2]}, &placed))
	require.Equal(t, "n3", placed.Node)
	sid := placed.SessionID
	var tr messages.TurnResult
	require.Nil(t, n2.api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 120000}, &tr))
	require.Equal(t, messages.KindTurnComplete, tr.Kind)
	waitFor(t, "n2 to list n3's session alive", func() bool {
		r, ok := n2.session(t, sid)
		return ok && r.Node == "n3" && r.NodeState == "alive"
	})

	mark := len(n2.stderr.String()) // what n2 logged before the cut does not count
	lab.cutRoute(1, 3, true)
	lab.cutRoute(2, 1, true)
	// the suspect windows are short (n3 refutes within a gossip round or
	// two, and n1 suspects again on its next probe of n3): a listing read
	// now and then can miss every one of them on a loaded machine. So the
	// verdict is n2's log, which has a line for each change of n3's state
	// naming the suspecter: suspectedBy=n1 is a suspicion n2 heard by
	// gossip (its own failed probe names n2), and n2's listing marks n3's
	// session with that state the moment it changes (the listing reads the
	// peer table). The listing is sampled as well, for the record only.
	// The deadline only stops a hang.
	var seen []string // n2's listing of the session at each change seen
	last := ""
	deadline := time.Now().Add(3 * time.Minute)
	for {
		by := suspecters(n2.stderr.String()[mark:], "n2", "n3")
		if slices.Contains(by, "n1") {
			t.Logf("n2 marked n3 suspect by: %v", by)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n2 never logged n3 suspect by n1 (it did by %v); n1 logged %d failed probes of n3; n2 listed the session %v",
				by, strings.Count(n1.stderr.String(), "Suspect n3 has failed"), seen)
		}
		r, ok := n2.session(t, sid)
		require.True(t, ok, "n2 lost n3's session from its listing")
		now := r.NodeState
		if r.SuspectedBy != "" {
			now += " by " + r.SuspectedBy
		}
		if now != last {
			seen = append(seen, now)
			last = now
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Contains(t, n1.stderr.String(), "Suspect n3 has failed", "n1's own probe of n3 failed")
	t.Logf("n2's listing of n3's session during the cut, as sampled: %v; n2's own probes of n3 failed %d times", seen,
		strings.Count(n2.stderr.String()[mark:], "Suspect n3 has failed"))

	lab.cutRoute(1, 3, false)
	lab.cutRoute(2, 1, false)
	for _, n := range []*clusterProc{n1, n2, n3} {
		waitFor(t, n.id+" to verify both peers after the heal", func() bool { return len(n.verifiedPeers(t)) == 2 })
	}
	for _, n := range []*clusterProc{n1, n2} {
		waitFor(t, n.id+" to list n3's session alive after the heal", func() bool {
			r, ok := n.session(t, sid)
			return ok && r.Node == "n3" && r.NodeState == "alive" && r.SuspectedBy == "" && r.Status.Live()
		})
	}
}
