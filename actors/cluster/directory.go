package cluster

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/messages"
)

// reachable is the PID of a verified, live peer, or the error that says
// why it cannot be called.
func (n *Node) reachable(node, op string) (*actor.PID, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.peers[node]
	switch {
	case p == nil:
		return nil, messages.Errorf(messages.CodeNotFound, op, "no node %q in the cluster", node)
	case p.state == PeerDead:
		return nil, &messages.Error{Code: messages.CodeUnavailable, Op: op, Retryable: true,
			Message: "node " + node + " is unreachable (its lease expired); its sessions are orphaned until it returns"}
	case op != opPing && !p.verified:
		return nil, &messages.Error{Code: messages.CodeUnavailable, Op: op, Retryable: true,
			Message: "node " + node + " has not answered over the wire yet (a certificate problem, or it is still starting)"}
	}
	return p.pid, nil
}

// verify pings a peer over the wire until it answers or is gone; only then
// does it take placements and calls.
func (n *Node) verify(node string) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var meta Meta
		err := n.call(ctx, node, opPing, struct{}{}, &meta, 0)
		cancel()
		n.mu.Lock()
		p := n.peers[node]
		if p == nil || p.state == PeerDead || n.closed {
			n.mu.Unlock()
			return
		}
		if err == nil && meta.ID == node && meta.Boot == p.meta.Boot {
			p.verified = true
			n.mu.Unlock()
			n.log.Info("cluster: member verified over the wire", "member", node)
			n.refresh(node)
			return
		}
		n.mu.Unlock()
		if attempt%10 == 0 {
			n.log.Warn("cluster: a member does not answer over the wire", "member", node, "err", err)
		}
		select {
		case <-n.stop:
			return
		case <-time.After(min(30*time.Second, time.Second<<min(attempt, 5))):
			// backing off matters: hollywood dials inside its one router,
			// so each failed dial stalls every remote send for seconds
		}
	}
}

// syncLoop keeps the node's advertised load and the other nodes' records
// fresh.
func (n *Node) syncLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		n.updateLoad()
		n.refreshAll()
	}
}

func (n *Node) updateLoad() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	live, err := n.cfg.Runtime.LiveSessions(ctx)
	if err != nil {
		return
	}
	n.mu.Lock()
	changed := n.meta.Load != len(live)
	n.meta.Load = len(live)
	n.mu.Unlock()
	if changed {
		if err := n.ml.UpdateNode(5 * time.Second); err != nil {
			n.log.Debug("cluster: could not gossip the new load", "err", err)
		}
	}
}

