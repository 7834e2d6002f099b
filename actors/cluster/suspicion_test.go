package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// rumorNode is a node with no network, for the message handling alone:
// id b (boot 20) knows a (boot 10) and c (boot 30), both alive.
func rumorNode(t *testing.T) *Node {
	t.Helper()
	n := &Node{cfg: Config{NodeID: "b"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		meta: Meta{ID: "b", Boot: 20}, peers: map[string]*peer{}}
	for id, boot := range map[string]int64{"a": 10, "c": 30} {
		n.peers[id] = &peer{meta: Meta{ID: id, Boot: boot}, state: PeerAlive, recs: map[string]messages.SessionRecord{}}
	}
	n.rumors = newRumorQueue(n, 4)
	return n
}

// queued decodes the rumors n would gossip now.
func queued(t *testing.T, n *Node) []rumor {
	t.Helper()
	var out []rumor
	for _, b := range n.rumors.GetBroadcasts(0, 64<<10) {
		r, ok := decodeRumor(b)
		require.True(t, ok, "a queued broadcast is not a rumor: %x", b)
		out = append(out, r)
	}
	n.rumors.Reset()
	return out
}

func stateOf(n *Node, id string) (string, string) {
	for _, m := range n.Members() {
		if m.ID == id {
			return m.State, m.SuspectedBy
		}
	}
	return "missing", ""
}

// hear hands n a rumor as memberlist hands a user message over.
func hear(t *testing.T, n *Node, r rumor) {
	t.Helper()
	b, err := encodeRumor(r)
	require.NoError(t, err)
	(*gossip)(n).NotifyMsg(b)
}

// TestGossipedSuspicionMarksAndRefutationClears: b hears that a's probe of
// c failed: c is suspect here, suspected by a, and the rumor goes on. A
// refutation at the next incarnation clears it; the old suspicion heard
// again is stale; a suspicion at the new incarnation marks c again; b's
// own answered probe clears it too. Rumors of another boot of c, of an
// unknown or dead node, and malformed messages change nothing. Before
// gossiped suspicion, b had no user messages at all: c stayed alive here
// whatever a found.
func TestGossipedSuspicionMarksAndRefutationClears(t *testing.T) {
	n := rumorNode(t)
	var changes []string
	n.onPeerState = func(id string, s PeerState) { changes = append(changes, id+"="+s.String()) }

	suspectC := rumor{Kind: rumorSuspect, Node: "c", Boot: 30, Inc: 0, From: "a"}
	hear(t, n, suspectC)
	st, by := stateOf(n, "c")
	assert.Equal(t, "suspect", st)
	assert.Equal(t, "a", by, "the suspecter is named")
	assert.Equal(t, []rumor{suspectC}, queued(t, n), "a new suspicion is passed on")
	hear(t, n, suspectC)
	assert.Empty(t, queued(t, n), "a suspicion heard twice is passed on once")

	aliveC := rumor{Kind: rumorAlive, Node: "c", Boot: 30, Inc: 1, From: "c"}
	hear(t, n, aliveC)
	st, by = stateOf(n, "c")
	assert.Equal(t, "alive", st, "c's refutation clears the suspicion")
	assert.Empty(t, by)
	assert.Equal(t, []rumor{aliveC}, queued(t, n), "the refutation is passed on")

	hear(t, n, suspectC) // incarnation 0 again: refuted already
	st, _ = stateOf(n, "c")
	assert.Equal(t, "alive", st, "a stale suspicion")
	assert.Empty(t, queued(t, n))
	hear(t, n, aliveC)
	assert.Empty(t, queued(t, n), "a refutation heard twice is passed on once")

	again := rumor{Kind: rumorSuspect, Node: "c", Boot: 30, Inc: 1, From: "a"}
	hear(t, n, again)
	st, by = stateOf(n, "c")
	assert.Equal(t, "suspect", st, "a suspicion at the refuted incarnation")
	assert.Equal(t, "a", by)
	queued(t, n)
	n.probed("c")
	st, by = stateOf(n, "c")
	assert.Equal(t, "alive", st, "b's own probe of c was answered")
	assert.Empty(t, by)

	// b's own failed probe: suspect by b, gossiped at the incarnation b
	// knows; and gossiped again on the next failure
	n.suspected("c")
	st, by = stateOf(n, "c")
	assert.Equal(t, "suspect", st)
	assert.Equal(t, "b", by)
	mine := rumor{Kind: rumorSuspect, Node: "c", Boot: 30, Inc: 1, From: "b"}
	assert.Equal(t, []rumor{mine}, queued(t, n))
	n.suspected("c")
	assert.Equal(t, []rumor{mine}, queued(t, n), "each failed probe is gossiped")
	hear(t, n, rumor{Kind: rumorAlive, Node: "c", Boot: 30, Inc: 2, From: "c"})
	st, _ = stateOf(n, "c")
	assert.Equal(t, "alive", st, "a refutation clears this node's own suspicion too")
	queued(t, n)

	// moot: another boot of a, an unknown node, a dead one, garbage
	hear(t, n, rumor{Kind: rumorSuspect, Node: "a", Boot: 9, From: "c"})
	hear(t, n, rumor{Kind: rumorSuspect, Node: "x", Boot: 1, From: "c"})
	n.peers["c"].state = PeerDead
	hear(t, n, rumor{Kind: rumorSuspect, Node: "c", Boot: 30, Inc: 5, From: "a"})
	for _, b := range [][]byte{nil, {rumorV1}, {rumorV1, 0xc1}, {2, 0x80}, []byte("hello")} {
		(*gossip)(n).NotifyMsg(b)
	}
	for _, bad := range []rumor{{Kind: "rumour", Node: "a", Boot: 10, From: "c"}, {Kind: rumorSuspect, Boot: 10, From: "c"}, {Kind: rumorSuspect, Node: "a", Boot: 10}} {
		hear(t, n, bad)
	}
	st, _ = stateOf(n, "a")
	assert.Equal(t, "alive", st)
	st, _ = stateOf(n, "c")
	assert.Equal(t, "dead", st)
	assert.Empty(t, queued(t, n), "nothing moot is passed on")

	assert.Equal(t, []string{"c=suspect", "c=alive", "c=suspect", "c=alive", "c=suspect", "c=alive"}, changes)
}

// TestSuspectedNodeRefutes: b hears it is suspected at its incarnation and
// gossips that it is alive at the next; a suspicion older than that, or
// of an earlier boot of b, is not answered.
func TestSuspectedNodeRefutes(t *testing.T) {
	n := rumorNode(t)
	hear(t, n, rumor{Kind: rumorSuspect, Node: "b", Boot: 20, Inc: 0, From: "a"})
	assert.Equal(t, []rumor{{Kind: rumorAlive, Node: "b", Boot: 20, Inc: 1, From: "b"}}, queued(t, n))
	hear(t, n, rumor{Kind: rumorSuspect, Node: "b", Boot: 20, Inc: 0, From: "c"})
	assert.Empty(t, queued(t, n), "refuted already")
	hear(t, n, rumor{Kind: rumorSuspect, Node: "b", Boot: 19, Inc: 7, From: "c"})
	assert.Empty(t, queued(t, n), "a suspicion of b's earlier life")
	hear(t, n, rumor{Kind: rumorSuspect, Node: "b", Boot: 20, Inc: 1, From: "c"})
	assert.Equal(t, []rumor{{Kind: rumorAlive, Node: "b", Boot: 20, Inc: 2, From: "b"}}, queued(t, n))
	hear(t, n, rumor{Kind: rumorAlive, Node: "b", Boot: 20, Inc: 9, From: "b"})
	assert.Empty(t, queued(t, n), "b's own alive rumor changes nothing here")
	st, _ := stateOf(n, "a")
	assert.Equal(t, "alive", st)
}

// TestRumorQueueReplacesOlderRumorsOfAMember: memberlist's queue holds one
// rumor per member, the newest.
func TestRumorQueueReplacesOlderRumorsOfAMember(t *testing.T) {
	n := rumorNode(t)
	n.spread(rumor{Kind: rumorSuspect, Node: "c", Boot: 30, Inc: 0, From: "b"})
	n.spread(rumor{Kind: rumorSuspect, Node: "a", Boot: 10, Inc: 0, From: "b"})
	n.spread(rumor{Kind: rumorAlive, Node: "c", Boot: 30, Inc: 1, From: "c"})
	got := queued(t, n)
	assert.ElementsMatch(t, []rumor{{Kind: rumorAlive, Node: "c", Boot: 30, Inc: 1, From: "c"}, {Kind: rumorSuspect, Node: "a", Boot: 10, Inc: 0, From: "b"}}, got)
}

// TestPeerStateChangesAreLoggedAtDebugWithTheSuspecter: each change of a
// peer between alive and suspect is one debug line naming the peer, the
// new state and, for suspect, who suspected it: a gossiped suspicion
// names its suspecter, this node's own failed probe names this node (a
// test reading a node's log tells the two apart by it). None of them is
// logged at info; a death still is. Before, these changes were info lines
// and the gossiped one was the only one naming the suspecter.
func TestPeerStateChangesAreLoggedAtDebugWithTheSuspecter(t *testing.T) {
	n := rumorNode(t)
	var buf bytes.Buffer
	n.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", "b")
	n.peers["c"].meta.Addr = "127.0.0.1:7947"
	n.peers["c"].verified = true
	cMeta, err := messages.MarshalMsgpack(Meta{ID: "c", Boot: 30, Addr: "127.0.0.1:7947", Load: 1})
	require.NoError(t, err)

	hear(t, n, rumor{Kind: rumorSuspect, Node: "c", Boot: 30, Inc: 0, From: "a"})
	hear(t, n, rumor{Kind: rumorSuspect, Node: "c", Boot: 30, Inc: 0, From: "a"}) // no change: no line
	hear(t, n, rumor{Kind: rumorAlive, Node: "c", Boot: 30, Inc: 1, From: "c"})
	n.suspected("c")
	n.suspected("c") // suspect already: no line
	n.probed("c")
	n.probed("c") // alive already: no line
	hear(t, n, rumor{Kind: rumorSuspect, Node: "c", Boot: 30, Inc: 1, From: "a"})
	(*gossip)(n).NotifyUpdate(&memberlist.Node{Name: "c", Meta: cMeta})
	(*gossip)(n).NotifyLeave(&memberlist.Node{Name: "c", Meta: cMeta})

	var changes, info []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, "level=INFO") {
			info = append(info, line[strings.Index(line, "msg="):])
		}
		_, rest, ok := strings.Cut(line, ` msg="cluster: peer state changed" `)
		if !ok {
			continue
		}
		assert.Contains(t, line, "level=DEBUG ")
		changes = append(changes, rest)
	}
	assert.Equal(t, []string{
		`node=b peer=c state=suspect suspectedBy=a why="gossiped: another node's probe of it went unanswered"`,
		`node=b peer=c state=alive why="it refuted a suspicion"`,
		`node=b peer=c state=suspect suspectedBy=b why="this node's probe of it went unanswered"`,
		`node=b peer=c state=alive why="this node's probe of it was answered"`,
		`node=b peer=c state=suspect suspectedBy=a why="gossiped: another node's probe of it went unanswered"`,
		`node=b peer=c state=alive why="memberlist says it is alive (its metadata changed)"`,
	}, changes, "the log:\n%s", buf.String())
	assert.Equal(t, []string{`msg="cluster: member dead" node=b member=c addr=127.0.0.1:7947`}, info,
		"only the death is logged at info")
}
