package acl

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

const (
	readerSecret   = "reader-secret-0123456789"
	clientSecret   = "client-secret-0123456789"
	operatorSecret = "operator-secret-0123456789"
	scopedSecret   = "scoped-secret-0123456789"
)

const testFile = `{"tokens":[
 {"name":"dash","secret":"` + readerSecret + `","role":"reader","keys":["*"]},
 {"name":"app","secret":"` + clientSecret + `","role":"client","keys":["*"]},
 {"name":"ops","secret":"` + operatorSecret + `","role":"operator","keys":["*"]},
 {"name":"ci","secret":"` + scopedSecret + `","role":"client","locks":["jobs."],"keys":["jobs."]}
]}`

func writeFile(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func testStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(writeFile(t, testFile))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve runs a request through the middleware in front of a handler that
// answers 200 and records that it was reached.
func serve(t *testing.T, h func(http.Handler) http.Handler, method, path, secret string) (int, string, bool, http.Header) {
	t.Helper()
	reached := false
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		if !Classify(r).Open {
			if _, ok := PrincipalFrom(r.Context()); !ok {
				t.Errorf("%s %s reached the handler without a principal", method, path)
			}
		}
	})
	req := httptest.NewRequest(method, path, nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	rec := httptest.NewRecorder()
	h(next).ServeHTTP(rec, req)
	var body struct{ Error, Code string }
	if rec.Code >= 400 {
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == "" {
			t.Fatalf("%s %s: %d body %q is not a JSON error", method, path, rec.Code, rec.Body)
		}
	}
	return rec.Code, body.Code, reached, rec.Header()
}

// Every role against every endpoint. The expectations are written out here,
// not derived from the rights table, so the table is what is tested.
func TestEachRoleAgainstEachEndpoint(t *testing.T) {
	const r, c, o = 1, 2, 4 // who may: reader, client, operator
	endpoints := []struct {
		method, path string
		who          int
	}{
		{"GET", "/metrics", r | c | o},
		{"GET", "/v1/debug/state", r | c | o},
		{"GET", "/v1/cluster", r | c | o},
		{"GET", "/v1/cluster/", r | c | o},
		{"GET", "/v1/cluster/members", r | c | o},
		{"GET", "/v1/whoami", r | c | o},
		{"POST", "/v1/whoami", o},
		{"GET", "/v1/locks", r | c | o},
		{"GET", "/v1/locks/", r | c | o},
		{"GET", "/v1/locks/a", r | c | o},
		{"GET", "/v1/locks/a?stale=true", r | c | o},
		{"GET", "/v1/locks/a/check?token=3", r | c | o},
		{"GET", "/v1/kv/k", r | c | o},
		{"POST", "/v1/locks/a/acquire", c | o},
		{"POST", "/v1/locks/a/renew", c | o},
		{"POST", "/v1/locks/a/release", c | o},
		{"POST", "/v1/locks/acquire", c | o}, // a multi-lock's: its names are the handler's (NamesAllowed)
		{"POST", "/v1/locks/renew", c | o},
		{"POST", "/v1/locks/release", c | o},
		{"PUT", "/v1/kv/k", c | o},
		{"POST", "/v1/cluster/join", o},
		{"POST", "/v1/cluster/members", o},
		{"DELETE", "/v1/cluster/members/n2", o},
		{"POST", "/v1/cluster/leader/transfer", o},
		{"GET", "/v1/cluster/snapshot", o},
		{"POST", "/v1/cluster/restore", o},
		{"GET", "/v1/cluster/whatever", o},
		{"GET", "/v1/future", o},
		{"GET", "/v2/locks", o},
		{"POST", "/v1/kv/k", c | o}, // any other method on a key is a write
		{"DELETE", "/v1/kv/k", o},   // removes the key's mark
		// Revoke ends another's grant: never a client's right.
		{"POST", "/v1/locks/a/revoke", o},
		{"POST", "/v1/semaphores/a/revoke", o},
		{"POST", "/v1/sessions/7/revoke", o},
	}
	mw := Middleware(testStore(t))
	for _, ep := range endpoints {
		for _, role := range []struct {
			bit    int
			secret string
		}{{r, readerSecret}, {c, clientSecret}, {o, operatorSecret}} {
			status, code, reached, _ := serve(t, mw, ep.method, ep.path, role.secret)
			if ep.who&role.bit != 0 {
				if status != 200 || !reached {
					t.Errorf("%s %s as %q: %d %s, want allowed", ep.method, ep.path, role.secret, status, code)
				}
			} else if status != 403 || code != wire.CodeForbidden || reached {
				t.Errorf("%s %s as %q: %d %s reached=%v, want 403 forbidden", ep.method, ep.path, role.secret, status, code, reached)
			}
		}
		for _, secret := range []string{"", "no-such-token-0123456789"} {
			status, code, reached, hdr := serve(t, mw, ep.method, ep.path, secret)
			if status != 401 || code != wire.CodeUnauthorized || reached || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with %q: %d %s reached=%v challenge %q, want 401", ep.method, ep.path, secret, status, code, reached, hdr.Get("WWW-Authenticate"))
			}
		}
	}
	for _, open := range []string{"/healthz", "/readyz", "/v1/openapi.yaml", "/ui", "/ui/", "/ui/app.js"} {
		if status, _, reached, _ := serve(t, mw, "GET", open, ""); status != 200 || !reached {
			t.Errorf("%s is not open: %d", open, status)
		}
	}
}

