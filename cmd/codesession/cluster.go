package main

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/cluster"
	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
)

// clusterFlags are serve's cluster flags; each overrides the config's
// cluster section.
type clusterFlags struct {
	nodeID string
	listen string
	join   []string
	roots  []string
}

func (f *clusterFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.nodeID, "node-id", "", "run as a cluster node with this id (needs --cluster-listen)")
	fs.StringVar(&f.listen, "cluster-listen", "", "the node's gossip address HOST:PORT (the wire takes PORT+1); a host other nodes reach, never 0.0.0.0")
	fs.StringSliceVar(&f.join, "join", nil, "gossip addresses of nodes to join, HOST:PORT (comma-separated or repeated)")
	fs.StringArrayVar(&f.roots, "cluster-root", nil, "a workspace root this node holds (absolute; repeatable; default: any cwd)")
}

// apply lays the flags over the config's cluster section.
func (f *clusterFlags) apply(c *config.Cluster) {
	if f.nodeID != "" {
		c.NodeID = f.nodeID
	}
	if f.listen != "" {
		c.Listen = f.listen
	}
	if len(f.join) > 0 {
		c.Join = f.join
	}
	if len(f.roots) > 0 {
		c.Roots = f.roots
	}
}

// publisher hands the daemon's live events to the node once it exists (the
// daemon is made first: the node needs its runtime).
type publisher struct{ node atomic.Pointer[cluster.Node] }

func (p *publisher) publish(sid string, ev messages.PersistedEvent) {
	if n := p.node.Load(); n != nil {
		n.Publish(sid, ev)
	}
}

// startClusterNode joins the cluster the config names and returns the
// control plane's handler through it. loseFeed is $CODESESSION_TEST_LOSE_FEED
// (cluster.LoseFeedEnv, tests only; "" in production).
func startClusterNode(cfg config.Config, d *controlplane.Daemon, pub *publisher, loseFeed string) (*cluster.Node, http.Handler, error) {
	c := cfg.Cluster
	lose := 0
	if loseFeed != "" {
		var err error
		if lose, err = strconv.Atoi(loseFeed); err != nil || lose < 1 {
			return nil, nil, fmt.Errorf("%s=%q: want a positive integer (the feed message to lose; tests only)", cluster.LoseFeedEnv, loseFeed)
		}
	}
	nc := cluster.Config{NodeID: c.NodeID, ListenAddr: c.Listen, RemoteAddr: c.RemoteListen, Join: c.Join,
		Roots: append([]string(nil), c.Roots...), Backends: c.Backends, Profile: cluster.Profile(c.Profile),
		Runtime: d.Runtime(), Scope: d.Scope(), Visible: d.Visible, CheckBackend: d.CheckBackend, DefaultBackend: cfg.DefaultBackend, Logger: slog.Default()}
	if c.TLSCert != "" {
		t, err := cluster.MutualTLS(c.TLSCert, c.TLSKey, c.TLSCA)
		if err != nil {
			return nil, nil, err
		}
		nc.TLS = t
	}
	if c.GossipKey != "" {
		k, err := base64.StdEncoding.DecodeString(c.GossipKey)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster.gossipKey: %w", err)
		}
		nc.GossipKey = k
	}
	n, err := cluster.Start(nc)
	if err != nil {
		return nil, nil, err
	}
	if lose > 0 {
		n.LoseFollowedFeed(lose)
		slog.Warn("cluster: a test hook is on: this node loses feed messages of followed remote sessions; never set it outside tests", "env", cluster.LoseFeedEnv, "nth", lose)
	}
	pub.node.Store(n)
	cluster.Wire(n, d)
	return n, cluster.NewGateway(n, d), nil
}
