package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startNode starts one node on gossip port p of 127.0.0.1 with the loopback
// profile and quick join retries.
func startNode(t *testing.T, id string, p int, join ...string) *Node {
	t.Helper()
	c := Config{NodeID: id, ListenAddr: addr(p), Join: join, Backends: []string{"script"}, Profile: ProfileLocal,
		SyncInterval: 500 * time.Millisecond, RetryJoinMin: 100 * time.Millisecond, RetryJoinMax: time.Second,
		Runtime: testRuntime(t, nil), Scope: "daemon", DefaultBackend: "script"}
	n, err := Start(c)
	require.NoError(t, err, "node %s", id)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func converged(t *testing.T, nodes ...*Node) {
	t.Helper()
	for _, n := range nodes {
		require.Eventually(t, func() bool { return len(n.livePeers()) == len(nodes)-1 }, deadline, 50*time.Millisecond,
			"never verified its peers: %s", describe(n))
	}
}

// TestRetryJoinConvergesInAnyStartOrder: c starts first joining b, b
// joining the seed a, and a, the seed, starts last with no join list: with
// one join attempt each (the old behaviour) c and b would stay singletons
// (c's seed b was not up, b's seed a was not up).
func TestRetryJoinConvergesInAnyStartOrder(t *testing.T) {
	pa, pb, pc := freePorts(t), freePorts(t), freePorts(t)
	c := startNode(t, "c", pc, addr(pb))
	time.Sleep(300 * time.Millisecond) // c's first attempts fail: nobody is up
	b := startNode(t, "b", pb, addr(pa))
	time.Sleep(300 * time.Millisecond)
	a := startNode(t, "a", pa) // the seed, late, joining nobody
	converged(t, a, b, c)
}

// TestRetryJoinFindsALearnedPeerAgain: b joined the seed a, then b's
// process died and came back on the same address with no join list. Only
// a knows where b is: a's join loop must retry the peer it learned of.
func TestRetryJoinFindsALearnedPeerAgain(t *testing.T) {
	pa, pb := freePorts(t), freePorts(t)
	a := startNode(t, "a", pa)
	b := startNode(t, "b", pb, addr(pa))
	converged(t, a, b)
	b.crash()
	require.Eventually(t, func() bool { return a.peerStates()["b"] == PeerDead }, deadline, 50*time.Millisecond,
		"a never declared b dead: %s", describe(a))
	b2 := startNode(t, "b", pb) // no --join: it does not know a
	converged(t, a, b2)
}

// TestRetryJoinForgetsAPeerThatLeft: b joined a and then left gracefully
// (Close: memberlist's leave). a stops trying b's learned address (the old
// join loop retried it forever, a warning per attempt); a join address
// that left is still tried.
func TestRetryJoinForgetsAPeerThatLeft(t *testing.T) {
	pa, pb, pc := freePorts(t), freePorts(t), freePorts(t)
	a := startNode(t, "a", pa)
	b := startNode(t, "b", pb, addr(pa))
	c := startNode(t, "c", pc, addr(pa))
	converged(t, a, b, c)
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return a.peerStates()["b"] == PeerDead }, deadline, 50*time.Millisecond,
		"a never saw b leave: %s", describe(a))
	require.Empty(t, a.missingAddrs(), "a peer that left is not retried")
	require.NoError(t, a.Close())
	require.Eventually(t, func() bool { return c.peerStates()["a"] == PeerDead }, deadline, 50*time.Millisecond,
		"c never saw a leave: %s", describe(c))
	require.Equal(t, []string{addr(pa)}, c.missingAddrs(), "a join address is retried even after it left")
}
