package cluster

import (
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/cluster/clustertest"
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

	// b's memberlist logs that its probe of c failed: c's sessions are
	// marked suspect at once (TestSuspectNodeIsListedSuspectBeforeDead
	// makes the probe fail for real)
	_, err = probeLog{n: b, next: io.Discard}.Write([]byte("[INFO] memberlist: Suspect c has failed, no acks received\n"))
	require.NoError(t, err)
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

// TestSuspectNodeIsListedSuspectBeforeDead: c's gossip is cut off in a
// two-node cluster. a's probe of c fails and c's session is listed
// suspect at that moment, before it is listed dead; when the link comes
// back c is listed alive again. Memberlist never tells its EventDelegate
// of suspicion, so before the probe signal the listing went from alive
// straight to dead. Each change of a's view of c lists the session right
// then (onPeerState runs on the goroutine that made the change, and a's
// suspicion timer starts only after it returns), so the verdict does not
// depend on catching a window by polling.
func TestSuspectNodeIsListedSuspectBeforeDead(t *testing.T) {
	base := t.TempDir()
	roots := []string{filepath.Join(base, "wa"), filepath.Join(base, "wc")}
	for _, r := range roots {
		require.NoError(t, mkdir(r))
	}
	cuts := make([]*clustertest.FaultTransport, 2)
	nodes := startNodes(t, []spec{{id: "a", roots: roots[:1]}, {id: "c", roots: roots[1:]}}, func(i int, c *Config) {
		ft, err := clustertest.NewFaultTransport(c.ListenAddr)
		require.NoError(t, err)
		cuts[i] = ft
		c.Transport = ft
	})
	a := nodes[0]
	ctx := ctxT(t)
	placed, err := a.Start(ctx, messages.Start{Brief: "long", Cwd: roots[1]}, "")
	require.NoError(t, err)
	require.Equal(t, "c", placed.Node)
	listed := func() string {
		recs, err := a.Sessions(ctx)
		if err != nil {
			return "error: " + err.Error()
		}
		for _, r := range recs {
			if r.SessionID == placed.SessionID {
				return r.NodeState
			}
		}
		return "missing"
	}
	require.Eventually(t, func() bool { return listed() == "alive" }, deadline, 20*time.Millisecond,
		"a never listed c's session: %s", describe(a))

	var mu sync.Mutex
	var seen []string                   // the listing of c's session at each change of a's view of c
	verdicts := make(chan PeerState, 8) // suspect and dead, in order
	a.mu.Lock()
	a.onPeerState = func(id string, s PeerState) {
		if id != "c" {
			return
		}
		l := listed()
		mu.Lock()
		seen = append(seen, s.String()+"/"+l)
		mu.Unlock()
		if s != PeerAlive {
			select {
			case verdicts <- s:
			default: // never block memberlist (only the first verdicts of a cut are read)
			}
		}
	}
	a.mu.Unlock()
	history := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}

	cutUntilSuspect := func() {
		t.Helper()
		select {
		case s := <-verdicts:
			require.Equal(t, PeerSuspect, s, "a's first verdict on the cut-off c: %v", history())
		case <-ctx.Done():
			t.Fatalf("a never suspected the cut-off c: %v", history())
		}
	}
	healed := func() {
		t.Helper()
		cuts[1].Cut.Store(false)
		require.Eventually(t, func() bool { return listed() == "alive" && len(a.livePeers()) == 1 }, deadline, 20*time.Millisecond,
			"c's session never listed alive after the heal: %v %s", history(), describe(a))
	}

	// a cut that lasts: suspect, then dead (orphaned), then alive after
	// the heal (c rejoins). It comes first: after a cut that heals at once
	// a's memberlist may still hold c suspect (until c's refutation
	// reaches it) and declare it dead with no probe of a's failing.
	cuts[1].Cut.Store(true)
	cutUntilSuspect()
	require.Eventually(t, func() bool { return slices.Contains(history(), "dead/dead") }, deadline, 20*time.Millisecond,
		"a never declared the cut-off c dead: %v %s", history(), describe(a))
	h := history()
	dead := slices.Index(h, "dead/dead")
	require.Positive(t, dead, "%v", h)
	assert.Equal(t, "suspect/suspect", h[dead-1], "listed suspect the moment a suspects c, before dead: %v", h)
	healed()
	t.Logf("lasting cut: %v", history())

	// a cut that heals as soon as a suspects c: back to alive (by a probe
	// answered again, or by a rejoin should the dead verdict come first)
	mu.Lock()
	seen = nil
	mu.Unlock()
	for len(verdicts) > 0 {
		<-verdicts
	}
	cuts[1].Cut.Store(true)
	cutUntilSuspect()
	require.Equal(t, "suspect/suspect", history()[0], "c's session is listed suspect the moment a suspects c")
	healed()
	t.Logf("short cut: %v", history())
}
