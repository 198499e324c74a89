package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
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
	 {"name":"ci","secret":"scoped-secret-0123456789","role":"client","locks":["jobs."]},
	 {"name":"ops","secret":"operator-secret-0123456789","role":"operator"}]}`))
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
