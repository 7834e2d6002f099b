package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// testCA is a certificate authority made in the test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue signs a node certificate for 127.0.0.1, for serving and dialling.
func (ca *testCA) issue(t *testing.T, name string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestMutualTLS: two nodes with certificates of the cluster CA verify each
// other and route ops; a third, whose certificate another CA signed, gets
// into the gossip (no key is set) but never answers over the wire, so it
// takes no placements, and its own calls are refused.
func TestMutualTLS(t *testing.T) {
	ca, rogueCA := newCA(t, "cluster"), newCA(t, "rogue")
	root := t.TempDir()
	good := startNodes(t, []spec{{id: "a", roots: []string{root}, backends: []string{"script"}}, {id: "b", roots: []string{root}, backends: []string{"script"}}},
		func(i int, c *Config) { c.TLS = MutualTLSConfig(ca.issue(t, c.NodeID), ca.pool) })
	a := good[0]
	ctx := ctxT(t)

	pa := freePorts(t)
	x, err := Start(Config{NodeID: "x", ListenAddr: addr(pa), Join: []string{a.cfg.ListenAddr}, Roots: []string{root},
		Backends: []string{"script"}, Profile: ProfileLocal, SyncInterval: 500 * time.Millisecond,
		Runtime: testRuntime(t, nil), Scope: "daemon", DefaultBackend: "script",
		TLS: MutualTLSConfig(rogueCA.issue(t, "x"), ca.pool)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	require.Eventually(t, func() bool { return a.peerStates()["x"] == PeerAlive }, deadline, 50*time.Millisecond, "x is in the gossip")

	// the trusted pair works
	placed, err := a.Start(ctx, messages.Start{Brief: "over tls", Cwd: root}, "b")
	require.NoError(t, err)
	assert.Equal(t, "b", placed.Node)

	// x is never verified, so it takes no placement and gets no calls:
	// a probed x's wire and x probed a's, each refused
	require.Eventually(t, func() bool { return probedAndRefused(a, x) && probedAndRefused(x, a) }, deadline, 50*time.Millisecond,
		"a and x never probed each other's wire")
	assert.NotContains(t, a.livePeers(), "x")
	_, err = a.Start(ctx, messages.Start{Brief: "to x", Cwd: root}, "x")
	require.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), `node "x" has not answered over the wire`)
	// and x cannot reach the others either
	assert.Empty(t, x.livePeers())
	var st messages.StopResult
	_, err = x.Do(ctx, placed.SessionID, messages.OpStop, messages.Stop{SessionID: placed.SessionID}, &st)
	require.Error(t, err)
	recs, err := good[1].Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Status.Live(), "x's stop must not have reached b")
}

// TestGossipKey: a node without the cluster's gossip key cannot join.
func TestGossipKey(t *testing.T) {
	key := []byte("0123456789abcdef")
	nodes := startNodes(t, []spec{{id: "a", backends: []string{"script"}}, {id: "b", backends: []string{"script"}}},
		func(i int, c *Config) { c.GossipKey = key })
	p := freePorts(t)
	x, err := Start(Config{NodeID: "x", ListenAddr: addr(p), Join: []string{nodes[0].cfg.ListenAddr}, Backends: []string{"script"},
		Profile: ProfileLocal, Runtime: testRuntime(t, nil), Scope: "daemon", DefaultBackend: "script"})
	require.NoError(t, err, "a failed join is not fatal: the node waits to be joined")
	t.Cleanup(func() { _ = x.Close() })
	// x tried to join twice and was refused both times
	require.Eventually(t, func() bool { return x.failedJoins.Load() >= 2 }, deadline, 50*time.Millisecond, "x never tried to join")
	assert.NotContains(t, nodes[0].peerStates(), "x")
	assert.Empty(t, x.peerStates())
}

func TestUnroutableListenAddressIsRefused(t *testing.T) {
	for _, a := range []string{"0.0.0.0:7000", "[::]:7000", ":7000", "localhost"} {
		_, _, err := RoutableAddr("cluster-listen", a)
		assert.Error(t, err, a)
	}
	_, err := Start(Config{NodeID: "a", ListenAddr: "0.0.0.0:7946", Runtime: testRuntime(t, nil)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unspecified address")
	_, _, err = RoutableAddr("cluster-listen", "10.1.2.3:7946")
	assert.NoError(t, err)
}

// TestMutualTLSRefusesANodeWithoutCertificate: a node that runs its wire
// without TLS joins the gossip of a mutual-TLS cluster (no gossip key is
// set) but is never verified: a's TLS probe of its wire fails, so a never
// lets hollywood dial it (the failed-TLS-dial crash), it takes no
// placement, and its own plaintext calls reach nobody.
func TestMutualTLSRefusesANodeWithoutCertificate(t *testing.T) {
	ca := newCA(t, "cluster")
	root := t.TempDir()
	good := startNodes(t, []spec{{id: "a", roots: []string{root}, backends: []string{"script"}}, {id: "b", roots: []string{root}, backends: []string{"script"}}},
		func(i int, c *Config) { c.TLS = MutualTLSConfig(ca.issue(t, c.NodeID), ca.pool) })
	a := good[0]
	ctx := ctxT(t)
	y := startNode(t, "y", freePorts(t), a.cfg.ListenAddr)
	require.Eventually(t, func() bool { return a.peerStates()["y"] == PeerAlive }, deadline, 50*time.Millisecond, "y is in the gossip")
	// a probed y's wire over TLS and recorded the failure
	require.Eventually(t, func() bool { return probedAndRefused(a, y) }, deadline, 50*time.Millisecond, "a never probed y's wire")
	assert.NotContains(t, a.livePeers(), "y")
	_, err := a.Start(ctx, messages.Start{Brief: "to y", Cwd: root}, "y")
	require.Equal(t, messages.CodeInvalid, messages.ErrorCode(err))
	assert.Contains(t, err.Error(), `node "y" has not answered over the wire`)
	assert.Empty(t, y.livePeers(), "y verified a TLS node over plaintext")
}

// probedAndRefused reports whether from's dial gate probed to's wire and
// recorded the handshake as failed.
func probedAndRefused(from, to *Node) bool {
	from.wire.gate.mu.Lock()
	defer from.wire.gate.mu.Unlock()
	ok, probed := from.wire.gate.ok[to.Meta().Addr]
	return probed && !ok
}
