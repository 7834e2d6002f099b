package config

import (
	"encoding/base64"
	"net"
	"path/filepath"
)

// Cluster configures this process as a node of a cluster (actors/cluster).
// The zero value runs no cluster.
type Cluster struct {
	// NodeID names the node; required when Listen is set.
	NodeID string `json:"nodeId,omitempty"`
	// Listen is the gossip address, HOST:PORT; the wire (hollywood) takes
	// the next port unless RemoteListen names one. The host must be one
	// the other nodes reach: 0.0.0.0 is refused.
	Listen       string `json:"listen,omitempty"`
	RemoteListen string `json:"remoteListen,omitempty"`
	// Join lists gossip addresses of other nodes (any one suffices).
	Join []string `json:"join,omitempty"`
	// Roots are the workspace roots this node holds (absolute); empty
	// accepts any cwd.
	Roots []string `json:"roots,omitempty"`
	// Backends limits what the node advertises; empty: every backend
	// whose probe says available.
	Backends []string `json:"backends,omitempty"`
	// TLSCert, TLSKey and TLSCA (PEM files) turn on mutual TLS on the
	// wire; all three or none.
	TLSCert string `json:"tlsCert,omitempty"`
	TLSKey  string `json:"tlsKey,omitempty"`
	TLSCA   string `json:"tlsCa,omitempty"`
	// GossipKey (base64 of 16, 24 or 32 bytes) encrypts gossip.
	GossipKey string `json:"gossipKey,omitempty"`
	// Profile is memberlist's timing profile: lan (default) or local.
	Profile string `json:"profile,omitempty"`
}

// Enabled reports whether the process runs as a cluster node.
func (c Cluster) Enabled() bool { return c.Listen != "" }

// validate reports the cluster's field errors through bad.
func (c Cluster) validate(bad func(field, format string, args ...any)) {
	if !c.Enabled() {
		if c.NodeID != "" || len(c.Join) > 0 {
			bad("cluster.listen", "required when nodeId or join is set")
		}
		return
	}
	if c.NodeID == "" {
		bad("cluster.nodeId", "required when cluster.listen is set")
	}
	for _, a := range append([]string{c.Listen, c.RemoteListen}, c.Join...) {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("cluster", "%q is not HOST:PORT", a)
		}
	}
	for field, a := range map[string]string{"cluster.listen": c.Listen, "cluster.remoteListen": c.RemoteListen} {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			bad(field, "%q listens on every interface: name the address other nodes reach this one at (hollywood compares addresses as strings, so 0.0.0.0 makes PIDs no node can send to)", a)
		}
	}
	for _, r := range c.Roots {
		if !filepath.IsAbs(r) {
			bad("cluster.roots", "%q is not an absolute path", r)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") || (c.TLSCert == "") != (c.TLSCA == "") {
		bad("cluster.tlsCert", "tlsCert, tlsKey and tlsCa go together")
	}
	if c.GossipKey != "" {
		k, err := base64.StdEncoding.DecodeString(c.GossipKey)
		if err != nil || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
			bad("cluster.gossipKey", "want base64 of 16, 24 or 32 bytes")
		}
	}
	switch c.Profile {
	case "", "lan", "local":
	default:
		bad("cluster.profile", "want lan or local, got %q", c.Profile)
	}
}
