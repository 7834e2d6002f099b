package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/cluster"
	"github.com/codesession/codesession/messages"
)

// netnsLab is a test's own network: one namespace per node, a hub
// namespace whose bridge joins the nodes' cluster interfaces (10.77.0.i),
// and a management veth from the test's namespace to each node
// (10.<mgmt>.i.2) that carries the HTTP API, so a partition of the cluster
// network leaves every node drivable. Everything is deleted on cleanup,
// failed test or not.
type netnsLab struct {
	t   *testing.T
	tag string
	// mgmt is the second octet of the management links (10.<mgmt>.i.2 is
	// node i): the lab's own (claimMgmt), since those links live in the
	// test's namespace, which a lab in another process (another go test
	// on this machine) shares
	mgmt   int
	hub    string
	nodes  []string // namespace per node, index i is node i+1
	hubEnd []string // the hub-side interface of node i+1's cluster link
}

// needNetns says why the lab cannot be built here ("" when it can).
func needNetns() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip command (Debian package iproute2)"
	}
	return ""
}

func skipOrFailWithoutNetns(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs three daemons in network namespaces")
	}
	if why := needNetns(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", why)
		}
		t.Skip(why)
	}
}

func (l *netnsLab) ip(args ...string) {
	l.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(l.t, err, "ip %s: %s", strings.Join(args, " "), out)
}

// newLab is a lab with no nodes yet; its namespaces are deleted on
// cleanup.
func newLab(t *testing.T) *netnsLab {
	var b [3]byte
	_, _ = rand.Read(b[:])
	l := &netnsLab{t: t, tag: hex.EncodeToString(b[:])}
	release := claimMgmt(t, &l.mgmt)
	t.Cleanup(func() {
		defer release()
		// deleting a namespace deletes the interfaces in it; the test's
		// own management ends go with their peers
		for i, ns := range l.nodes {
			_ = exec.Command("ip", "netns", "del", ns).Run()
			// a namespace lives on while anything holds it (a closing
			// TUN, a socket): its management link's end here goes now,
			// so the next lab finds 10.<mgmt>.i.1 free
			_ = exec.Command("ip", "link", "del", fmt.Sprintf("m%d%s", i+1, l.tag)).Run()
		}
		if l.hub != "" {
			_ = exec.Command("ip", "netns", "del", l.hub).Run()
		}
	})
	return l
}

// claimMgmt sets *mgmt to the first of 78..127 that no other lab holds:
// one whose lock file (in the temp dir) this process could lock, and
// whose 10.<mgmt>.0.0/16 is on no interface here (a lab of a process that
// takes no lock). With one fixed 10.78, two go test runs at once on one
// machine (a CI rehearsal beside a developer's run) each put 10.78.1.1 on
// a link of its own, and one's API calls could go to the other's node or
// nowhere (a run beside a rehearsal was refused by its own n1 for seconds
// after n1 listened). release unlocks.
func claimMgmt(t *testing.T, mgmt *int) (release func()) {
	t.Helper()
	taken := func(o int) bool {
		addrs, err := net.InterfaceAddrs()
		require.NoError(t, err)
		_, mine, _ := net.ParseCIDR(fmt.Sprintf("10.%d.0.0/16", o))
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && mine.Contains(ipn.IP) {
				return true
			}
		}
		return false
	}
	for o := 78; o <= 127; o++ {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("codesession-netns-lab-10.%d.lock", o)), os.O_CREATE|os.O_RDWR, 0o600)
		require.NoError(t, err)
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil || taken(o) {
			f.Close()
			continue
		}
		*mgmt = o
		return func() { f.Close() } // closing unlocks
	}
	t.Fatal("no free management network 10.78..127.x.x: fifty labs at once?")
	return nil
}

