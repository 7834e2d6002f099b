package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/anthdm/hollywood/remote"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/cluster"
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
	res.note("a routed turn is two routed ops (guide, read-turn), each a msgpack envelope each way plus the owning runtime's work; the raw baseline is one protobuf message each way and no work")
	return res, nil
}

// startBenchCluster starts nodes a, b and c, each holding dir/<id>.
func startBenchCluster(dir string) ([]*cluster.Node, func(), error) {
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
	for _, id := range []string{"a", "b", "c"} {
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
			Profile: cluster.ProfileLocal, Runtime: rt, Scope: "bench", DefaultBackend: "script", Logger: quiet}
		if seed != "" {
			nc.Join = []string{seed}
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
	for _, n := range nodes {
		for verified(n) < 2 {
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
