package acl

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/fencer-io/fencer/internal/tlsutil"
)

func newTextLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// A node certificate is an operator without a token; the CLI's client-only
// certificate is not; a token still decides when one is sent.
func TestNodeCertificates(t *testing.T) {
	dir := t.TempDir()
	if err := tlsutil.GenerateDevPKI(dir, []string{"n1", "n2"}, nil); err != nil {
		t.Fatal(err)
	}
	path := func(f string) string { return filepath.Join(dir, f) }
	srvCfg, err := tlsutil.ServerConfig(path("n1.pem"), path("n1-key.pem"), path(tlsutil.CAFile), false)
	if err != nil {
		t.Fatal(err)
	}
	var audit bytes.Buffer
	srv := httptest.NewUnstartedServer(Middleware(testStore(t), WithNodeCerts(), WithAudit(newTextLogger(&audit)))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	srv.TLS = srvCfg
	srv.StartTLS()
	defer srv.Close()

	post := func(certFile, keyFile, secret string) int {
		cfg, err := tlsutil.ClientConfig(path(tlsutil.CAFile), certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", srv.URL+"/v1/cluster/join", nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(path("n2.pem"), path("n2-key.pem"), ""); got != 200 {
		t.Fatalf("node certificate: %d", got)
	}
	if got := post(path(tlsutil.ClientFile), path(tlsutil.ClientKeyFile), ""); got != 401 {
		t.Fatalf("client certificate: %d", got)
	}
	if got := post("", "", ""); got != 401 {
		t.Fatalf("no certificate: %d", got)
	}
	if got := post(path("n2.pem"), path("n2-key.pem"), readerSecret); got != 403 {
		t.Fatalf("node certificate with a reader token: %d", got)
	}
	if !bytes.Contains(audit.Bytes(), []byte("who=node:n2 action=membership")) {
		t.Fatalf("audit log lacks the node:\n%s", audit.Bytes())
	}
}
