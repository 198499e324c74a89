// Package tlsutil builds fencer's TLS configurations: the HTTP API's server
// and client sides, mutual TLS between nodes, a hashicorp/raft stream layer
// over TLS, and a development PKI.
//
// Nodes authenticate each other by certificate only: a peer must present a
// certificate that chains to the cluster CA and is fit to be a node, that is
// usable both as a server and as a client (extended key usages serverAuth and
// clientAuth). A client-only certificate from the same CA, as `fencer tls
// init` writes for the CLI, therefore opens the HTTP API but never the Raft
// port, so holding it is not enough to vote or replicate.
//
// TLS 1.2 is the minimum; Go negotiates 1.3 whenever both sides have it, so
// 1.3 is what two fencer nodes always speak.
package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
)

// MinVersion is the oldest TLS version fencer accepts.
const MinVersion = tls.VersionTLS12

// LoadCertPool reads one or more PEM certificates into a pool.
func LoadCertPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls ca %s: no PEM certificate found", caFile)
	}
	return pool, nil
}

func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return tls.Certificate{}, errors.New("tls: want both a certificate and its key")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls key pair %s, %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

// ServerConfig is the HTTP API's TLS configuration. With caFile set, client
// certificates signed by that CA are verified when presented; clientAuth
// makes one mandatory (and needs caFile).
func ServerConfig(certFile, keyFile, caFile string, clientAuth bool) (*tls.Config, error) {
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: MinVersion, Certificates: []tls.Certificate{cert}}
	switch {
	case caFile != "":
		if cfg.ClientCAs, err = LoadCertPool(caFile); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if clientAuth {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	case clientAuth:
		return nil, errors.New("tls: client certificate authentication needs a CA (--tls-ca)")
	}
	return cfg, nil
}

// ClientConfig is the TLS configuration of an HTTP API client (the CLI, the
// Go client, a node forwarding to the leader). caFile empty means the
// system's roots; certFile and keyFile, both or neither, give a client
// certificate.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: MinVersion}
	if caFile != "" {
		pool, err := LoadCertPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := loadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// PeerConfig returns the two sides of mutual TLS between nodes: server is
// for accepting a peer, client for dialing one. Both present this node's
// certificate and both require the other side's, verified against the
// cluster CA only (never the system roots) and fit to be a node.
func PeerConfig(certFile, keyFile, caFile string) (server, client *tls.Config, err error) {
	if caFile == "" {
		return nil, nil, errors.New("tls: mutual TLS between nodes needs the cluster CA")
	}
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	pool, err := LoadCertPool(caFile)
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{
		MinVersion:       MinVersion,
		Certificates:     []tls.Certificate{cert},
		ClientCAs:        pool,
		ClientAuth:       tls.RequireAndVerifyClientCert,
		VerifyConnection: requireNodeCert,
	}
	client = &tls.Config{
		MinVersion:       MinVersion,
		Certificates:     []tls.Certificate{cert},
		RootCAs:          pool,
		VerifyConnection: requireNodeCert,
	}
	return server, client, nil
}

// requireNodeCert refuses a verified peer whose certificate is not usable
// both as a server and as a client: only node certificates are.
func requireNodeCert(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: peer presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	if !IsNodeCert(leaf) {
		return fmt.Errorf("tls: peer certificate %q is not a node certificate (needs extended key usages serverAuth and clientAuth)", leaf.Subject.CommonName)
	}
	return nil
}

// IsNodeCert reports whether cert may identify a node: it is usable both as
// a server and as a client.
func IsNodeCert(cert *x509.Certificate) bool {
	if slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return true
	}
	return slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) &&
		slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
}
