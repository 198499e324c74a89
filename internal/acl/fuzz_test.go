package acl

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/internal/tlsutil"
)

// FuzzParseBearer checks the Authorization parser: whatever it accepts is
// exactly the text after "Bearer ", in token syntax, and authenticating any
// header never panics and finds a principal only for a listed secret.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer " + readerSecret, "Bearer  x", "Basic dXNlcjpwYXNz", "", "Bearer", "Bearer a==", "Bearer =", "bEaReR " + operatorSecret + " ", "Bearer \xff"} {
		f.Add(s)
	}
	a, err := Parse([]byte(testFile))
	if err != nil {
		f.Fatal(err)
	}
	secrets := map[string]bool{readerSecret: true, clientSecret: true, operatorSecret: true, scopedSecret: true}
	f.Fuzz(func(t *testing.T, header string) {
		tok, ok := ParseBearer(header)
		if ok {
			if !strings.EqualFold(header[:7], "bearer ") || header[7:] != tok || !b64token.MatchString(tok) {
				t.Fatalf("ParseBearer(%q) = %q", header, tok)
			}
		} else if tok != "" {
			t.Fatalf("ParseBearer(%q) refused but returned %q", header, tok)
		}
		req := httptest.NewRequest("GET", "/v1/locks", nil)
		req.Header["Authorization"] = []string{header}
		p, err := a.Authenticate(req)
		if (p != nil) != (ok && secrets[tok]) || (p == nil) == (err == nil) {
			t.Fatalf("Authenticate(%q) = %v, %v", header, p, err)
		}
	})
}

// FuzzMiddleware sends requests with fuzzed path, method, credentials,
// Fencing-Lock and forwarding headers, from a member presenting its node
// certificate or from a client presenting none. Whatever reaches the
// handler has a principal that Allow admits for the route, every lock named
// in Fencing-Lock is within its lock prefixes, a node principal only joins,
// reads the status or removes itself and never came with a bearer token,
// and a forwarded request is never the forwarding member itself.
func FuzzMiddleware(f *testing.F) {
	dir := f.TempDir()
	if err := tlsutil.GenerateDevPKI(dir, []string{"n2"}, nil); err != nil {
		f.Fatal(err)
	}
	pemBytes, err := os.ReadFile(filepath.Join(dir, "n2.pem"))
	if err != nil {
		f.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	nodeCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		f.Fatal(err)
	}
	type seed struct {
		method, path, auth, lock, fwdBy, fwdPrincipal string
		fromNode                                      bool
	}
	for _, s := range []seed{
		{"PUT", "/v1/kv/jobs.k", "Bearer " + scopedSecret, "other.l", "", "", false},
		{"PUT", "/v1/kv/jobs.k", "Bearer " + scopedSecret, "jobs.l", "", "", false},
		{"POST", "/v1/locks/a/acquire", "", "", "n2", "", true},
		{"POST", "/v1/cluster/join", "", "", "n2", "node:n4", true},
		{"DELETE", "/v1/cluster/members/n2", "", "", "", "", true},
		{"DELETE", "/v1/cluster/members/n3", "", "", "", "", true},
		{"GET", "/v1/cluster/snapshot", "", "", "n2", "ops", true},
		{"GET", "/v1/cluster/snapshot", "Bearer " + readerSecret, "", "n2", "node:n2", true},
		{"POST", "/v1/cluster/join", "", "", "n2", "node:n4", false},
	} {
		f.Add(s.method, s.path, s.auth, s.lock, s.fwdBy, s.fwdPrincipal, s.fromNode)
	}
	mw := Middleware(testStore(f), WithNodeCerts())
	names := map[string]bool{"dash": true, "app": true, "ops": true, "ci": true}
	f.Fuzz(func(t *testing.T, method, path, auth, lock, fwdBy, fwdPrincipal string, fromNode bool) {
		if !strings.HasPrefix(path, "/") {
			t.Skip()
		}
		req, err := http.NewRequest(method, "https://fencer.test"+path, nil)
		if err != nil {
			t.Skip()
		}
		for h, v := range map[string]string{"Authorization": auth, "Fencing-Lock": lock, "Fencer-Forwarded-By": fwdBy, "Fencer-Forwarded-Principal": fwdPrincipal} {
			if v != "" {
				req.Header.Set(h, v)
			}
		}
		if fromNode {
			req.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{nodeCert}}}
		}
		route := Classify(req)
		var got *Principal
		mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, _ = PrincipalFrom(r.Context())
			if got == nil && !route.Open {
				t.Fatalf("%s %s reached the handler without a principal", method, path)
			}
		})).ServeHTTP(httptest.NewRecorder(), req)
		if got == nil {
			return
		}
		if !Allow(got, route.Action, route.Resource) {
			t.Fatalf("%s %s: %s reached the handler for %s %q", method, path, got.Name, route.Action, route.Resource)
		}
		if lock != "" && !inScope(got.Locks, lock) {
			t.Fatalf("%s %s: %s wrote naming lock %q beyond its prefixes %q", method, path, got.Name, lock, got.Locks)
		}
		if got.Role != RoleNode {
			if !names[got.Name] || auth == "" {
				t.Fatalf("%s %s: principal %q without its bearer token", method, path, got.Name)
			}
			return
		}
		if auth != "" || !fromNode {
			t.Fatalf("%s %s: node %s with Authorization %q, from a node: %v", method, path, got.Name, auth, fromNode)
		}
		switch {
		case route.Action == ActionJoin, route.Action == ActionStatus:
		case route.Action == ActionMembership && route.Resource == got.Node:
		default:
			t.Fatalf("%s %s: node %s allowed %s %q", method, path, got.Name, route.Action, route.Resource)
		}
		if fwdBy != "" && got.Name != fwdPrincipal {
			t.Fatalf("%s %s forwarded by %q for %q: served as %s", method, path, fwdBy, fwdPrincipal, got.Name)
		}
	})
}
