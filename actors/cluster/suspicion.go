package cluster

import (
	"github.com/hashicorp/memberlist"

	"github.com/codesession/codesession/messages"
)

// Gossiped suspicion. Memberlist gossips its own suspect messages but
// tells its delegates nothing of them, so a node would see a peer suspect
// only when its own probe failed: in a cluster of three or more, a peer
// another node could not reach went from alive straight to dead here.
// This layer gossips suspicion itself, as memberlist user messages
// (rumors) on memberlist's broadcast queue, the way SWIM does:
//
//   - a node whose probe of a peer failed marks it suspect and gossips
//     "suspect P at incarnation i, by me" (every failed probe, so a node
//     that cleared an earlier rumor hears the next one);
//   - a node that hears it marks P suspect, naming the suspecter, and
//     passes the rumor on (new information only);
//   - P, hearing it is suspected at its current incarnation, refutes: it
//     gossips "alive P at i+1", and every node that hears a refutation
//     newer than what it knows marks P alive again.
//
// A node's own successful probe of P clears P as well (probed), and so do
// memberlist's alive events (a rejoin, new metadata). The incarnation is
// this layer's own (memberlist's is not exposed); a rumor of an earlier
// boot of P is moot.

// Rumor kinds.
const (
	rumorSuspect = "suspect"
	rumorAlive   = "alive"
)

// rumorV1 is the first byte of a rumor's user message; other first bytes
// are not ours and are ignored.
const rumorV1 byte = 1

// rumor is a suspicion of a member, or the member's refutation of one.
type rumor struct {
	Kind string `msgpack:"k"`
	// Node is the member the rumor is about; Boot its boot (Meta.Boot).
	Node string `msgpack:"n"`
	Boot int64  `msgpack:"b"`
	// Inc is the member's incarnation the rumor is about: a suspicion at
	// an incarnation older than one its refutation carried is stale.
	Inc uint64 `msgpack:"i"`
	// From is the suspecter (suspect) or the member itself (alive).
	From string `msgpack:"f"`
}

func encodeRumor(r rumor) ([]byte, error) {
	b, err := messages.MarshalMsgpack(r)
	if err != nil {
		return nil, err
	}
	return append([]byte{rumorV1}, b...), nil
}

// decodeRumor reads a user message; ok is false for anything that is not
// a well-formed rumor.
func decodeRumor(b []byte) (rumor, bool) {
	var r rumor
	if len(b) < 2 || b[0] != rumorV1 {
		return r, false
	}
	if err := messages.UnmarshalMsgpack(b[1:], &r); err != nil {
		return r, false
	}
	ok := (r.Kind == rumorSuspect || r.Kind == rumorAlive) && r.Node != "" && r.From != ""
	return r, ok
}

// rumorBroadcast is one rumor on memberlist's broadcast queue; a newer
// rumor about the same member replaces it (NamedBroadcast).
type rumorBroadcast struct {
	node string
	msg  []byte
}

func (b *rumorBroadcast) Name() string                          { return "rumor/" + b.node }
func (b *rumorBroadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b *rumorBroadcast) Message() []byte                       { return b.msg }
func (b *rumorBroadcast) Finished()                             {}

// newRumorQueue is the node's broadcast queue. Its size estimate counts
// the peers this node does not hold dead (not memberlist's count: the
// queue is made before memberlist, and memberlist calls it from its own
// goroutines).
func newRumorQueue(n *Node, retransmitMult int) *memberlist.TransmitLimitedQueue {
	return &memberlist.TransmitLimitedQueue{RetransmitMult: retransmitMult, NumNodes: func() int {
		n.mu.Lock()
		defer n.mu.Unlock()
		live := 1
		for _, p := range n.peers {
			if p.state != PeerDead {
				live++
			}
		}
		return live
	}}
}

// spread queues a rumor for gossip. It must not be called with n.mu held
// (the queue's size estimate takes it).
func (n *Node) spread(r rumor) {
	b, err := encodeRumor(r)
	if err != nil {
		n.log.Warn("cluster: cannot encode a rumor", "err", err)
		return
	}
	n.rumors.QueueBroadcast(&rumorBroadcast{node: r.Node, msg: b})
}

// hearRumor applies a rumor another node gossiped.
func (n *Node) hearRumor(r rumor) {
	if r.Node == n.cfg.NodeID {
		if r.Kind == rumorSuspect {
			n.refute(r)
		}
		return
	}
	n.mu.Lock()
	p := n.peers[r.Node]
	if p == nil || p.meta.Boot != r.Boot || p.state == PeerDead {
		// unknown, of another life of the node, or dead already (a rejoin
		// starts it afresh)
		n.mu.Unlock()
		return
	}
	var changed, news bool
	switch r.Kind {
	case rumorSuspect:
		if r.Inc < p.inc {
			break // refuted already
		}
		news = r.Inc > p.inc
		p.inc = r.Inc
		if p.state == PeerAlive {
			p.state, p.suspectedBy = PeerSuspect, r.From
			changed, news = true, true
		}
	case rumorAlive:
		if r.Inc <= p.inc {
			break
		}
		p.inc, news = r.Inc, true
		if p.state == PeerSuspect {
			p.state, p.suspectedBy = PeerAlive, ""
			changed = true
		}
	}
	on := n.onPeerState
	n.mu.Unlock()
	if news { // passed on, as memberlist passes on its own suspect messages
		n.spread(r)
	}
	if !changed {
		return
	}
	if on != nil {
		on(r.Node, map[string]PeerState{rumorSuspect: PeerSuspect, rumorAlive: PeerAlive}[r.Kind])
	}
	if r.Kind == rumorSuspect {
		n.logPeerState(r.Node, PeerSuspect, r.From, "gossiped: another node's probe of it went unanswered")
	} else {
		n.logPeerState(r.Node, PeerAlive, "", "it refuted a suspicion")
	}
}

// refute answers a suspicion of this node at its current incarnation (or
// a later one, should it have restarted on the same boot's rumors) with
// an alive rumor at the next one.
func (n *Node) refute(r rumor) {
	n.mu.Lock()
	if r.Boot != n.meta.Boot || r.Inc < n.inc {
		n.mu.Unlock()
		return
	}
	n.inc = r.Inc + 1
	a := rumor{Kind: rumorAlive, Node: n.cfg.NodeID, Boot: n.meta.Boot, Inc: n.inc, From: n.cfg.NodeID}
	n.mu.Unlock()
	n.log.Info("cluster: refuting a suspicion of this node", "suspectedBy", r.From, "incarnation", a.Inc)
	n.spread(a)
}
