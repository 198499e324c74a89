package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// Validity of the development PKI's certificates.
const (
	devCAValidity   = 5 * 365 * 24 * time.Hour
	devLeafValidity = 825 * 24 * time.Hour
)

// Files GenerateDevPKI writes, besides NODE.pem and NODE-key.pem per node.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ClientFile    = "client.pem"
	ClientKeyFile = "client-key.pem"
)

// GenerateDevPKI writes a development CA into dir, a node certificate per
// node (usable as server and client, so for the API, forwarding and Raft)
// and a client-only certificate for the CLI. Every certificate names
// 127.0.0.1, ::1 and localhost plus hosts (IP addresses or DNS names). Keys
// are ECDSA P-256 and written 0600. It refuses to overwrite an existing CA:
// certificates issued from it would silently stop being trusted.
//
// It is long because it writes the CA, then each certificate, in the order a
// reader checks them; every step is used once.
func GenerateDevPKI(dir string, nodes []string, hosts []string) error {
	if len(nodes) == 0 {
		return errors.New("tls init: want at least one node name")
	}
	seen := map[string]bool{"ca": true, "ca-key": true, "client": true, "client-key": true}
	for _, n := range nodes {
		if !wire.ValidNodeID(n) || seen[n] {
			return fmt.Errorf("tls init: node name %q: want %s, unique, not ca or client", n, wire.NodeIDRule)
		}
		seen[n] = true
	}
	if _, err := os.Stat(filepath.Join(dir, CAFile)); err == nil {
		return fmt.Errorf("tls init: %s already exists; remove it or use another directory", filepath.Join(dir, CAFile))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var ips []net.IP
	dns := []string{"localhost"}
	for _, h := range append([]string{"127.0.0.1", "::1"}, hosts...) {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if h != "" && h != "localhost" {
			dns = append(dns, h)
		}
	}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Minute) // tolerate small clock skew
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "fencer development CA", Organization: []string{"fencer"}},
		NotBefore:             now,
		NotAfter:              now.Add(devCAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	leaf := func(cn string, usages []x509.ExtKeyUsage) *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: cn, Organization: []string{"fencer"}},
			NotBefore:   now,
			NotAfter:    now.Add(devLeafValidity),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: usages,
			DNSNames:    dns,
			IPAddresses: ips,
		}
	}
	issue := func(name string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		der, err := sign(tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		return writeCert(dir, name, der, key)
	}
	for _, n := range nodes {
		if err := issue(n, leaf(n, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})); err != nil {
			return err
		}
	}
	if err := issue("client", leaf("fencer-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})); err != nil {
		return err
	}
	// The CA goes last: its presence marks a completed run.
	return writeCert(dir, "ca", caDER, caKey)
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, priv *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
}

func writeCert(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(filepath.Join(dir, name+"-key.pem"), keyPEM, 0o600); err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return os.WriteFile(filepath.Join(dir, name+".pem"), certPEM, 0o644)
}
