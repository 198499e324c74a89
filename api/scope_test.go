package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/internal/acl"
)

// A client limited to a prefix lists only the locks within it: holders and
// tokens of other locks are not its to read.
func TestListLocksFilteredByPrefix(t *testing.T) {
	a, err := acl.Parse([]byte(`{"tokens":[
	 {"name":"ci","secret":"scoped-secret-0123456789","role":"client","locks":["jobs."],"keys":["*"]},
	 {"name":"ops","secret":"operator-secret-0123456789","role":"operator","keys":["*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var locks []coord.LockStatus
	for _, name := range []string{"billing.x", "jobs.a", "jobsx", "jobs.b", "other"} {
		locks = append(locks, coord.LockStatus{Lock: entry.Lock{Name: name, Holder: "w-" + name, Token: 3}, Held: true})
	}
	list := func(h http.Handler, secret string) []string {
		req := httptest.NewRequest("GET", "/v1/locks", nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out wire.LockList
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			t.Fatalf("list: %d %s", rec.Code, rec.Body)
		}
		var names []string
		for _, l := range out.Locks {
			names = append(names, l.Lock)
		}
		return names
	}
	api := newFakeServer(&fakeCluster{leader: true, locks: locks}).Handler()
	withACL := acl.Middleware(acl.NewStore(a))(api)
	if got := list(withACL, "scoped-secret-0123456789"); !slices.Equal(got, []string{"jobs.a", "jobs.b"}) {
		t.Fatalf("scoped client lists %v", got)
	}
	if got := list(withACL, "operator-secret-0123456789"); len(got) != len(locks) {
		t.Fatalf("operator lists %v", got)
	}
	if got := list(api, ""); len(got) != len(locks) {
		t.Fatalf("without an ACL: %v", got)
	}
}

// A principal with lock prefixes and no "keys" entry has no keys (issue 26
// F11: "no prefixes" was read as "all", and a token scoped to lo. read
// other.secret, overwrote it with its own token and saw its events): its
// reads, writes and deletes of any key are 403 and reach nothing, while
// "keys": ["*"] is every key. Fails with Allow's len(p.Keys) check removed.
func TestNoKeysEntryMeansNoKeys(t *testing.T) {
	a, err := acl.Parse([]byte(`{"tokens":[
	 {"name":"lo","secret":"scoped-secret-0123456789","role":"client","locks":["lo."]},
	 {"name":"all","secret":"allkeys-secret-0123456789","role":"client","locks":["lo."],"keys":["*"]},
	 {"name":"ops","secret":"operator-secret-0123456789","role":"operator"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if w := a.Warnings(); len(w) != 2 || !strings.Contains(w[0], `"lo" has no "keys" entry`) || !strings.Contains(w[1], `"ops"`) {
		t.Fatalf("warnings %q: want one for lo and one for ops", w)
	}
	f := &fakeCluster{leader: true}
	api := acl.Middleware(acl.NewStore(a))(newFakeServer(f).Handler())
	do := func(method, path, secret string, hdr ...string) int {
		req := httptest.NewRequest(method, path, strings.NewReader("v"))
		req.Header.Set("Authorization", "Bearer "+secret)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, secret := range []string{"scoped-secret-0123456789", "operator-secret-0123456789"} {
		for _, c := range [][]string{{"GET", "/v1/kv/other.secret"}, {"GET", "/v1/kv/lo.x"}, {"PUT", "/v1/kv/other.secret", wire.HeaderToken, "3"}, {"DELETE", "/v1/kv/other.secret"}} {
			if code := do(c[0], c[1], secret, c[2:]...); code != http.StatusForbidden {
				t.Errorf("%s %s without a keys entry: %d, want 403", c[0], c[1], code)
			}
		}
	}
	if len(f.calls) != 0 {
		t.Fatalf("refused calls reached the cluster: %v", f.calls)
	}
	if code := do("PUT", "/v1/kv/other.secret", "allkeys-secret-0123456789", wire.HeaderToken, "3"); code != http.StatusOK {
		t.Fatalf(`a put with "keys": ["*"]: %d`, code)
	}
}

// A multi-lock with a name beyond the token's lock prefixes is refused 403
// naming it, before the cluster is asked; one within them reaches it.
func TestMultiAcquireScopedByEveryName(t *testing.T) {
	a, err := acl.Parse([]byte(`{"tokens":[{"name":"ci","secret":"scoped-secret-0123456789","role":"client","locks":["jobs."],"keys":["*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCluster{leader: true}
	h := acl.Middleware(acl.NewStore(a))(newFakeServer(f).Handler())
	bearer := map[string]string{"Authorization": "Bearer scoped-secret-0123456789"}
	status, e, _ := do(t, h, call{"POST", "/v1/locks/acquire", `{"holder":"w","names":["jobs.a","billing.x"]}`, bearer})
	if status != http.StatusForbidden || e.Code != wire.CodeForbidden || !strings.Contains(e.Message, "billing.x") || len(f.calls) != 0 {
		t.Fatalf("a name out of scope: %d %s %q, calls %v", status, e.Code, e.Message, f.calls)
	}
	if status, e, _ := do(t, h, call{"POST", "/v1/locks/acquire", `{"holder":"w","names":["jobs.a","jobs.b"]}`, bearer}); status != http.StatusOK {
		t.Fatalf("names in scope: %d %s", status, e.Message)
	}
}
