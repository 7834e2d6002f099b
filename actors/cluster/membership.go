package cluster

import (
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/hashicorp/memberlist"

	"github.com/codesession/codesession/messages"
)

// gossip is the node as memberlist's Delegate, EventDelegate and
// PingDelegate. Its methods run on memberlist's goroutines and must not block: they only
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

// NotifyMsg takes a user message: the only ones are rumors of suspicion
// (suspicion.go); ops and feeds go over hollywood. Anything else is
// ignored.
func (g *gossip) NotifyMsg(b []byte) {
	r, ok := decodeRumor(b)
	if !ok {
		g.node().log.Debug("cluster: a gossiped user message that is not a rumor is ignored", "bytes", len(b))
		return
	}
	g.node().hearRumor(r)
}

// GetBroadcasts hands memberlist the rumors to piggyback on its gossip.
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte {
	return g.node().rumors.GetBroadcasts(overhead, limit)
}

// State exchange is not used: membership only carries who is where.
func (g *gossip) LocalState(join bool) []byte            { return nil }
func (g *gossip) MergeRemoteState(buf []byte, join bool) {}

// Memberlist tells its EventDelegate of joins, leaves and deaths, and of
// alive messages that change a node's metadata, never of suspicion; and
// the Node it hands over carries a State that is never updated (its
// internal nodeState has its own). So an update is an alive node, and
// suspicion comes from this node's own probes (suspectOf, probed) and
// from the rumors of the others' (suspicion.go).
func (g *gossip) NotifyJoin(m *memberlist.Node)   { g.node().memberChanged(m, PeerAlive) }
func (g *gossip) NotifyUpdate(m *memberlist.Node) { g.node().memberChanged(m, PeerAlive) }
func (g *gossip) NotifyLeave(m *memberlist.Node)  { g.node().memberChanged(m, PeerDead) }

// AckPayload: no payload rides on probe acks.
func (g *gossip) AckPayload() []byte { return nil }

// NotifyPingComplete: memberlist (v0.7.0, state.go probeNode) calls it
// when this node's direct UDP probe of other is acked in time; a probe
// saved by an indirect or TCP ack does not call it.
func (g *gossip) NotifyPingComplete(other *memberlist.Node, _ time.Duration, _ []byte) {
	g.node().probed(other.Name)
}

// suspectLine is what memberlist (v0.7.0, state.go probeNode) logs when
// this node's probe of a member failed directly, indirectly and over TCP,
// just before it marks the member suspect: the one place it says so.
const (
	suspectPrefix = "[INFO] memberlist: Suspect "
	suspectSuffix = " has failed, no acks received"
)

// probeLog is memberlist's log output: each line goes on to next, and the
// line of a failed probe marks its member suspect.
type probeLog struct {
	n    *Node
	next io.Writer
}

func (l probeLog) Write(b []byte) (int, error) {
	if name, ok := suspectOf(string(b)); ok {
		l.n.suspected(name)
	}
	return l.next.Write(b)
}

// suspectOf reads the member's name from memberlist's failed-probe line.
func suspectOf(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), suspectPrefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, suspectSuffix)
	return name, ok && name != ""
}

// suspected marks a live peer suspect: this node's probe of it went
// unanswered. It stays suspect until a probe of it succeeds again
// (probed), it refutes the suspicion, an alive message changes its
// metadata, or it is declared dead. Every failed probe is gossiped (even
// of a peer already suspect here), so a node that cleared an earlier
// rumor by its own probe hears of the next failure too.
func (n *Node) suspected(name string) {
	n.mu.Lock()
	p := n.peers[name]
	if p == nil || p.state == PeerDead {
		n.mu.Unlock()
		return
	}
	changed := p.state == PeerAlive
	if changed {
		p.state, p.suspectedBy = PeerSuspect, n.cfg.NodeID
	}
	r := rumor{Kind: rumorSuspect, Node: name, Boot: p.meta.Boot, Inc: p.inc, From: n.cfg.NodeID}
	on := n.onPeerState
	n.mu.Unlock()
	n.spread(r)
	if !changed {
		return
	}
	if on != nil {
		on(name, PeerSuspect)
	}
	n.logPeerState(name, PeerSuspect, n.cfg.NodeID, "this node's probe of it went unanswered")
}

// probed marks a suspect peer alive again: this node's probe of it was
// answered, whoever suspected it.
func (n *Node) probed(name string) {
	n.mu.Lock()
	p := n.peers[name]
	changed := p != nil && p.state == PeerSuspect
	if changed {
		p.state, p.suspectedBy = PeerAlive, ""
	}
	on := n.onPeerState
	n.mu.Unlock()
	if !changed {
		return
	}
	if on != nil {
		on(name, PeerAlive)
	}
	n.logPeerState(name, PeerAlive, "", "this node's probe of it was answered")
}

// logPeerState logs a change of a peer between alive and suspect, naming
// the suspecter (this node's id, or the one whose suspicion was gossiped
// here), e.g.
//
//	msg="cluster: peer state changed" node=n2 peer=n3 state=suspect suspectedBy=n1 why="gossiped: ..."
//
// at debug: a peer flips with every unanswered probe and its refutation,
// seconds apart on a flaky link, which is noise at info. Joins and deaths
// stay at info (memberChanged).
func (n *Node) logPeerState(name string, state PeerState, suspectedBy, why string) {
	attrs := []any{"peer", name, "state", state.String()}
	if state == PeerSuspect {
		attrs = append(attrs, "suspectedBy", suspectedBy)
	}
	n.log.Debug("cluster: peer state changed", append(attrs, "why", why)...)
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
	p.meta, p.state, p.suspectedBy = meta, state, ""
	if rebooted { // a new life starts at incarnation 0 (suspicion.go)
		p.inc = 0
	}
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
	on := n.onPeerState
	n.mu.Unlock()
	if was != state {
		if was == PeerSuspect && state == PeerAlive && !rebooted {
			n.logPeerState(m.Name, state, "", "memberlist says it is alive (its metadata changed)")
		} else { // a join, a rejoin in a new life, or a death
			n.log.Info("cluster: member "+state.String(), "member", m.Name, "addr", meta.Addr)
		}
		if on != nil {
			on(m.Name, state)
		}
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
	// SuspectedBy names the node whose probe of it failed while it is
	// suspect: this node's own id, or another's whose suspicion was
	// gossiped here.
	SuspectedBy string `json:"suspectedBy,omitempty"`
	// Verified: it answered over the wire since it (re)joined.
	Verified bool `json:"verified"`
}

// Members lists this node and every peer it knows, by id.
func (n *Node) Members() []Member {
	out := []Member{{Meta: n.Meta(), State: "self", Verified: true}}
	n.mu.Lock()
	for _, p := range n.peers {
		out = append(out, Member{Meta: p.meta, State: p.state.String(), SuspectedBy: p.suspectedBy, Verified: p.verified})
	}
	n.mu.Unlock()
	slices.SortFunc(out[1:], func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}