// addNode makes node i's namespace (1-based) with its management link
// from the test's namespace (10.<mgmt>.i.1 here, 10.<mgmt>.i.2 there) and returns
// its name; the cluster link is the caller's.
func (l *netnsLab) addNode(i int) string {
	ns := fmt.Sprintf("csn%d%s", i, l.tag)
	l.nodes = append(l.nodes, ns)
	l.ip("netns", "add", ns)
	l.ip("-n", ns, "link", "set", "lo", "up")
	mine, theirs := fmt.Sprintf("m%d%s", i, l.tag), fmt.Sprintf("g%d%s", i, l.tag)
	l.ip("link", "add", mine, "type", "veth", "peer", "name", theirs)
	l.ip("link", "set", theirs, "netns", ns)
	l.ip("addr", "add", fmt.Sprintf("10.%d.%d.1/30", l.mgmt, i), "dev", mine)
	l.ip("link", "set", mine, "up")
	l.ip("-n", ns, "addr", "add", fmt.Sprintf("10.%d.%d.2/30", l.mgmt, i), "dev", theirs)
	l.ip("-n", ns, "link", "set", theirs, "up")
	return ns
}

// newNetnsLab is a lab of n nodes whose cluster links meet on a bridge in
// the hub namespace.
func newNetnsLab(t *testing.T, n int) *netnsLab {
	l := newLab(t)
	hub := "cshub" + l.tag
	l.ip("netns", "add", hub)
	l.hub = hub
	l.ip("-n", l.hub, "link", "add", "br0", "type", "bridge")
	l.ip("-n", l.hub, "link", "set", "br0", "up")
	for i := 1; i <= n; i++ {
		ns := l.addNode(i)
		// cluster link: node ns eth0 <-> hub port
		hubEnd, nodeEnd := fmt.Sprintf("h%d%s", i, l.tag), fmt.Sprintf("c%d%s", i, l.tag)
		l.hubEnd = append(l.hubEnd, hubEnd)
		l.ip("link", "add", hubEnd, "type", "veth", "peer", "name", nodeEnd)
		l.ip("link", "set", hubEnd, "netns", l.hub)
		l.ip("link", "set", nodeEnd, "netns", ns)
		l.ip("-n", l.hub, "link", "set", hubEnd, "master", "br0")
		l.ip("-n", l.hub, "link", "set", hubEnd, "up")
		l.ip("-n", ns, "addr", "add", fmt.Sprintf("10.77.0.%d/24", i), "dev", nodeEnd)
		l.ip("-n", ns, "link", "set", nodeEnd, "up")
	}
	return l
}

// partition cuts node i (1-based) off the cluster network, or heals it.
func (l *netnsLab) partition(i int, cut bool) {
	state := "up"
	if cut {
		state = "down"
	}
	l.ip("-n", l.hub, "link", "set", l.hubEnd[i-1], state)
}

// startNetnsNode runs node i of the lab: gossip on 10.77.0.i:7946, the
// wire on :7947, HTTP on the management address.
func (l *netnsLab) startNode(bin string, i int, root, scenario, join string) *clusterProc {
	l.t.Helper()
	return l.startNodeWith(bin, i, root, scenario, join, map[string]any{"cluster": map[string]any{"profile": "local"}}, nil)
}

