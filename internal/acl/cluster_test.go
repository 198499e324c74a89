package acl

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

const clusterSecret = "cluster-secret-0123456789abcdef0123456789"

// A member presenting the cluster secret is the node it names; a wrong or
// malformed one, or one sent to a node that has no cluster secret, is 401;
// the secret is no bearer token.
func TestClusterSecret(t *testing.T) {
	var audit bytes.Buffer
	s, err := Open(writeFile(t, testFile), WithClusterSecret(clusterSecret))
	if err != nil {
		t.Fatal(err)
	}
	withSecret := Middleware(s, WithNodeCerts(), WithAudit(newTextLogger(&audit)))
	without := Middleware(testStore(t), WithNodeCerts())
	send := func(mw func(http.Handler) http.Handler, authorization string) (int, string) {
		t.Helper()
		req := httptest.NewRequest("POST", "/v1/cluster/join", nil)
		req.Header.Set("Authorization", authorization)
		rec := httptest.NewRecorder()
		var who string
		mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, _ := PrincipalFrom(r.Context())
			who = p.Name + " " + string(p.Role) + " " + p.Node
		})).ServeHTTP(rec, req)
		if rec.Code != 200 {
			return rec.Code, rec.Body.String()
		}
		return rec.Code, who
	}
	if code, who := send(withSecret, wire.NodeAuthorization("n2", clusterSecret)); code != 200 || who != "node:n2 node n2" {
		t.Fatalf("the cluster secret: %d %s", code, who)
	}
	if !strings.Contains(audit.String(), "who=node:n2 action=join") {
		t.Errorf("audit log lacks the node:\n%s", audit.String())
	}
	// The secret makes a node, not an operator.
	req := httptest.NewRequest("GET", "/v1/cluster/snapshot", nil)
	req.Header.Set("Authorization", wire.NodeAuthorization("n2", clusterSecret))
	rec := httptest.NewRecorder()
	withSecret(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("a snapshot with the cluster secret: %d, want 403", rec.Code)
	}
	for _, tc := range []struct {
		name, authorization string
		mw                  func(http.Handler) http.Handler
		err                 error
	}{
		{"wrong secret", wire.NodeAuthorization("n2", clusterSecret+"x"), withSecret, ErrWrongClusterSecret},
		{"no secret on this node", wire.NodeAuthorization("n2", clusterSecret), without, ErrNoClusterSecret},
		{"malformed", wire.AuthSchemeNode + " bm8tY29sb24=", withSecret, ErrMalformedNodeCredentials},
		{"as a bearer token", "Bearer " + clusterSecret, withSecret, ErrUnknownToken},
	} {
		code, body := send(tc.mw, tc.authorization)
		if code != 401 || !strings.Contains(body, tc.err.Error()) {
			t.Errorf("%s: %d %s, want 401 %q", tc.name, code, body, tc.err)
		}
	}
}

// Every compare of a presented cluster secret is of equal-length hashes,
// through the constant-time compare.
func TestClusterSecretComparedInConstantTime(t *testing.T) {
	s, err := Open(writeFile(t, testFile), WithClusterSecret(clusterSecret))
	if err != nil {
		t.Fatal(err)
	}
	orig := compare
	defer func() { compare = orig }()
	calls := 0
	compare = func(x, y []byte) int {
		calls++
		if len(x) != len(y) {
			t.Errorf("compared inputs of lengths %d and %d", len(x), len(y))
		}
		return orig(x, y)
	}
	for _, secret := range []string{clusterSecret, "x", clusterSecret[:len(clusterSecret)-1]} {
		calls = 0
		req := httptest.NewRequest("GET", "/v1/cluster", nil)
		req.Header.Set("Authorization", wire.NodeAuthorization("n2", secret))
		p, _ := s.authenticate(req, false)
		if calls != 1 || (p != nil) != (secret == clusterSecret) {
			t.Fatalf("secret %q: %d compares, principal %v", secret, calls, p)
		}
	}
}

// An ACL file cannot grant what members hold: a token with the cluster
// secret is refused at load and at reload (the ACL in force stays), and so
// is the node role.
func TestACLCannotGrantTheClusterSecret(t *testing.T) {
	granting := `{"tokens":[{"name":"sneaky","secret":"` + clusterSecret + `","role":"reader"}]}`
	if _, err := Open(writeFile(t, granting), WithClusterSecret(clusterSecret)); err == nil || !strings.Contains(err.Error(), "cluster secret") {
		t.Fatalf("a token with the cluster secret: %v", err)
	}
	if _, err := Open(writeFile(t, granting)); err != nil {
		t.Fatalf("without a cluster secret the same file is fine: %v", err)
	}
	path := writeFile(t, testFile)
	s, err := Open(path, WithClusterSecret(clusterSecret))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(granting), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("reload accepted a token with the cluster secret")
	}
	if s.ACL().lookup(readerSecret) == nil || s.ACL().lookup(clusterSecret) != nil {
		t.Fatal("a refused reload changed the ACL in force")
	}
	_, err = Parse([]byte(`{"tokens":[{"name":"fake-node","secret":"` + readerSecret + `","role":"node"}]}`))
	if err == nil || !strings.Contains(err.Error(), "reserved for cluster members") {
		t.Fatalf("the node role in a file: %v", err)
	}
}

func TestReadClusterSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		path := filepath.Join(dir, "secret")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if got, err := ReadClusterSecret(write(clusterSecret + "\n")); err != nil || got != clusterSecret {
		t.Fatalf("a secret with a newline: %q %v", got, err)
	}
	for name, content := range map[string]string{
		"short":       "0123456789abcdef",
		"two words":   clusterSecret + " " + clusterSecret,
		"two lines":   clusterSecret + "\n" + clusterSecret,
		"not a token": strings.Repeat("ä", 40),
		"empty":       "",
	} {
		if _, err := ReadClusterSecret(write(content)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ReadClusterSecret(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
