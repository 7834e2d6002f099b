package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/anthdm/hollywood/remote"
	"github.com/hashicorp/memberlist"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/cluster"
	"github.com/codesession/codesession/actors/cluster/clustertest"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

// SuiteCluster measures routing between nodes of a cluster.
const SuiteCluster = "cluster"

// clusterConcurrency is how many callers the ops/s figures use.
const clusterConcurrency = 8

// runCluster starts three nodes on 127.0.0.1 (each with its own runtime,
// the script backend and memberlist's loopback profile), one session on
// node c, and measures, in the same run:
//
//   - a routed turn (guide + read-turn through node a, served on c) next to
//     the same turn driven on c itself, and next to a raw hollywood remote
//     Request round trip between two engines over loopback;
//   - routed ops/s (set-posture through a, 8 callers) next to raw remote
//     Requests/s with the same callers.
//
// Its checks are about correctness (every routed result is the session's,
// every op succeeded); speed is only reported, as ratios.
func runCluster(ctx context.Context, o Options, dir string) (*Result, error) {
	p := newProgress(o, SuiteCluster)
	cycles := max(10, o.RoutingReads/10)
	ops := max(40, o.RoutingReads)
	res := &Result{Suite: SuiteCluster, Params: fmt.Sprintf("3 nodes on 127.0.0.1 (script backend); %d routed turns, %d routed ops at %d callers, against a raw hollywood remote Request", cycles, ops, clusterConcurrency)}

	nodes, stop, err := startBenchCluster(dir)
	if err != nil {
		return nil, err
	}
	defer stop()
	a, c := nodes[0], nodes[2]
	p.printf("cluster of 3 up")

	placed, err := a.Start(ctx, messages.Start{Brief: "bench", Cwd: filepath.Join(dir, "c"), MaxPosture: messages.PostureFull}, "")
	if err != nil {
		return nil, fmt.Errorf("start through the cluster: %w", err)
	}
	res.check("placed on the node holding the workspace", placed.Node == "c", "placed on %q", placed.Node)
	sid := placed.SessionID
	var first messages.TurnResult
	if _, err := a.Do(ctx, sid, messages.OpReadTurn, messages.ReadTurn{SessionID: sid}, &first); err != nil {
		return nil, err
	}

	// one turn: guide (queue) then read-turn, through node n
	turn := func(n *cluster.Node) (messages.TurnResult, error) {
		var ok messages.OKResult
		if _, err := n.Do(ctx, sid, messages.OpGuide, messages.Guide{SessionID: sid, Text: "next"}, &ok); err != nil {
			return messages.TurnResult{}, err
		}
		var r messages.TurnResult
		_, err := n.Do(ctx, sid, messages.OpReadTurn, messages.ReadTurn{SessionID: sid}, &r)
		return r, err
	}
	var routed, local latencies
	bad := 0
	for i := range cycles {
		for _, side := range []struct {
			n   *cluster.Node
			lat *latencies
		}{{a, &routed}, {c, &local}} {
			t0 := time.Now()
			r, err := turn(side.n)
			side.lat.since(t0)
			if err != nil || r.Kind != messages.KindTurnComplete || r.SessionID != sid {
				if bad == 0 {
					res.note("first failed turn: %v %s %s", err, r.Kind, r.Message)
				}
				bad++
			}
		}
		if i%10 == 0 {
			p.printf("turns %d/%d", i, cycles)
		}
	}
	res.check("routed and local turns completed", bad == 0, "%d of %d turns failed", bad, 2*cycles)

	raw, rawRate, err := rawRemote(ctx, cycles, ops)
	if err != nil {
		return nil, err
	}
	rs, ls, ws := routed.summary(), local.summary(), raw.summary()
	res.vs("routed turn (guide + read-turn) p50", ms(rs.p50), UnitMs, "the same turn on the owning node p50", ms(ls.p50))
	res.vs("routed turn p99", ms(rs.p99), UnitMs, "the same turn on the owning node p99", ms(ls.p99))
	res.vs("routed turn p50 (vs raw remote)", ms(rs.p50), UnitMs, "raw hollywood remote Request p50", ms(ws.p50))

	// routed ops/s: set-posture through a, alternating postures
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	per := ops / clusterConcurrency
	t0 := time.Now()
	for w := range clusterConcurrency {
		wg.Go(func() {
			for i := range per {
				posture := messages.PostureDefault
				if (w+i)%2 == 0 {
					posture = messages.PosturePlan
				}
				var r messages.SetPostureResult
				if _, err := a.Do(ctx, sid, messages.OpSetPosture, messages.SetPosture{SessionID: sid, Posture: posture}, &r); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	routedRate := float64(per*clusterConcurrency) / time.Since(t0).Seconds()
	res.check("routed ops succeeded", failed == 0, "%d of %d set-posture ops failed", failed, per*clusterConcurrency)
	res.vs(fmt.Sprintf("routed ops/s (%d callers)", clusterConcurrency), routedRate, UnitPerSec, "raw hollywood remote Requests/s", rawRate)

	var st messages.StopResult
	if _, err := a.Do(ctx, sid, messages.OpStop, messages.Stop{SessionID: sid}, &st); err != nil {
		return nil, err
	}
	listingDuringDeath(ctx, res, a, c)
	if err := clusterFaults(ctx, o, res, dir); err != nil {
		return nil, err
	}
	res.note("a routed turn is two routed ops (guide, read-turn), each a msgpack envelope each way plus the owning runtime's work; the raw baseline is one protobuf message each way and no work")
	return res, nil
}

// startBenchCluster starts nodes a, b and c, each holding dir/<id>.
func startBenchCluster(dir string) ([]*cluster.Node, func(), error) {
	quiet := slog.New(slog.NewTextHandler(devNull{}, &slog.HandlerOptions{Level: slog.LevelError}))
	return startBenchClusterWith(dir, []string{"a", "b", "c"}, 3, quiet, nil)
}

// startBenchClusterWith is startBenchCluster with the nodes' ids, the
// nodes' logger and a hook that sees each node's config before it starts;
// it waits until the first good nodes have verified each other (the
// others join the first's gossip, but may never be verified).
func startBenchClusterWith(dir string, ids []string, good int, nodeLog *slog.Logger, hook func(*cluster.Config) error) ([]*cluster.Node, func(), error) {
	quiet := slog.New(slog.NewTextHandler(devNull{}, &slog.HandlerOptions{Level: slog.LevelError}))
	var nodes []*cluster.Node
	var rts []*actors.Runtime
	stop := func() {
		for _, n := range nodes {
			_ = n.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, rt := range rts {
			_ = rt.Close(ctx)
		}
	}
	var seed string
	for _, id := range ids {
		root := filepath.Join(dir, id)
		if err := os.MkdirAll(root, 0o700); err != nil {
			stop()
			return nil, nil, err
		}
		cfg := config.Default()
		cfg.Home = filepath.Join(dir, "home-"+id)
		cfg.DefaultBackend = "script"
		cfg.Learning.Distill = false
		cfg.DefaultMaxRounds = 0 // every measured turn is a round
		rt, err := actors.New(cfg, actors.WithBackends(transports.NewRegistry(script.New())), actors.WithLogger(quiet), actors.WithoutLearning())
		if err != nil {
			stop()
			return nil, nil, err
		}
		rts = append(rts, rt)
		gossip, err := freeGossipPort()
		if err != nil {
			stop()
			return nil, nil, err
		}
		nc := cluster.Config{NodeID: id, ListenAddr: gossip, Roots: []string{root}, Backends: []string{"script"},
			Profile: cluster.ProfileLocal, Runtime: rt, Scope: "bench", DefaultBackend: "script", Logger: nodeLog}
		if seed != "" {
			nc.Join = []string{seed}
		}
		if hook != nil {
			if err := hook(&nc); err != nil {
				stop()
				return nil, nil, err
			}
		}
		n, err := cluster.Start(nc)
		if err != nil {
			stop()
			return nil, nil, err
		}
		nodes = append(nodes, n)
		if seed == "" {
			seed = gossip
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, n := range nodes[:good] {
		for verified(n) < good-1 {
			if time.Now().After(deadline) {
				stop()
				return nil, nil, fmt.Errorf("bench: the cluster did not form in time")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nodes, stop, nil
}

func verified(n *cluster.Node) int {
	k := 0
	for _, m := range n.Members() {
		if m.State == "alive" && m.Verified {
			k++
		}
	}
	return k
}

// freeGossipPort finds a 127.0.0.1 port free for gossip (TCP and UDP)
// with the next one free for the wire.
func freeGossipPort() (string, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		next, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1)))
		if err != nil {
			continue
		}
		next.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		u.Close()
		return addr, nil
	}
	return "", fmt.Errorf("bench: no free port pair on 127.0.0.1")
}

// echo answers every BytesValue with itself.
type echo struct{}

func (echo) Receive(c *actor.Context) {
	if m, ok := c.Message().(*wrapperspb.BytesValue); ok {
		c.Respond(m)
	}
}

// rawRemote measures hollywood's own remote Request between two engines
// over loopback: n sequential round trips, then Requests/s from
// clusterConcurrency callers making ops in all.
func rawRemote(ctx context.Context, n, ops int) (*latencies, float64, error) {
	var engines []*actor.Engine
	var remotes []*remote.Remote
	defer func() {
		for _, r := range remotes {
			r.Stop().Wait()
		}
	}()
	for range 2 {
		addr, err := freeGossipPort()
		if err != nil {
			return nil, 0, err
		}
		r := remote.New(addr, remote.NewConfig().WithBufferSize(cluster.BufferSize))
		e, err := actor.NewEngine(actor.NewEngineConfig().WithRemote(r))
		if err != nil {
			return nil, 0, err
		}
		engines, remotes = append(engines, e), append(remotes, r)
	}
	pid := engines[1].Spawn(func() actor.Receiver { return echo{} }, "echo")
	msg := &wrapperspb.BytesValue{Value: make([]byte, 64)}
	call := func() error {
		_, err := engines[0].Request(pid, msg, 30*time.Second).Result()
		return err
	}
	if err := call(); err != nil { // the first dials
		return nil, 0, fmt.Errorf("raw remote request: %w", err)
	}
	lat := &latencies{}
	for range n {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		t0 := time.Now()
		if err := call(); err != nil {
			return nil, 0, fmt.Errorf("raw remote request: %w", err)
		}
		lat.since(t0)
	}
	per := ops / clusterConcurrency
	var wg sync.WaitGroup
	t0 := time.Now()
	for range clusterConcurrency {
		wg.Go(func() {
			for range per {
				_ = call()
			}
		})
	}
	wg.Wait()
	return lat, float64(per*clusterConcurrency) / time.Since(t0).Seconds(), nil
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

// listingDuringDeath measures a's listing with every node alive, then while
// c is dead but not yet declared so (killed: no leave message, its lease
// running out). The listing reads the directory, so the two match; the old
// per-request fan-out waited out its call timeout on c (3 s) every time.
func listingDuringDeath(ctx context.Context, res *Result, a, c *cluster.Node) {
	list := func(lat *latencies) bool {
		t0 := time.Now()
		_, err := a.Sessions(ctx)
		lat.since(t0)
		return err == nil
	}
	var alive, dying latencies
	ok := true
	for range 50 {
		ok = list(&alive) && ok
	}
	c.Kill()
	declared := func() bool {
		for _, m := range a.Members() {
			if m.ID == "c" {
				return m.State == "dead"
			}
		}
		return true
	}
	deadline := time.Now().Add(time.Minute)
	n := 0
	for !declared() && n < 2000 && time.Now().Before(deadline) {
		ok = list(&dying) && ok
		n++
		time.Sleep(5 * time.Millisecond)
	}
	res.check("listings during a node's death answered", ok && n > 0, "%d listings while c was dying", n)
	al, dl := alive.summary(), dying.summary()
	res.vs("listing while a node is dying (not yet declared dead) p99", ms(dl.p99), UnitMs, "the same listing with every node alive p99", ms(al.p99))
	res.vs("listing while a node is dying p50", ms(dl.p50), UnitMs, "with every node alive p50", ms(al.p50))
	res.note("%d listings on a between c's kill and a's dead verdict", n)
}

// gossipCounter counts memberlist's verdicts in the nodes' debug log: a
// probe that failed (a peer made suspect), a suspicion of itself refuted,
// a probe answered only over memberlist's TCP fallback (its UDP ping and
// ack took longer than the probe timeout, or were lost).
type gossipCounter struct {
	failed, refuted, tcpOnly atomic.Int64
}

func (g *gossipCounter) Enabled(context.Context, slog.Level) bool { return true }
func (g *gossipCounter) Handle(_ context.Context, r slog.Record) error {
	switch {
	case strings.Contains(r.Message, "has failed, no acks received"):
		g.failed.Add(1)
	case strings.Contains(r.Message, "Refuting a suspect message"):
		g.refuted.Add(1)
	case strings.Contains(r.Message, "but UDP probes failed"):
		g.tcpOnly.Add(1)
	}
	return nil
}
func (g *gossipCounter) WithAttrs([]slog.Attr) slog.Handler { return g }
func (g *gossipCounter) WithGroup(string) slog.Handler      { return g }

// localRound is memberlist's probe interval in the local profile: one
// gossip round, the unit convergence is counted in.
var localRound = memberlist.DefaultLocalConfig().ProbeInterval

func rounds(d time.Duration) float64 { return float64(d) / float64(localRound) }

// faultCluster is three nodes (a, b, c) whose gossip runs over
// fault transports (clustertest).
type faultCluster struct {
	nodes []*cluster.Node
	fts   []*clustertest.FaultTransport
	count *gossipCounter
	stop  func()
	// formed is how long the three took to verify each other from the
	// first node's start.
	formed time.Duration
}

func startFaultCluster(dir string) (*faultCluster, error) {
	fc := &faultCluster{count: &gossipCounter{}}
	t0 := time.Now()
	nodes, stop, err := startBenchClusterWith(dir, []string{"a", "b", "c"}, 3, slog.New(fc.count), func(nc *cluster.Config) error {
		ft, err := clustertest.NewFaultTransport(nc.ListenAddr)
		if err != nil {
			return err
		}
		fc.fts = append(fc.fts, ft)
		nc.Transport = ft
		return nil
	})
	if err != nil {
		return nil, err
	}
	fc.formed = time.Since(t0)
	fc.nodes, fc.stop = nodes, stop
	return fc, nil
}

// memberState is what n says of id ("" when it does not know it).
func memberState(n *cluster.Node, id string) (string, bool) {
	for _, m := range n.Members() {
		if m.ID == id {
			return m.State, m.Verified
		}
	}
	return "", false
}

// waitUntil polls cond every 20 ms; the deadline only stops a hang.
func waitUntil(ctx context.Context, limit time.Duration, cond func() bool) (time.Duration, bool) {
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > limit || ctx.Err() != nil {
			return time.Since(t0), false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(t0), true
}

// clusterFaults adds the fault rows: gossip under 300 ms delay and 10%
// loss against the same cluster clean, a partition and its heal counted in
// gossip rounds, and sessions spread over the three nodes against the
// same sessions on one node.
func clusterFaults(ctx context.Context, o Options, res *Result, dir string) error {
	fc, err := startFaultCluster(filepath.Join(dir, "faults"))
	if err != nil {
		return err
	}
	defer fc.stop()
	a, c := fc.nodes[0], fc.nodes[2]
	cRoot := filepath.Join(dir, "faults", "c")
	placed, err := a.Start(ctx, messages.Start{Brief: "faults", Cwd: cRoot, MaxPosture: messages.PostureFull}, "")
	if err != nil {
		return fmt.Errorf("start through the fault cluster: %w", err)
	}
	sid := placed.SessionID
	var tr messages.TurnResult
	if _, err := a.Do(ctx, sid, messages.OpReadTurn, messages.ReadTurn{SessionID: sid}, &tr); err != nil {
		return err
	}

	// the same window of gossip clean and under delay and loss, with a
	// routed read of c's session every 50 ms
	const window = 15 * time.Second
	type tally struct{ failed, refuted, tcpOnly int64 }
	phase := func() (g tally, lat *latencies, bad int) {
		f0, r0, t0 := fc.count.failed.Load(), fc.count.refuted.Load(), fc.count.tcpOnly.Load()
		lat = &latencies{}
		for end := time.Now().Add(window); time.Now().Before(end) && ctx.Err() == nil; {
			t0 := time.Now()
			if _, _, err := a.Get(ctx, sid, 0, 1); err != nil {
				bad++
			}
			lat.since(t0)
			time.Sleep(50 * time.Millisecond)
		}
		return tally{fc.count.failed.Load() - f0, fc.count.refuted.Load() - r0, fc.count.tcpOnly.Load() - t0}, lat, bad
	}
	clean, cleanLat, cleanBad := phase()
	for _, ft := range fc.fts {
		ft.Delay.Store(int64(300 * time.Millisecond))
		ft.LossPermille.Store(100)
	}
	slow, slowLat, slowBad := phase()
	deadUnderDelay := false
	for _, n := range fc.nodes {
		for _, m := range n.Members() {
			deadUnderDelay = deadUnderDelay || m.State == "dead"
		}
	}
	for _, ft := range fc.fts {
		ft.Delay.Store(0)
		ft.LossPermille.Store(0)
	}
	res.check("routed reads answered with gossip clean and under 300 ms delay / 10% loss", cleanBad == 0 && slowBad == 0,
		"%d and %d reads failed", cleanBad, slowBad)
	res.check("no node declared dead under 300 ms gossip delay / 10% loss", !deadUnderDelay, "dead verdict seen: %v", deadUnderDelay)
	// memberlist probes one peer per round on each node
	probes := 3 * rounds(window)
	res.vs(fmt.Sprintf("probes answered only over TCP in %s at 300 ms / 10%%", window), float64(slow.tcpOnly), UnitCount, "probes made (3 nodes, one a round)", probes)
	res.vs("probes failed (a peer made suspect) at 300 ms / 10%", float64(slow.failed), UnitCount, "probes made", probes)
	res.vs("suspicions of itself refuted at 300 ms / 10%", float64(slow.refuted), UnitCount, "probes made", probes)
	res.note("the same %s with gossip clean: %d probes answered only over TCP, %d failed, %d suspicions refuted", window, clean.tcpOnly, clean.failed, clean.refuted)
	cs, ss := cleanLat.summary(), slowLat.summary()
	res.vs("routed read p50 while gossip is at 300 ms / 10%", ms(ss.p50), UnitMs, "the same read with gossip clean p50", ms(cs.p50))

	// partition: c's gossip is cut; a declares it dead, c runs a turn
	// alone; the cut heals and a verifies c again
	fc.fts[2].Cut.Store(true)
	// while waiting for a's dead verdict, note when a and b each first
	// held c suspect, and whose probe they name: one of them learns it
	// from the other's gossip when its own probe has not failed yet
	b := fc.nodes[1]
	cut := time.Now()
	suspectAt := map[string]time.Duration{}
	suspecter := map[string]string{}
	toDead, ok := waitUntil(ctx, 2*time.Minute, func() bool {
		for _, n := range []*cluster.Node{a, b} {
			if _, seen := suspectAt[n.ID()]; seen {
				continue
			}
			for _, m := range n.Members() {
				if m.ID == "c" && (m.State == "suspect" || m.State == "dead") {
					suspectAt[n.ID()], suspecter[n.ID()] = time.Since(cut), m.SuspectedBy
				}
			}
		}
		s, _ := memberState(a, "c")
		return s == "dead"
	})
	res.check("a declared the cut-off c dead", ok, "c %v after %s", fmtState(a, "c"), toDead.Round(time.Millisecond))
	var ok2 messages.OKResult
	if _, err := c.Do(ctx, sid, messages.OpGuide, messages.Guide{SessionID: sid, Text: "alone"}, &ok2); err != nil {
		return err
	}
	if _, err := c.Do(ctx, sid, messages.OpReadTurn, messages.ReadTurn{SessionID: sid}, &tr); err != nil {
		return err
	}
	onC, _, err := c.Get(ctx, sid, 0, 1)
	if err != nil {
		return err
	}
	fc.fts[2].Cut.Store(false)
	toHeal, ok := waitUntil(ctx, 2*time.Minute, func() bool { s, v := memberState(a, "c"); return s == "alive" && v })
	res.check("a verified c again after the heal", ok, "c %v after %s", fmtState(a, "c"), toHeal.Round(time.Millisecond))
	_, okList := waitUntil(ctx, time.Minute, func() bool {
		recs, err := a.Sessions(ctx)
		n := 0
		live := false
		for _, r := range recs {
			if r.SessionID == sid {
				n++
				live = r.Node == "c" && r.Status.Live()
			}
		}
		return err == nil && n == 1 && live
	})
	res.check("after the heal a lists c's session once, live on c", okList, "listed once and live: %v", okList)
	afterHeal, _, err := a.Get(ctx, sid, 0, 5000)
	gaplessLog := err == nil && afterHeal.LastSeq == onC.LastSeq
	for i, ev := range afterHeal.Events {
		gaplessLog = gaplessLog && ev.Seq == uint64(i+1)
	}
	res.check("every event c made alone is read through a, gapless", gaplessLog, "a read up to %d of %d (%v)", afterHeal.LastSeq, onC.LastSeq, err)
	mc := memberlist.DefaultLocalConfig()
	suspicion := float64(mc.SuspicionMult) * float64(localRound) // log10(3) < 1: memberlist scales by 1
	res.vs("partition: gossip rounds from the cut to a's dead verdict on c", rounds(toDead), UnitCount,
		"the local profile's suspicion timeout, in rounds", suspicion/float64(localRound))
	if len(suspectAt) == 2 {
		res.vs("partition: gossip rounds from the cut until a and b both hold c suspect", rounds(max(suspectAt["a"], suspectAt["b"])), UnitCount,
			"rounds from the cut to a's dead verdict on c", rounds(toDead))
		res.note("c made suspect on a after %s (by %q) and on b after %s (by %q): a suspecter other than the node itself came by gossip",
			suspectAt["a"].Round(time.Millisecond), suspecter["a"], suspectAt["b"].Round(time.Millisecond), suspecter["b"])
	}
	res.vs("heal: gossip rounds from the heal to a verifying c again", rounds(toHeal), UnitCount,
		"rounds the three took to form and verify each other at start", rounds(fc.formed))

	// sessions spread over the nodes through a, against the same sessions
	// on a alone
	perNode := min(100, max(1, o.Sessions/3))
	roots := []string{filepath.Join(dir, "faults", "a"), filepath.Join(dir, "faults", "b"), cRoot}
	drive := func(cwd func(i int) string, count int) (time.Duration, map[string]string, int) {
		jobs := make(chan int)
		var wg sync.WaitGroup
		var mu sync.Mutex
		where := map[string]string{}
		bad := 0
		t0 := time.Now()
		for range clusterConcurrency {
			wg.Go(func() {
				for i := range jobs {
					p, err := a.Start(ctx, messages.Start{Brief: fmt.Sprintf("spread %d", i), Cwd: cwd(i), MaxPosture: messages.PostureFull}, "")
					var tr messages.TurnResult
					if err == nil {
						_, err = a.Do(ctx, p.SessionID, messages.OpReadTurn, messages.ReadTurn{SessionID: p.SessionID}, &tr)
					}
					var st messages.StopResult
					if err == nil {
						_, err = a.Do(ctx, p.SessionID, messages.OpStop, messages.Stop{SessionID: p.SessionID}, &st)
					}
					mu.Lock()
					if err != nil || tr.Kind != messages.KindTurnComplete {
						bad++
					} else {
						where[p.SessionID] = p.Node
					}
					mu.Unlock()
				}
			})
		}
		for i := range count {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		return time.Since(t0), where, bad
	}
	n := 3 * perNode
	spread, where, badSpread := drive(func(i int) string { return roots[i%3] }, n)
	alone, _, badAlone := drive(func(int) string { return roots[0] }, n)
	res.check(fmt.Sprintf("%d sessions through a, %d per node, started, driven a turn and stopped", n, perNode), badSpread == 0 && badAlone == 0,
		"%d spread and %d on a failed", badSpread, badAlone)
	listed := 0
	for _, node := range fc.nodes {
		_, ok := waitUntil(ctx, time.Minute, func() bool {
			recs, err := node.Sessions(ctx)
			if err != nil {
				return false
			}
			k := 0
			for _, r := range recs {
				if w, ok := where[r.SessionID]; ok && w == r.Node {
					k++
				}
			}
			return k == len(where)
		})
		if ok {
			listed++
		}
	}
	res.check(fmt.Sprintf("every node lists the %d spread sessions once each, on their nodes", n), listed == 3 && len(where) == n,
		"%d of 3 nodes did (%d sessions placed)", listed, len(where))
	res.vs(fmt.Sprintf("%d sessions over 3 nodes through a, per session (%d callers)", n, clusterConcurrency), ms(spread)/float64(n), UnitMs,
		"the same sessions on a alone, per session", ms(alone)/float64(n))
	plainRead := func() error { _, _, err := a.Get(ctx, sid, 0, 1); return err }
	if err := clusterTLSRefusal(ctx, res, filepath.Join(dir, "tls"), plainRead); err != nil {
		return err
	}
	res.note("fault rows: gossip (memberlist) runs over a transport the bench cuts, delays and thins (each node's outgoing packets and stream dials); the wire (hollywood) is neither cut nor delayed here, so the routed read under gossip delay shows that ops do not wait on gossip, and the partition is of membership. TestClusterUnderDelayAndLoss and TestClusterPartitionHeals (cmd/codesession) cut, delay and drop every packet, wire included, between processes in network namespaces. Probes made is at most one a round per node (memberlist stretches its rounds when its probes fail)")
	return nil
}

func fmtState(n *cluster.Node, id string) string {
	s, v := memberState(n, id)
	return fmt.Sprintf("%s (verified %v)", s, v)
}

// benchCA is a certificate authority made for the mTLS rows.
type benchCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newBenchCA(name string) (*benchCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &benchCA{cert: cert, key: key, pool: pool}, nil
}

// tlsFor is the wire's mutual TLS for a node on 127.0.0.1 with a
// certificate this CA signs.
func (ca *benchCA) tlsFor(name string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return cluster.MutualTLSConfig(tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca.pool), nil
}

// clusterTLSRefusal starts a, b and c with certificates of the cluster CA,
// x with one of another CA and y with none, all in one gossip (no gossip
// key): it counts what the good nodes refused and times a routed read over
// mutual TLS against the same read over plaintext (plainRead, on the fault
// cluster), the two alternated.
func clusterTLSRefusal(ctx context.Context, res *Result, dir string, plainRead func() error) error {
	ca, err := newBenchCA("cluster")
	if err != nil {
		return err
	}
	other, err := newBenchCA("other")
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(devNull{}, &slog.HandlerOptions{Level: slog.LevelError}))
	nodes, stop, err := startBenchClusterWith(dir, []string{"a", "b", "c", "x", "y"}, 3, quiet, func(nc *cluster.Config) error {
		var err error
		switch nc.NodeID {
		case "x":
			nc.TLS, err = other.tlsFor(nc.NodeID)
		case "y":
		default:
			nc.TLS, err = ca.tlsFor(nc.NodeID)
		}
		return err
	})
	if err != nil {
		return err
	}
	defer stop()
	a, bad := nodes[0], nodes[3:]
	// wait until a knows x and y in its gossip; they are then probed
	waitUntil(ctx, time.Minute, func() bool {
		sx, _ := memberState(a, "x")
		sy, _ := memberState(a, "y")
		return sx == "alive" && sy == "alive"
	})
	attempts, refused := 0, 0
	for _, b := range bad {
		for _, try := range []func() error{
			func() error {
				_, err := a.Start(ctx, messages.Start{Brief: "to " + b.ID(), Cwd: filepath.Join(dir, b.ID())}, b.ID())
				return err
			},
			func() error {
				_, err := b.Start(ctx, messages.Start{Brief: "from " + b.ID(), Cwd: filepath.Join(dir, "a")}, "a")
				return err
			},
		} {
			attempts++
			if try() != nil {
				refused++
			}
		}
	}
	verifiedBad := 0
	for _, g := range nodes[:3] {
		for _, m := range g.Members() {
			if (m.ID == "x" || m.ID == "y") && m.Verified {
				verifiedBad++
			}
		}
	}
	for _, b := range bad {
		verifiedBad += verified(b)
	}
	res.check("mTLS: no good node verified x (other CA) or y (no certificate), and they verified no one", verifiedBad == 0, "%d verifications", verifiedBad)
	res.vs("mTLS: starts onto or through x and y refused", float64(refused), UnitCount, "starts tried", float64(attempts))

	placed, err := a.Start(ctx, messages.Start{Brief: "tls", Cwd: filepath.Join(dir, "c")}, "")
	if err != nil || placed.Node != "c" {
		res.check("mTLS: a session placed from a onto c", false, "placed on %q: %v", placed.Node, err)
		return nil
	}
	lat, plain := &latencies{}, &latencies{}
	bad2 := 0
	for range 200 {
		t0 := time.Now()
		if _, _, err := a.Get(ctx, placed.SessionID, 0, 1); err != nil {
			bad2++
		}
		lat.since(t0)
		t0 = time.Now()
		if plainRead() != nil {
			bad2++
		}
		plain.since(t0)
	}
	res.check("mTLS: routed reads among the good nodes (and plaintext ones) answered", bad2 == 0, "%d of 400 failed", bad2)
	res.vs("routed read p50 over mutual TLS", ms(lat.summary().p50), UnitMs, "the same read over plaintext (the fault cluster, alternated) p50", ms(plain.summary().p50))
	return nil
}