// startNodeWith is startNode with the config file's content given, and
// extra environment for the daemon.
func (l *netnsLab) startNodeWith(bin string, i int, root, scenario, join string, cfg map[string]any, env []string) *clusterProc {
	t := l.t
	t.Helper()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	cfgPath := filepath.Join(dir, "config.json")
	cfgJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfgPath, cfgJSON, 0o600))
	id := fmt.Sprintf("n%d", i)
	p := &clusterProc{id: id, home: home, addr: fmt.Sprintf("10.%d.%d.2:8080", l.mgmt, i), gossip: fmt.Sprintf("10.77.0.%d:7946", i),
		prefix: []string{"ip", "netns", "exec", l.nodes[i-1]}, env: env}
	p.args = []string{"serve", "--addr", p.addr, "--insecure-remote", "--home", home, "--config", cfgPath,
		"--env", "CODESESSION_SCRIPT=" + scenario, "--node-id", id, "--cluster-listen", p.gossip, "--cluster-root", root}
	if join != "" {
		p.args = append(p.args, "--join", join)
	}
	p.start(t, bin)
	t.Cleanup(func() {
		if t.Failed() { // what the node said last, for the failure
			exited := "running"
			select {
			case <-p.done:
				exited = "exited: " + p.cmd.ProcessState.String()
			default:
			}
			lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
			t.Logf("%s (%s), its last log lines:\n%s", p.id, exited, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	return p
}

func hasVerified(p *clusterProc, t *testing.T, id string) bool {
	for _, v := range p.verifiedPeers(t) {
		if v == id {
			return true
		}
	}
	return false
}

// TestClusterPartitionHeals: three nodes in network namespaces. A session
// placed on n3 through n1; n3's cluster link is cut (the bridge port goes
// down), n1 declares n3 dead and shows its session orphaned, while n3,
// alone, runs one more turn of it; the link comes back, retry join brings
// n3 back into the cluster (no node has n3 in its --join but n1 learned of
// it), and n1 lists the one session, on n3, with every event of the
// partition readable gaplessly through n1.
func TestClusterPartitionHeals(t *testing.T) {
	skipOrFailWithoutNetns(t)
	lab := newNetnsLab(t, 3)
	bin := buildServe(t)
	scenario := writeScenario(t, opsScenario)
	roots := []string{t.TempDir(), t.TempDir(), t.TempDir()}

	n1 := lab.startNode(bin, 1, roots[0], scenario, "")
	n2 := lab.startNode(bin, 2, roots[1], scenario, n1.gossip)
	n3 := lab.startNode(bin, 3, roots[2], scenario, n1.gossip)
	waitAllVerified(t, n1, n2, n3)
	var placed cluster.Placed
	require.Nil(t, n1.api(t, "POST", "/api/code-sessions", map[string]any{"brief": "across a partition", "cwd": roots[2]}, &placed))
	require.Equal(t, "n3", placed.Node)
	sid := placed.SessionID
	var tr messages.TurnResult
	require.Nil(t, n1.api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 120000}, &tr))
	require.Equal(t, messages.KindTurnComplete, tr.Kind)

	lab.partition(3, true)
	waitFor(t, "n1 to show n3's session orphaned", func() bool {
		r, ok := n1.session(t, sid)
		return ok && r.Node == "n3" && r.Status == messages.StatusOrphaned
	})
	// n3 goes on alone
	require.Nil(t, n3.api(t, "POST", "/api/code-sessions/"+sid+"/guidance", map[string]any{"text": "during the partition"}, nil))
	require.Nil(t, n3.api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 120000}, &tr))
	require.Equal(t, messages.KindTurnComplete, tr.Kind)
	var onN3 struct {
		LastSeq uint64 `json:"lastSeq"`
	}
	require.Nil(t, n3.api(t, "GET", "/api/code-sessions/"+sid+"?limit=5000", nil, &onN3))

	lab.partition(3, false)
	waitFor(t, "n1 and n3 to verify each other again", func() bool { return hasVerified(n1, t, "n3") && hasVerified(n3, t, "n1") })
	waitFor(t, "n1 to list the session live on n3 again", func() bool {
		r, ok := n1.session(t, sid)
		return ok && r.Node == "n3" && r.Status.Live()
	})
	var list struct {
		Sessions []cluster.NodeRecord `json:"sessions"`
	}
	require.Nil(t, n1.api(t, "GET", "/api/code-sessions", nil, &list))
	require.Len(t, list.Sessions, 1, "no duplicate session after the heal")
	var view struct {
		Events  []messages.PersistedEvent `json:"events"`
		LastSeq uint64                    `json:"lastSeq"`
		Node    string                    `json:"node"`
	}
	require.Nil(t, n1.api(t, "GET", "/api/code-sessions/"+sid+"?limit=5000", nil, &view))
	assert.Equal(t, "n3", view.Node)
	assert.Equal(t, onN3.LastSeq, view.LastSeq, "n1 reads every event n3 made during the partition")
	sawGuidance := false
	for i, ev := range view.Events {
		require.Equal(t, uint64(i+1), ev.Seq, "one gapless log")
		if ev.Event.Type == messages.EvGuidance && strings.Contains(ev.Event.Text, "during the partition") {
			sawGuidance = true
		}
	}
	assert.True(t, sawGuidance, "the partition's turn is in the log")
	var st messages.StopResult
	require.Nil(t, n1.api(t, "POST", "/api/code-sessions/"+sid+"/stop", map[string]any{"outcome": "success"}, &st))
	assert.False(t, st.AlreadyStopped)
}

