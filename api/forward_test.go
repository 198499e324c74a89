package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/acl"
)

// followerOf is a follower whose leader serves at addr.
type followerOf struct {
	fakeCluster
	addr string
}

func (f *followerOf) ID() string               { return "n2" }
func (f *followerOf) Leader() (string, string) { return "n1", f.addr }

// A forwarded request reaches the leader with the headers that say who asks
// and what it means, even when the client names them in Connection (which
// makes a proxy drop them), and names the principal this node
// authenticated, never one the client chose.
func TestForwardKeepsEndToEndHeaders(t *testing.T) {
	var got http.Header
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		writeJSON(w, http.StatusOK, map[string]string{})
	}))
	defer leader.Close()
	f := &followerOf{addr: strings.TrimPrefix(leader.URL, "http://")}
	h := NewServer(f, f, nil).Handler()

	a, err := acl.Parse([]byte(`{"tokens":[{"name":"app","secret":"client-secret-0123456789","role":"client"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	withACL := acl.Middleware(acl.NewStore(a))(h)
	send := func(h http.Handler, headers ...string) http.Header {
		t.Helper()
		got = nil
		req := httptest.NewRequest("PUT", "/v1/kv/k", strings.NewReader("v"))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Add(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || got == nil {
			t.Fatalf("forwarded: %d %s", rec.Code, rec.Body)
		}
		return got
	}

	hop := "Authorization, Content-Type, Fencing-Token, Fencing-Lock, Fencer-Log-Format"
	out := send(withACL, "Authorization", "Bearer client-secret-0123456789", "Connection", hop, "Content-Type", "application/json",
		"Fencing-Token", "5", "Fencing-Lock", "l", "Fencer-Log-Format", "1", wire.HeaderForwardedPrincipal, "node:n9")
	for h, want := range map[string]string{
		"Authorization": "Bearer client-secret-0123456789", "Content-Type": "application/json", "Fencing-Token": "5",
		"Fencing-Lock": "l", "Fencer-Log-Format": "1", wire.HeaderForwardedBy: "n2", wire.HeaderForwardedPrincipal: "app",
	} {
		if v := out.Values(h); len(v) != 1 || v[0] != want {
			t.Errorf("leader got %s %q, want %q", h, v, want)
		}
	}
	// Without an ACL there is no principal to name, and the client's claim
	// is not passed on.
	out = send(h, wire.HeaderForwardedPrincipal, "node:n9", "Fencing-Token", "5")
	if v := out.Get(wire.HeaderForwardedPrincipal); v != "" {
		t.Errorf("a client's %s %q reached the leader", wire.HeaderForwardedPrincipal, v)
	}
}

// Acquires and fenced writes carry the authenticated principal to the
// coordination layer, which binds request ids and counts store usage by it.
func TestPrincipalReachesCoord(t *testing.T) {
	f := &fakeCluster{leader: true}
	a, err := acl.Parse([]byte(`{"tokens":[{"name":"app","secret":"client-secret-0123456789","role":"client"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := acl.Middleware(acl.NewStore(a))(NewServer(f, f, nil).Handler())
	for _, c := range []call{
		{"POST", "/v1/locks/a/acquire", `{"holder":"w","request_id":"0123456789abcdef"}`, map[string]string{"Authorization": "Bearer client-secret-0123456789"}},
		{"PUT", "/v1/kv/k", "v", map[string]string{"Authorization": "Bearer client-secret-0123456789", wire.HeaderToken: "7"}},
	} {
		f.principal = ""
		if status, e, _ := do(t, h, c); status != 200 || f.principal != "app" {
			t.Fatalf("%s %s: %d %s, principal %q", c.method, c.path, status, e.Code, f.principal)
		}
	}
}