func TestPrefixScoping(t *testing.T) {
	mw := Middleware(testStore(t))
	for _, tc := range []struct {
		method, path string
		allowed      bool
	}{
		{"POST", "/v1/locks/jobs.nightly/acquire", true},
		{"POST", "/v1/locks/jobs.nightly/release", true},
		{"POST", "/v1/locks/other/acquire", false},
		{"POST", "/v1/locks/job/renew", false},
		{"GET", "/v1/locks/jobs.a", true},
		{"GET", "/v1/locks/other", false},
		{"GET", "/v1/locks/other/check?token=1", false},
		{"GET", "/v1/locks", true}, // allowed; the API leaves out what LockVisible refuses
		{"PUT", "/v1/kv/jobs.report", true},
		{"PUT", "/v1/kv/billing", false},
		{"GET", "/v1/kv/billing", false},
		{"DELETE", "/v1/kv/jobs.report", false},                 // a client's key, but not a client's right
		{"POST", "/v1/locks/jobs.nightly/revoke", false},        // a client's lock, but not a client's right
		{"POST", "/v1/locks/jobs.x%2F..%2Fother/acquire", true}, // the raw name: refused by the handler as invalid
	} {
		status, code, reached, _ := serve(t, mw, tc.method, tc.path, scopedSecret)
		if tc.allowed != (status == 200 && reached) || !tc.allowed && code != wire.CodeForbidden {
			t.Errorf("%s %s: %d %s, allowed want %v", tc.method, tc.path, status, code, tc.allowed)
		}
	}
	// An unscoped client reaches any name.
	if status, _, _, _ := serve(t, mw, "POST", "/v1/locks/other/acquire", clientSecret); status != 200 {
		t.Fatalf("unscoped client refused: %d", status)
	}
}

func TestClassifyMirrorsTheRouter(t *testing.T) {
	for _, tc := range []struct {
		path   string
		action Action
		res    string
	}{
		{"/v1/locks/a%20b/acquire", ActionAcquire, "a b"},        // no RawPath: chi routes the decoded path
		{"/v1/locks/a%2Fb/acquire", ActionAcquire, "a%2Fb"},      // RawPath: chi routes the raw one
		{"/v1/locks/a/b/acquire", ActionAdmin, ""},               // no such route
		{"/v1/locks//acquire", ActionAdmin, ""},                  // empty name
		{"/v1/kv/a/b", ActionAdmin, ""},                          //
		{"/v1/locks/a/acquire/", ActionAcquire, "a"},             // trailing slash: same lock
		{"/v1/locks/jobs.a/../../cluster/join", ActionAdmin, ""}, // never cleaned
	} {
		req := httptest.NewRequest("POST", tc.path, nil)
		if got := Classify(req); got.Action != tc.action || got.Resource != tc.res {
			t.Errorf("%s: %+v, want %s %q", tc.path, got, tc.action, tc.res)
		}
	}
}

func TestReload(t *testing.T) {
	path := writeFile(t, testFile)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mw := Middleware(s)
	if status, _, _, _ := serve(t, mw, "POST", "/v1/cluster/join", operatorSecret); status != 200 {
		t.Fatalf("before reload: %d", status)
	}
	// ops is demoted to reader, app is removed, a new token appears.
	const newSecret = "fresh-secret-0123456789"
	os.WriteFile(path, []byte(`{"tokens":[
	 {"name":"ops","secret":"`+operatorSecret+`","role":"reader","keys":["*"]},
	 {"name":"new","secret":"`+newSecret+`","role":"client","keys":["*"]}]}`), 0o600)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if status, _, _, _ := serve(t, mw, "POST", "/v1/cluster/join", operatorSecret); status != 403 {
		t.Fatalf("demoted token after reload: %d", status)
	}
	if status, _, _, _ := serve(t, mw, "GET", "/v1/locks", clientSecret); status != 401 {
		t.Fatalf("removed token after reload: %d", status)
	}
	if status, _, _, _ := serve(t, mw, "POST", "/v1/locks/a/acquire", newSecret); status != 200 {
		t.Fatalf("new token after reload: %d", status)
	}
	// A broken edit keeps the ACL in force.
	os.WriteFile(path, []byte(`{"tokens":[{"name":"x","secret":"short","role":"reader","keys":["*"]}]}`), 0o600)
	if err := s.Reload(); err == nil {
		t.Fatal("a broken file was loaded")
	}
	if status, _, _, _ := serve(t, mw, "POST", "/v1/locks/a/acquire", newSecret); status != 200 {
		t.Fatalf("a failed reload changed the ACL: %d", status)
	}
}

