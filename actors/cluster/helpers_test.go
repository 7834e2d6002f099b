package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// deadline bounds a test's waits; it only stops hangs.
const deadline = 2 * time.Minute

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// freePorts returns a port p such that p (TCP and UDP) and p+1 (TCP) are
// free on 127.0.0.1: gossip on p, the wire on p+1.
func freePorts(t *testing.T) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p >= 65534 {
			continue
		}
		ok := true
		for _, c := range []struct{ net, addr string }{{"tcp", addr(p)}, {"tcp", addr(p + 1)}} {
			l, err := net.Listen(c.net, c.addr)
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		u, err := net.ListenPacket("udp", addr(p))
		if err != nil {
			continue
		}
		u.Close()
		if ok {
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}

func addr(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }

func testRuntime(t *testing.T, sc *script.Scenario, opts ...actors.Option) *actors.Runtime {
	t.Helper()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = "script"
	cfg.Supervision.ShutdownTimeout = config.Duration(2 * time.Second)
	opts = append([]actors.Option{actors.WithBackends(transports.NewRegistry(script.New(script.WithScenario(sc))))}, opts...)
	rt, err := actors.New(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	})
	return rt
}

// feeding is a runtime whose live events go to its node's Publish once
// the node is set (as serve wires them): the runtime comes first.
type feeding struct {
	rt   *actors.Runtime
	node atomic.Pointer[Node]
}

func feedingRuntime(t *testing.T, sc *script.Scenario) *feeding {
	f := &feeding{}
	f.rt = testRuntime(t, sc, actors.WithEventListener(func(sid string, ev messages.PersistedEvent) {
		if n := f.node.Load(); n != nil {
			n.Publish(sid, ev)
		}
	}))
	return f
}

// spec is one node of a test cluster.
type spec struct {
	id       string
	roots    []string
	backends []string
	sc       *script.Scenario // the script backend's scenario (default: script's own)
}

// startNodes starts the nodes, each joining the first, and waits until
// every node has verified every other.
func startNodes(t *testing.T, specs []spec, tweak func(i int, c *Config)) []*Node {
	t.Helper()
	nodes := make([]*Node, len(specs))
	var seed string
	for i, s := range specs {
		f := feedingRuntime(t, s.sc)
		p := freePorts(t)
		c := Config{NodeID: s.id, ListenAddr: addr(p), Roots: s.roots, Backends: s.backends, Profile: ProfileLocal,
			SyncInterval: 500 * time.Millisecond, RetryJoinMin: 100 * time.Millisecond, RetryJoinMax: time.Second,
			Runtime: f.rt, Scope: "daemon", DefaultBackend: "script"}
		if seed != "" {
			c.Join = []string{seed}
		}
		if tweak != nil {
			tweak(i, &c)
		}
		n, err := Start(c)
		require.NoError(t, err, "node %s", s.id)
		f.node.Store(n)
		t.Cleanup(func() { _ = n.Close() })
		if seed == "" {
			seed = c.ListenAddr
		}
		nodes[i] = n
	}
	for _, n := range nodes {
		require.Eventually(t, func() bool { return len(n.livePeers()) == len(nodes)-1 }, deadline, 50*time.Millisecond,
			"node %s never verified its peers: %v", n.ID(), n.peerStates())
	}
	return nodes
}

func describe(n *Node) string { return fmt.Sprintf("%s %v", n.ID(), n.peerStates()) }

func mkdir(p string) error { return os.MkdirAll(p, 0o755) }

// crash stops a node the way a dead process does (Kill).
func (n *Node) crash() { n.Kill() }
