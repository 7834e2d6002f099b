package cluster

import (
	"context"
	"net"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retry-join bounds (Consul's retry_join): the wait between attempts grows
// from the first to the most, and goes back to the first once every
// address is a member again.
const (
	DefaultRetryJoinMin = time.Second
	DefaultRetryJoinMax = 30 * time.Second
)

// joinLoop is Consul's retry_join: a node keeps trying its join addresses,
// and the gossip addresses of the peers it learned of that are now dead or
// gone, until each is a live member again. So nodes started in any order
// (the seed last) converge, a node started without --join rejoins the
// others it knew when a partition heals, and a cluster split into
// singletons (each node's one join attempt failed) heals. Memberlist alone
// does neither: it gossips to a dead node only for a while, and never
// re-dials a join address.
//
// Each failed attempt is logged at warn, with the addresses and the next
// wait. The loop runs until the node closes; Close does not wait for it
// (a join to an unreachable address can take memberlist's TCP timeout, and
// a stopping node must free its ports at once).
func (n *Node) joinLoop() {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(n.cfg.RetryJoinMin),
		backoff.WithMaxInterval(n.cfg.RetryJoinMax),
		backoff.WithMaxElapsedTime(0), // never give up: a node may come back after days
	)
	for attempt := 1; ; {
		wait := n.cfg.RetryJoinMin
		if missing := n.missingAddrs(); len(missing) > 0 {
			joined, err := n.ml.Join(missing)
			if still := n.missingAddrs(); len(still) > 0 {
				wait = b.NextBackOff()
				n.failedJoins.Add(1)
				n.log.Warn("cluster: retry join: not every address answered", "attempt", attempt,
					"addrs", still, "joined", joined, "err", err, "retry_in", wait.Round(time.Millisecond))
				attempt++
			} else {
				n.log.Info("cluster: retry join: joined", "addrs", missing, "attempts", attempt)
				b.Reset()
				attempt = 1
			}
		} else {
			b.Reset()
			attempt = 1
		}
		select {
		case <-n.stop:
			return
		case <-n.rejoin:
		case <-time.After(wait):
		}
	}
}

// missingAddrs are the join addresses no live member listens on, and the
// gossip addresses of known peers that are dead now (their lease ended:
// they may come back on the same address). A peer that left gracefully is
// not retried by its learned address, only if it is a join address.
func (n *Node) missingAddrs() []string {
	// from the peer table, which memberlist's events keep: memberlist's own
	// Members() hands out nodes its goroutines go on writing
	n.mu.Lock()
	live := map[string]bool{}
	var out []string
	for _, p := range n.peers {
		switch {
		case p.gossip == "":
		case p.state == PeerDead && p.left:
		case p.state == PeerDead:
			out = append(out, p.gossip)
		default:
			live[p.gossip] = true
		}
	}
	n.mu.Unlock()
	for _, a := range n.cfg.Join {
		if a != n.cfg.ListenAddr && !live[a] && !liveByName(a, live) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// liveByName resolves a join address given by host name: it is live when
// one of the name's addresses is (a lookup that fails says not).
func liveByName(addr string, live map[string]bool) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || net.ParseIP(host) != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ips, func(ip string) bool { return live[net.JoinHostPort(ip, port)] })
}
