package cluster

import (
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/anthdm/hollywood/actor"
	"github.com/hashicorp/memberlist"

	"github.com/codesession/codesession/messages"
)

// gossip is the node as memberlist's Delegate and EventDelegate. Its
// methods run on memberlist's goroutines and must not block: they only
// update the peer table under the node's mutex and start goroutines.
type gossip Node

func (g *gossip) node() *Node { return (*Node)(g) }

// NodeMeta is the node's advertised metadata.
func (g *gossip) NodeMeta(limit int) []byte {
	m := g.node().Meta()
	b, err := messages.MarshalMsgpack(m)
	if err != nil || len(b) > limit {
		// checked at Start; a later load update cannot grow it past the limit
		m.Roots = nil
		b, _ = messages.MarshalMsgpack(m)
	}
	return b
}

// User messages and state exchange are not used: ops and feeds go over
// hollywood, membership only carries who is where.
func (g *gossip) NotifyMsg([]byte)                           {}
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (g *gossip) LocalState(join bool) []byte                { return nil }
func (g *gossip) MergeRemoteState(buf []byte, join bool)     {}

func (g *gossip) NotifyJoin(m *memberlist.Node)   { g.node().memberChanged(m, PeerAlive) }
func (g *gossip) NotifyUpdate(m *memberlist.Node) { g.node().memberChanged(m, stateOf(m)) }
func (g *gossip) NotifyLeave(m *memberlist.Node)  { g.node().memberChanged(m, PeerDead) }

func stateOf(m *memberlist.Node) PeerState {
	switch m.State {
	case memberlist.StateSuspect:
		return PeerSuspect
	case memberlist.StateDead, memberlist.StateLeft:
		return PeerDead
	}
	return PeerAlive
}

// memberChanged applies a membership event to the peer table. A peer
// that (re)joins with a new boot must answer a ping over the wire before
// it takes placements or calls.
func (n *Node) memberChanged(m *memberlist.Node, state PeerState) {
	if m.Name == n.cfg.NodeID {
		return
	}
	var meta Meta
	if err := messages.UnmarshalMsgpack(m.Meta, &meta); err != nil || meta.ID != m.Name || meta.Addr == "" {
		n.log.Warn("cluster: a member with unreadable metadata is ignored", "member", m.Name)
		return
	}
	n.mu.Lock()
	p := n.peers[m.Name]
	if p == nil {
		p = &peer{recs: map[string]messages.SessionRecord{}}
		n.peers[m.Name] = p
	}
	rebooted := p.meta.Boot != meta.Boot || p.meta.Addr != meta.Addr
	was := p.state
	p.meta, p.state = meta, state
	p.pid = actor.NewPID(meta.Addr, actorKind+"/"+actorID)
	if m.Addr != nil && m.Port != 0 {
		p.gossip = net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))
	}
	if rebooted || state == PeerDead {
		p.verified = false
	}
	// a graceful leave is the node's word that it is gone: retrying it
	// forever only fills the log (a join address is still retried)
	p.left = meta.Leaving
	verify, left := state != PeerDead && !p.verified, p.left
	n.mu.Unlock()
	if was != state {
		n.log.Info("cluster: member "+state.String(), "member", m.Name, "addr", meta.Addr)
	}
	if verify {
		go n.verify(m.Name)
	}
	if state == PeerDead && !left {
		select { // the join loop tries it again now, then with backoff
		case n.rejoin <- struct{}{}:
		default:
		}
	}
}

// peerStates is a snapshot for listings and tests: node id -> state,
// verified.
func (n *Node) peerStates() map[string]PeerState {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]PeerState, len(n.peers))
	for id, p := range n.peers {
		out[id] = p.state
	}
	return out
}

// Member is one node as this node sees it.
type Member struct {
	Meta
	State string `json:"state"` // self, alive, suspect or dead
	// Verified: it answered over the wire since it (re)joined.
	Verified bool `json:"verified"`
}

// Members lists this node and every peer it knows, by id.
func (n *Node) Members() []Member {
	out := []Member{{Meta: n.Meta(), State: "self", Verified: true}}
	n.mu.Lock()
	for _, p := range n.peers {
		out = append(out, Member{Meta: p.meta, State: p.state.String(), Verified: p.verified})
	}
	n.mu.Unlock()
	slices.SortFunc(out[1:], func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}
