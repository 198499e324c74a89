package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestGenerateDevPKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if err := GenerateDevPKI(dir, []string{"n1", "n2"}, []string{"10.0.0.7", "fencer-1.internal"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CAKeyFile, "n1-key.pem", "n2-key.pem", ClientKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v", f, st.Mode().Perm())
		}
	}
	n1 := readCert(t, filepath.Join(dir, "n1.pem"))
	if !IsNodeCert(n1) || n1.Subject.CommonName != "n1" {
		t.Fatalf("n1: usages %v, cn %q", n1.ExtKeyUsage, n1.Subject.CommonName)
	}
	if !slices.Contains(n1.DNSNames, "localhost") || !slices.Contains(n1.DNSNames, "fencer-1.internal") {
		t.Fatalf("n1 DNS names %v", n1.DNSNames)
	}
	for _, ip := range []string{"127.0.0.1", "::1", "10.0.0.7"} {
		if !slices.ContainsFunc(n1.IPAddresses, func(a net.IP) bool { return a.Equal(net.ParseIP(ip)) }) {
			t.Fatalf("n1 IPs %v lack %s", n1.IPAddresses, ip)
		}
	}
	if client := readCert(t, filepath.Join(dir, ClientFile)); IsNodeCert(client) {
		t.Fatal("the client certificate can act as a node")
	}
	pool, err := LoadCertPool(filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Verify(x509.VerifyOptions{Roots: pool, DNSName: "fencer-1.internal"}); err != nil {
		t.Fatalf("n1 does not verify against the CA: %v", err)
	}
	if err := GenerateDevPKI(dir, []string{"n1"}, nil); err == nil {
		t.Fatal("an existing CA was overwritten")
	}
	for _, bad := range [][]string{nil, {"a/b"}, {"n1", "n1"}, {"ca"}, {"client-key"}} {
		if err := GenerateDevPKI(t.TempDir(), bad, nil); err == nil {
			t.Fatalf("node names %q accepted", bad)
		}
	}
}

func TestHTTPServerAndClientConfigs(t *testing.T) {
	dir := pkiDir(t, "n1")
	path := func(f string) string { return filepath.Join(dir, f) }
	if _, err := ServerConfig(path("n1.pem"), path("n1-key.pem"), "", true); err == nil {
		t.Fatal("client auth without a CA accepted")
	}
	for _, clientAuth := range []bool{false, true} {
		srvCfg, err := ServerConfig(path("n1.pem"), path("n1-key.pem"), path(CAFile), clientAuth)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(r.TLS.PeerCertificates) > 0 {
				w.Write([]byte(r.TLS.PeerCertificates[0].Subject.CommonName))
			}
		}))
		srv.TLS = srvCfg
		srv.StartTLS()
		get := func(cfg *tls.Config) (string, error) {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			resp, err := c.Get(srv.URL)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b := make([]byte, 64)
			n, _ := resp.Body.Read(b)
			return string(b[:n]), nil
		}
		withCert, err := ClientConfig(path(CAFile), path(ClientFile), path(ClientKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		if cn, err := get(withCert); err != nil || cn != "fencer-client" {
			t.Fatalf("clientAuth=%v, with certificate: %q %v", clientAuth, cn, err)
		}
		noCert, _ := ClientConfig(path(CAFile), "", "")
		if _, err := get(noCert); (err != nil) != clientAuth {
			t.Fatalf("clientAuth=%v, without certificate: %v", clientAuth, err)
		}
		srv.Close()
	}
	if _, err := ClientConfig("", path(ClientFile), ""); err == nil {
		t.Fatal("a certificate without its key accepted")
	}
	if _, _, err := PeerConfig(path("n1.pem"), path("n1-key.pem"), ""); err == nil {
		t.Fatal("peer TLS without a CA accepted")
	}
}
