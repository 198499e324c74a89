package acl

import (
	"bytes"
	"crypto/tls"
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

// A node certificate is a node without a token: it may join, read the
// status and remove itself, and nothing else; the CLI's client-only
// certificate is no node; a token still decides when one is sent.
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
	clients := map[string]*http.Client{}
	for _, who := range []string{"n2", "client", ""} {
		var cfg *tls.Config
		switch who {
		case "n2":
			cfg, err = tlsutil.ClientConfig(path(tlsutil.CAFile), path("n2.pem"), path("n2-key.pem"))
		case "client":
			cfg, err = tlsutil.ClientConfig(path(tlsutil.CAFile), path(tlsutil.ClientFile), path(tlsutil.ClientKeyFile))
		default:
			cfg, err = tlsutil.ClientConfig(path(tlsutil.CAFile), "", "")
		}
		if err != nil {
			t.Fatal(err)
		}
		clients[who] = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	send := func(cert, method, target string, headers ...string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+target, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := clients[cert].Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const fwd, principal = "Fencer-Forwarded-By", "Fencer-Forwarded-Principal"
	for _, tc := range []struct {
		cert, method, target string
		headers              []string
		want                 int
	}{
		// What members ask of each other.
		{"n2", "POST", "/v1/cluster/join", nil, 200},
		{"n2", "GET", "/v1/cluster", nil, 200},
		{"n2", "DELETE", "/v1/cluster/members/n2", nil, 200},
		// Nothing else.
		{"n2", "DELETE", "/v1/cluster/members/n3", nil, 403},
		{"n2", "POST", "/v1/cluster/members", nil, 403},
		{"n2", "GET", "/v1/cluster/snapshot", nil, 403},
		{"n2", "POST", "/v1/cluster/restore", nil, 403},
		{"n2", "POST", "/v1/cluster/leader/transfer", nil, 403},
		{"n2", "POST", "/v1/locks/a/acquire", nil, 403},
		{"n2", "PUT", "/v1/kv/k", nil, 403},
		{"n2", "GET", "/v1/locks", nil, 403},
		{"n2", "GET", "/v1/future", nil, 403},
		// Forwarded by n2: only n2's own request is believed, as n2 (F8:
		// n2's certificate removed "rogue" by naming it) ...
		{"n2", "POST", "/v1/cluster/join", []string{fwd, "n2", principal, "node:n2"}, 200},
		{"n2", "DELETE", "/v1/cluster/members/n2", []string{fwd, "n2", principal, "node:n2"}, 200},
		{"n2", "DELETE", "/v1/cluster/members/n3", []string{fwd, "n2", principal, "node:n2"}, 403},
		{"n2", "POST", "/v1/cluster/join", []string{fwd, "n2", principal, "node:n4"}, 401},
		{"n2", "DELETE", "/v1/cluster/members/n4", []string{fwd, "n2", principal, "node:n4"}, 401},
		{"n2", "DELETE", "/v1/cluster/members/rogue", []string{fwd, "n2", principal, "node:rogue"}, 401},
		{"n2", "DELETE", "/v1/cluster/members/n2", []string{fwd, "n2", principal, "node:n4"}, 401},
		{"n2", "DELETE", "/v1/cluster/members/n4", []string{fwd, "n4", principal, "node:n4"}, 401},
		// ... never n2 with nobody named, and never a client without its token.
		{"n2", "POST", "/v1/cluster/join", []string{fwd, "n2"}, 401},
		{"n2", "GET", "/v1/cluster/snapshot", []string{fwd, "n2"}, 401},
		{"n2", "POST", "/v1/locks/a/acquire", []string{fwd, "n2", principal, "ops"}, 401},
		{"n2", "POST", "/v1/cluster/join", []string{fwd, "n2", principal, "node:"}, 401},
		{"n2", "POST", "/v1/cluster/join", []string{fwd, "n2", principal, "node:a/b"}, 401},
		// A client's token, forwarded, decides.
		{"n2", "GET", "/v1/cluster/snapshot", []string{fwd, "n2", principal, "ops", "Authorization", "Bearer " + operatorSecret}, 200},
		{"n2", "GET", "/v1/cluster/snapshot", []string{fwd, "n2", principal, "node:n2", "Authorization", "Bearer " + readerSecret}, 403},
		// Without a node certificate, the forwarding headers count for nothing.
		{"client", "POST", "/v1/cluster/join", []string{fwd, "n2", principal, "node:n4"}, 401},
		{"", "POST", "/v1/cluster/join", []string{fwd, "n2", principal, "node:n4"}, 401},
		{"client", "POST", "/v1/cluster/join", nil, 401},
		{"", "POST", "/v1/cluster/join", nil, 401},
		// A token sent with a node certificate decides.
		{"n2", "POST", "/v1/cluster/join", []string{"Authorization", "Bearer " + readerSecret}, 403},
	} {
		if got := send(tc.cert, tc.method, tc.target, tc.headers...); got != tc.want {
			t.Errorf("%s as %q with %q: %d, want %d", tc.method+" "+tc.target, tc.cert, tc.headers, got, tc.want)
		}
	}
	if bytes.Contains(audit.Bytes(), []byte("who=node:n4")) || bytes.Contains(audit.Bytes(), []byte("who=node:rogue")) {
		t.Errorf("n2's certificate spoke for another node:\n%s", audit.Bytes())
	}
	for _, want := range []string{"who=node:n2 action=join", "via=n2", "who=node:n2 action=membership method=DELETE path=/v1/cluster/members/n2"} {
		if !bytes.Contains(audit.Bytes(), []byte(want)) {
			t.Errorf("audit log lacks %q:\n%s", want, audit.Bytes())
		}
	}
}