// Every lookup goes through subtle.ConstantTimeCompare, once per token
// whatever matches, on equal-length inputs.
func TestSecretsComparedInConstantTime(t *testing.T) {
	a, err := Parse([]byte(testFile))
	if err != nil {
		t.Fatal(err)
	}
	orig := compare
	defer func() { compare = orig }()
	var calls, matches int
	compare = func(x, y []byte) int {
		calls++
		if len(x) != len(y) {
			t.Errorf("compared inputs of lengths %d and %d: the length would leak", len(x), len(y))
		}
		eq := orig(x, y)
		matches += eq
		return eq
	}
	for _, secret := range []string{readerSecret, scopedSecret, "no-such-token-0123456789", "x"} {
		calls, matches = 0, 0
		req := httptest.NewRequest("GET", "/v1/locks", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		p, _ := a.Authenticate(req)
		if calls != len(a.tokens) {
			t.Fatalf("secret %q: %d compares for %d tokens: the lookup exits early", secret, calls, len(a.tokens))
		}
		if (p != nil) != (matches == 1) {
			t.Fatalf("secret %q: principal %v after %d matches", secret, p, matches)
		}
	}
}

func TestParseRefusesMistakes(t *testing.T) {
	for name, content := range map[string]string{
		"empty":             `{"tokens":[]}`,
		"unknown field":     `{"tokens":[{"name":"a","secret":"` + readerSecret + `","role":"reader","prefix":["x"],"keys":["*"]}]}`,
		"short secret":      `{"tokens":[{"name":"a","secret":"short","role":"reader","keys":["*"]}]}`,
		"secret with space": `{"tokens":[{"name":"a","secret":"has a space in it 0123","role":"reader","keys":["*"]}]}`,
		"bad role":          `{"tokens":[{"name":"a","secret":"` + readerSecret + `","role":"admin"}]}`,
		"no name":           `{"tokens":[{"secret":"` + readerSecret + `","role":"reader"}]}`,
		"duplicate name":    `{"tokens":[{"name":"a","secret":"` + readerSecret + `","role":"reader","keys":["*"]},{"name":"a","secret":"` + clientSecret + `","role":"reader","keys":["*"]}]}`,
		"duplicate secret":  `{"tokens":[{"name":"a","secret":"` + readerSecret + `","role":"reader","keys":["*"]},{"name":"b","secret":"` + readerSecret + `","role":"client","keys":["*"]}]}`,
		"slash prefix":      `{"tokens":[{"name":"a","secret":"` + readerSecret + `","role":"client","locks":["jobs/"],"keys":["*"]}]}`,
		"empty prefix":      `{"tokens":[{"name":"a","secret":"` + readerSecret + `","role":"client","keys":[""]}]}`,
		"trailing data":     testFile + `{}`,
	} {
		if _, err := Parse([]byte(content)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseBearer(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "BEARER a.b-c_d~e+f/g==": "a.b-c_d~e+f/g=="} {
		if got, ok := ParseBearer(h); !ok || got != want {
			t.Errorf("ParseBearer(%q) = %q %v", h, got, ok)
		}
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Bearer  abc", "Bearer abc ", "Basic abc", "Bearerabc", "Bearer a b", "Bearer =abc", "Bearer a\x00"} {
		if got, ok := ParseBearer(h); ok {
			t.Errorf("ParseBearer(%q) accepted %q", h, got)
		}
	}
	a, _ := Parse([]byte(testFile))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Add("Authorization", "Bearer "+readerSecret)
	req.Header.Add("Authorization", "Bearer "+operatorSecret)
	if _, err := a.Authenticate(req); err != ErrMalformedCredentials {
		t.Fatalf("two Authorization headers: %v", err)
	}
}

func TestAuditLog(t *testing.T) {
	var buf bytes.Buffer
	log := newTextLogger(&buf)
	mw := Middleware(testStore(t), WithAudit(log))
	serve(t, mw, "DELETE", "/v1/cluster/members/n2", operatorSecret)
	serve(t, mw, "POST", "/v1/cluster/restore", clientSecret)
	serve(t, mw, "GET", "/v1/locks", clientSecret) // not audited
	serve(t, mw, "DELETE", "/v1/kv/report", operatorSecret)
	serve(t, mw, "DELETE", "/v1/kv/report", clientSecret)
	serve(t, mw, "POST", "/v1/locks/a/revoke", operatorSecret)
	serve(t, mw, "POST", "/v1/sessions/9/revoke", clientSecret)
	out := buf.String()
	for _, want := range []string{"who=ops action=membership method=DELETE path=/v1/cluster/members/n2", "status=200", "who=app action=snapshot", "status=403",
		"who=ops action=delete-key method=DELETE path=/v1/kv/report", "who=app action=delete-key",
		"who=ops action=revoke method=POST path=/v1/locks/a/revoke", "who=app action=revoke method=POST path=/v1/sessions/9/revoke"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit log lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n") != 6 {
		t.Errorf("want 6 audit records:\n%s", out)
	}
}