// livePeers lists verified peers that are not dead.
func (n *Node) livePeers() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ids []string
	for id, p := range n.peers {
		if p.state != PeerDead && p.verified {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// refreshTimeout bounds one listing of a peer's records: a peer that is
// gone but not yet declared dead must not hold a listing up for long.
const refreshTimeout = 3 * time.Second

// refresh lists a peer's records into the directory.
func (n *Node) refresh(node string) {
	ctx, cancel := context.WithTimeout(WithScope(context.Background(), directoryScope), refreshTimeout)
	defer cancel()
	var recs []messages.SessionRecord
	if err := n.call(ctx, node, opList, struct{}{}, &recs, 0); err != nil {
		n.log.Debug("cluster: cannot list a member's sessions", "member", node, "err", err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.peers[node]
	if p == nil {
		return
	}
	p.recs = make(map[string]messages.SessionRecord, len(recs))
	for _, r := range recs {
		p.recs[r.SessionID] = r
		n.owner[r.SessionID] = node
	}
}

// refreshAll lists every live peer's records, in parallel.
func (n *Node) refreshAll() {
	var wg sync.WaitGroup
	for _, id := range n.livePeers() {
		wg.Go(func() { n.refresh(id) })
	}
	wg.Wait()
}

// Publish sends one of this node's live events to every other node's
// feed. It never blocks (the runtime calls it on a session's goroutine).
func (n *Node) Publish(sid string, ev messages.PersistedEvent) {
	n.mu.Lock()
	if n.closed { // the wire is stopping or stopped (the daemon drains after the node left)
		n.mu.Unlock()
		return
	}
	var pids []*actor.PID
	for _, p := range n.peers {
		if p.state != PeerDead && p.verified {
			pids = append(pids, p.pid)
		}
	}
	n.mu.Unlock()
	f := &Feed{Node: n.cfg.NodeID, SessionID: sid, Event: ev}
	for _, pid := range pids {
		if err := n.wire.send(pid, f, n.self); err != nil {
			n.log.Debug("cluster: cannot publish an event", "err", err)
		}
	}
}

// feed takes another node's live event: its session is recorded as that
// node's, and the event goes to the local feed. The first event of a
// session this node has no record of is held, with every later one, until
// the record is fetched from the owner (learnRecord): the local feed
// decides from the record which scopes see the session, so an event handed
// on before it would be shown to the default token only and lost to the
// session's own scope.
func (n *Node) feed(f *Feed) {
	if !messages.ValidSessionID(f.SessionID) {
		n.log.Warn("cluster: a feed event with a malformed session id is dropped", "node", f.Node)
		return
	}
	n.mu.Lock()
	p := n.peers[f.Node]
	if p == nil || p.state == PeerDead {
		n.mu.Unlock()
		return
	}
	if n.dropFeed != nil && n.dropFeed(f) {
		n.mu.Unlock()
		return
	}
	n.owner[f.SessionID] = f.Node
	n.deliverFeedLocked(f.SessionID, f.Event)
	_, known := p.recs[f.SessionID]
	q, held := n.held[f.SessionID]
	switch {
	case held && len(q) >= maxHeld:
		n.log.Warn("cluster: too many feed events held for a session whose record is being fetched; one is dropped", "node", f.Node, "session", f.SessionID)
	case held:
		n.held[f.SessionID] = append(q, f.Event)
	case !known:
		n.held[f.SessionID] = []messages.PersistedEvent{f.Event}
		go n.learnRecord(f.Node, f.SessionID)
	}
	on := n.onFeed
	n.mu.Unlock()
	if recordChanging[f.Event.Event.Type] && (known || held) {
		n.scheduleRecord(f.Node, f.SessionID)
	}
	if on != nil && known && !held {
		on(f.Node, f.SessionID, f.Event)
	}
}

// maxHeld bounds the feed events held for one session while its record is
// fetched (learnRecord).
const maxHeld = 4096

// learnRecordTries is how many times learnRecord asks the owner for a
// record before it hands the held events on without it.
const learnRecordTries = 3

// learnRecord fetches the record of a session this node first heard of by
// its feed (so that, should its node die soon, it can still be shown
// orphaned here, and the local feed knows its scope), then hands the
// events held meanwhile to the local feed in order. Events that come while
// it hands them on join the queue; the session's events go straight
// through only once the queue is empty, so their order is kept.
func (n *Node) learnRecord(node, sid string) {
	for try := 0; try < learnRecordTries; try++ {
		ctx, cancel := context.WithTimeout(WithScope(context.Background(), directoryScope), refreshTimeout)
		var rec messages.SessionRecord
		err := n.call(ctx, node, opRecord, getRequest{SessionID: sid}, &rec, 0)
		cancel()
		if err == nil && rec.SessionID == sid {
			n.mu.Lock()
			if p := n.peers[node]; p != nil {
				if old, ok := p.recs[sid]; !ok || old.Version <= rec.Version {
					p.recs[sid] = rec
				}
			}
			n.mu.Unlock()
			break
		}
		n.log.Warn("cluster: cannot fetch the record of a session first heard of by its feed", "member", node, "session", sid, "try", try+1, "err", err)
		select {
		case <-n.stop:
			return
		case <-time.After(time.Duration(try+1) * 200 * time.Millisecond):
		}
	}
	for {
		n.mu.Lock()
		q := n.held[sid]
		if len(q) == 0 || n.closed {
			delete(n.held, sid)
			n.mu.Unlock()
			return
		}
		n.held[sid] = make([]messages.PersistedEvent, 0, 4)
		on := n.onFeed
		n.mu.Unlock()
		if on != nil {
			for _, ev := range q {
				on(node, sid, ev)
			}
		}
	}
}

// ownerOf says which node holds sid: this one ("" with local true), a
// peer, or not_found. A session the directory does not know yet is looked
// for on every live peer.
func (n *Node) ownerOf(ctx context.Context, sid, op string) (node string, local bool, err error) {
	if _, err := n.cfg.Runtime.Store().GetMeta(ctx, sid); err == nil {
		return "", true, nil
	} else if !messages.IsCode(err, messages.CodeNotFound) {
		return "", false, err
	}
	n.mu.Lock()
	node = n.owner[sid]
	n.mu.Unlock()
	if node != "" {
		return node, false, nil
	}
	n.refreshAll()
	n.mu.Lock()
	node = n.owner[sid]
	n.mu.Unlock()
	if node == "" {
		return "", false, messages.Errorf(messages.CodeNotFound, op, "no node of the cluster holds session %s", sid)
	}
	return node, false, nil
}

// NodeRecord is a session record with the node that holds it and what
// membership says of that node now.
type NodeRecord struct {
	messages.SessionRecord
	Node string `json:"node"`
	// NodeState is "self", "alive", "suspect" (a probe of it went
	// unanswered, this node's or, by gossip, another's: the record may be
	// stale, ops may fail) or "dead" (its live sessions show orphaned).
	NodeState string `json:"nodeState"`
	// SuspectedBy, while NodeState is suspect, names the node whose probe
	// of the holder failed: this node, or another whose suspicion reached
	// this one by gossip.
	SuspectedBy string `json:"suspectedBy,omitempty"`
}

// Sessions lists every session of the cluster, newest first: this node's
// from its store, the others' from the directory. It makes no remote call:
// the directory is kept current by membership (a peer's records are listed
// when it is verified, and again every sync interval in the background) and
// by the feed (a status-affecting event of a session fetches its record),
// so a peer that stops answering never holds a listing up. A suspect
// peer's sessions are marked suspect at once (whichever node's probe
// failed); a dead peer's live ones show orphaned.
func (n *Node) Sessions(ctx context.Context) ([]NodeRecord, error) {
	local, err := n.cfg.Runtime.Store().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NodeRecord, 0, len(local))
	seen := map[string]bool{}
	for _, r := range local {
		out = append(out, NodeRecord{SessionRecord: r, Node: n.cfg.NodeID, NodeState: "self"})
		seen[r.SessionID] = true
	}
	n.mu.Lock()
	for id, p := range n.peers {
		for sid, r := range p.recs {
			if seen[sid] || n.owner[sid] != id {
				continue
			}
			if p.state == PeerDead && r.Status.Live() {
				r.Status = messages.StatusOrphaned
			}
			out = append(out, NodeRecord{SessionRecord: r.Clone(), Node: id, NodeState: p.state.String(), SuspectedBy: p.suspectedBy})
		}
	}
	n.mu.Unlock()
	slices.SortStableFunc(out, func(a, b NodeRecord) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.SessionID, b.SessionID)
	})
	return out, nil
}

// recordChanging are the event types after which a session's record
// changes (status, rounds, posture, runs): the directory fetches it anew.
var recordChanging = map[messages.EventType]bool{
	messages.EvStarted: true, messages.EvTurnStarted: true, messages.EvTurnEnd: true,
	messages.EvEnded: true, messages.EvError: true, messages.EvPosture: true,
	messages.EvReleased: true, messages.EvOrphaned: true, messages.EvAdopted: true,
}

// recordDebounce is how long after a record-changing event its record is
// fetched: a burst of events costs one fetch.
const recordDebounce = 100 * time.Millisecond

// scheduleRecord fetches sid's record from node once the burst of events
// that changed it is over (in the background: never on a listing's path).
func (n *Node) scheduleRecord(node, sid string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.fetching[sid] {
		n.refetch[sid] = n.fetching[sid]
		return
	}
	n.fetching[sid] = true
	time.AfterFunc(recordDebounce, func() { n.fetchRecord(node, sid) })
}

func (n *Node) fetchRecord(node, sid string) {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return
	}
	ctx, cancel := context.WithTimeout(WithScope(context.Background(), directoryScope), refreshTimeout)
	defer cancel()
	var rec messages.SessionRecord
	err := n.call(ctx, node, opRecord, getRequest{SessionID: sid}, &rec, 0)
	n.mu.Lock()
	again := n.refetch[sid]
	delete(n.refetch, sid)
	delete(n.fetching, sid)
	if p := n.peers[node]; err == nil && p != nil && rec.SessionID == sid {
		if old, ok := p.recs[sid]; !ok || old.Version <= rec.Version {
			p.recs[sid] = rec
			n.owner[sid] = node
		}
	}
	n.mu.Unlock()
	if err != nil {
		n.log.Debug("cluster: cannot fetch a session's record", "member", node, "session", sid, "err", err)
	}
	if again {
		n.scheduleRecord(node, sid)
	}
}

// peerRecord is a peer's session record as the directory last learned it.
func (n *Node) peerRecord(sid string) (messages.SessionRecord, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.peers[n.owner[sid]]; p != nil {
		if rec, ok := p.recs[sid]; ok {
			return rec, true
		}
	}
	for _, p := range n.peers {
		if rec, ok := p.recs[sid]; ok {
			return rec, true
		}
	}
	return messages.SessionRecord{}, false
}
