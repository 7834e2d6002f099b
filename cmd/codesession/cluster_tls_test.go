package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/cluster"
	"github.com/codesession/codesession/messages"
)

// pemCA is a certificate authority made in the test, written as PEM.
type pemCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate's PEM file
}

func newPemCA(t *testing.T, name string) *pemCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), name+"-ca.pem")
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return &pemCA{cert: cert, key: key, file: file}
}

// issue writes a node certificate for ip (serving and dialling) and its
// key; it returns their files.
func (ca *pemCA) issue(t *testing.T, name, ip string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP(ip)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile
}

// refusedOverWire waits until p has logged that member does not answer
// over the wire (its verify ping failed): the refusal is an event, not a
// wait on a clock.
func refusedOverWire(t *testing.T, p *clusterProc, member string) {
	t.Helper()
	waitFor(t, p.id+" to log that "+member+" does not answer over the wire", func() bool {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(line, "does not answer over the wire") && strings.Contains(line, "member="+member) {
				return true
			}
		}
		return false
	})
}

// TestClusterMutualTLSRefusesWrongAndMissingCertificates: five daemon
// processes in network namespaces. n1-n3 hold certificates of the cluster
// CA; n4 one of another CA (and trusts that CA), n5 none. No gossip key
// is set, so n4 and n5 get into the gossip, but the wire refuses them:
// each good node tries them over the wire and logs the failure, never
// verifies them, places nothing on them and refuses a start that names
// them; n4 and n5 verify no one, a start through them on a good node is
// refused and they cannot read a good node's session. Meanwhile the good
// nodes place, drive and list a session across each other.
func TestClusterMutualTLSRefusesWrongAndMissingCertificates(t *testing.T) {
	skipOrFailWithoutNetns(t)
	lab := newNetnsLab(t, 5)
	bin := buildServe(t)
	scenario := writeScenario(t, opsScenario)
	ca, other := newPemCA(t, "cluster"), newPemCA(t, "other")
	roots := make([]string, 5)
	for i := range roots {
		roots[i] = t.TempDir()
	}
	cfgOf := func(i int) map[string]any {
		c := map[string]any{"profile": "local"}
		switch {
		case i <= 3:
			c["tlsCert"], c["tlsKey"] = ca.issue(t, fmt.Sprintf("n%d", i), fmt.Sprintf("10.77.0.%d", i))
			c["tlsCa"] = ca.file
		case i == 4:
			c["tlsCert"], c["tlsKey"] = other.issue(t, "n4", "10.77.0.4")
			c["tlsCa"] = other.file
		}
		return map[string]any{"cluster": c}
	}
	var nodes []*clusterProc
	for i := 1; i <= 5; i++ {
		join := ""
		if i > 1 {
			join = nodes[0].gossip
		}
		nodes = append(nodes, lab.startNodeWith(bin, i, roots[i-1], scenario, join, cfgOf(i), []string{"CODESESSION_LOG_LEVEL=info"}))
	}
	good, bad := nodes[:3], nodes[3:]
	for _, n := range good {
		waitFor(t, n.id+" to verify the two other good nodes", func() bool { return len(n.verifiedPeers(t)) == 2 })
	}
	for _, g := range good {
		for _, b := range bad {
			refusedOverWire(t, g, b.id)
		}
	}
	for _, g := range good {
		var ms []cluster.Member
		require.Nil(t, g.api(t, "GET", "/api/cluster/nodes", nil, &ms))
		for _, m := range ms {
			if m.ID == "n4" || m.ID == "n5" {
				assert.False(t, m.Verified, "%s verified %s", g.id, m.ID)
			}
		}
		assert.ElementsMatch(t, others(good, g), g.verifiedPeers(t), "%s verifies exactly the good nodes", g.id)
	}
	for _, b := range bad {
		assert.Empty(t, b.verifiedPeers(t), "%s verified a node of the cluster", b.id)
		// a start the bad node sends to a good one is refused
		e := b.api(t, "POST", "/api/code-sessions", map[string]any{"brief": "from " + b.id, "cwd": roots[0], "node": "n1"}, nil)
		require.NotNil(t, e, "%s placed a session on n1", b.id)
		assert.Contains(t, e.Message, `node "n1" has not answered over the wire`)
		// and a good node refuses to place on it
		e = good[0].api(t, "POST", "/api/code-sessions", map[string]any{"brief": "to " + b.id, "cwd": roots[0], "node": b.id}, nil)
		require.NotNil(t, e, "n1 placed a session on %s", b.id)
		assert.Contains(t, e.Message, fmt.Sprintf("node %q has not answered over the wire", b.id))
	}

	// the good nodes go on working: a session on n3, started through n1,
	// driven and stopped through n2
	var placed cluster.Placed
	require.Nil(t, good[0].api(t, "POST", "/api/code-sessions", map[string]any{"brief": "behind mutual TLS", "cwd": roots[2]}, &placed))
	require.Equal(t, "n3", placed.Node)
	sid := placed.SessionID
	var tr messages.TurnResult
	require.Nil(t, good[1].api(t, "POST", "/api/code-sessions/"+sid+"/read-turn", map[string]any{"timeoutMs": 120000}, &tr))
	require.Equal(t, messages.KindTurnComplete, tr.Kind)
	var st messages.StopResult
	require.Nil(t, good[1].api(t, "POST", "/api/code-sessions/"+sid+"/stop", map[string]any{"outcome": "success"}, &st))
	for _, g := range good {
		waitFor(t, g.id+" to list the session on n3", func() bool { r, ok := g.session(t, sid); return ok && r.Node == "n3" })
	}
	for _, b := range bad {
		// its directory never learned the session, and asking n3 for it
		// fails: the wire refuses the bad node's calls
		_, listed := b.session(t, sid)
		assert.False(t, listed, "%s lists a session of the cluster", b.id)
		e := b.api(t, "GET", "/api/code-sessions/"+sid, nil, nil)
		require.NotNil(t, e, "%s read n3's session", b.id)
		t.Logf("%s reading n3's session: %s: %s", b.id, e.Code, e.Message)
	}
}

// others are the ids of nodes other than self.
func others(nodes []*clusterProc, self *clusterProc) []string {
	var ids []string
	for _, n := range nodes {
		if n != self {
			ids = append(ids, n.id)
		}
	}
	return ids
}