// TestClusterThreeNodesThreeHundredSessions: three nodes in network
// namespaces; 300 sessions started through n1, 100 on each node's
// workspace (placement by root), each driven to turn_complete through n1;
// every node lists all 300, each once and on the node that holds it.
func TestClusterThreeNodesThreeHundredSessions(t *testing.T) {
	skipOrFailWithoutNetns(t)
	const perNode, workers = 100, 6
	lab := newNetnsLab(t, 3)
	bin := buildServe(t)
	scenario := writeScenario(t, opsScenario)
	roots := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	n1 := lab.startNode(bin, 1, roots[0], scenario, "")
	n2 := lab.startNode(bin, 2, roots[1], scenario, n1.gossip)
	n3 := lab.startNode(bin, 3, roots[2], scenario, n1.gossip)
	nodes := []*clusterProc{n1, n2, n3}
	for _, n := range nodes {
		waitFor(t, n.id+" to verify both peers", func() bool { return len(n.verifiedPeers(t)) == 2 })
	}

	want := map[string]string{} // session -> node
	var mu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	var failures atomic.Int32
	t0 := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				node := i % 3
				var placed cluster.Placed
				if e := n1.api(t, "POST", "/api/code-sessions", map[string]any{"brief": fmt.Sprintf("s%d", i), "cwd": roots[node]}, &placed); e != nil {
					t.Errorf("start %d: %v", i, e)
					failures.Add(1)
					continue
				}
				var tr messages.TurnResult
				if e := n1.api(t, "POST", "/api/code-sessions/"+placed.SessionID+"/read-turn", map[string]any{"timeoutMs": 120000}, &tr); e != nil || tr.Kind != messages.KindTurnComplete {
					t.Errorf("read-turn %d: %v %s", i, e, tr.Kind)
					failures.Add(1)
				}
				mu.Lock()
				want[placed.SessionID] = nodes[node].id
				mu.Unlock()
			}
		})
	}
	for i := range 3 * perNode {
		if failures.Load() > 5 {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	require.Zero(t, failures.Load())
	t.Logf("300 sessions started and driven to a turn through n1 in %s", time.Since(t0).Round(time.Millisecond))
	require.Len(t, want, 3*perNode)
	for _, n := range nodes {
		waitFor(t, n.id+" to list all 300 sessions on their nodes", func() bool {
			var list struct {
				Sessions []cluster.NodeRecord `json:"sessions"`
			}
			if n.api(t, "GET", "/api/code-sessions", nil, &list) != nil || len(list.Sessions) != len(want) {
				return false
			}
			for _, r := range list.Sessions {
				if want[r.SessionID] != r.Node {
					return false
				}
			}
			return true
		})
	}
}

// TestClusterConvergesInTheWrongStartOrder: three processes in network
// namespaces, started the wrong way round: n2 and n3 first, each told to
// join n1, which is not up yet, then n1 last and told to join no one.
// Retry join brings all three into one cluster (the restart left
// three one-node clusters for good), and a session placed from n3 onto n2
// is listed by n1.
func TestClusterConvergesInTheWrongStartOrder(t *testing.T) {
	skipOrFailWithoutNetns(t)
	lab := newNetnsLab(t, 3)
	bin := buildServe(t)
	scenario := writeScenario(t, opsScenario)
	roots := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	const seed = "10.77.0.1:7946" // n1's gossip address, before n1 runs
	n3 := lab.startNode(bin, 3, roots[2], scenario, seed)
	n2 := lab.startNode(bin, 2, roots[1], scenario, seed)
	waitFor(t, "n2 to log a failed join of the absent seed", func() bool { return strings.Contains(n2.stderr.String(), "retry join: not every address answered") })
	n1 := lab.startNode(bin, 1, roots[0], scenario, "")
	nodes := []*clusterProc{n1, n2, n3}
	for _, n := range nodes {
		waitFor(t, n.id+" to verify both peers", func() bool { return len(n.verifiedPeers(t)) == 2 })
	}
	var placed cluster.Placed
	require.Nil(t, n3.api(t, "POST", "/api/code-sessions", map[string]any{"brief": "after a late seed", "cwd": roots[1]}, &placed))
	require.Equal(t, "n2", placed.Node)
	waitFor(t, "n1 to list the session on n2", func() bool { r, ok := n1.session(t, placed.SessionID); return ok && r.Node == "n2" })
}
