package config

import (
	"strings"
	"testing"
)

func TestClusterValidate(t *testing.T) {
	cases := []struct {
		name string
		c    Cluster
		want string // "" for valid
	}{
		{"off", Cluster{}, ""},
		{"node", Cluster{NodeID: "n1", Listen: "10.0.0.5:7946", Join: []string{"10.0.0.6:7946"}, Roots: []string{"/srv"}}, ""},
		{"unspecified", Cluster{NodeID: "n1", Listen: "0.0.0.0:7946"}, "cluster.listen"},
		{"empty host", Cluster{NodeID: "n1", Listen: ":7946"}, "every interface"},
		{"ipv6 unspecified", Cluster{NodeID: "n1", Listen: "[::]:7946"}, "every interface"},
		{"no id", Cluster{Listen: "10.0.0.5:7946"}, "cluster.nodeId"},
		{"join without listen", Cluster{Join: []string{"10.0.0.6:7946"}}, "cluster.listen"},
		{"relative root", Cluster{NodeID: "n1", Listen: "10.0.0.5:7946", Roots: []string{"srv"}}, "cluster.roots"},
		{"half tls", Cluster{NodeID: "n1", Listen: "10.0.0.5:7946", TLSCert: "c.pem"}, "cluster.tlsCert"},
		{"short key", Cluster{NodeID: "n1", Listen: "10.0.0.5:7946", GossipKey: "c2hvcnQ="}, "cluster.gossipKey"},
		{"profile", Cluster{NodeID: "n1", Listen: "10.0.0.5:7946", Profile: "wan"}, "cluster.profile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Cluster = tc.c
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error naming %q, got %v", tc.want, err)
			}
		})
	}
}
