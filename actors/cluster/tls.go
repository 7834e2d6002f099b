package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// MutualTLS builds the wire's TLS config from PEM files: the node's
// certificate and key, and the cluster CA that signs every node's. The
// same config serves and dials (hollywood uses one for both), and a peer
// must present a certificate the CA signed. Certificates need IP or DNS
// SANs matching the nodes' wire addresses: hollywood dials the PID's host.
func MutualTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster TLS: the node certificate: %w", err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster TLS: the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("cluster TLS: %s holds no PEM certificate", caFile)
	}
	return MutualTLSConfig(pair, pool), nil
}

// MutualTLSConfig is MutualTLS for a certificate and CA pool in memory.
func MutualTLSConfig(cert tls.Certificate, ca *x509.CertPool) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca,
		ClientCAs:    ca,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}
