package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

// A web page can send text/plain, form and multipart bodies anywhere
// without the browser asking first: JSON bodies must be application/json.
func TestJSONBodiesNeedJSONType(t *testing.T) {
	member := `{"id":"n4","raft_addr":"127.0.0.1:8004","http_addr":"127.0.0.1:7004"}`
	routes := []call{
		{"POST", "/v1/locks/a/acquire", `{"holder":"w"}`, nil},
		{"POST", "/v1/locks/a/renew", `{` + lease + `,"token":3}`, nil},
		{"POST", "/v1/locks/a/release", `{` + lease + `,"token":3}`, nil},
		{"POST", "/v1/cluster/join", member, nil},
		{"POST", "/v1/cluster/members", member, nil},
		{"POST", "/v1/cluster/leader/transfer", `{"id":"n1"}`, nil},
	}
	for _, route := range routes {
		for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
			"application/jsonx", "text/json", "application/json; charset=latin1", "application/json;;", "application/json, text/plain"} {
			f := &fakeCluster{leader: true}
			c := route
			c.headers = map[string]string{"Content-Type": ct}
			status, e, _ := do(t, NewServer(f, f, nil).Handler(), c)
			if status != http.StatusUnsupportedMediaType || e.Code != wire.CodeUnsupportedMediaType || len(f.calls) != 0 {
				t.Errorf("%s with Content-Type %q: %d %q, calls %v; want 415 unsupported_media_type", c.path, ct, status, e.Code, f.calls)
			}
		}
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=UTF-8", "application/json; x=y"} {
			f := &fakeCluster{leader: true}
			c := route
			c.headers = map[string]string{"Content-Type": ct}
			if status, e, _ := do(t, NewServer(f, f, nil).Handler(), c); status != http.StatusOK {
				t.Errorf("%s with Content-Type %q: %d %q", c.path, ct, status, e.Code)
			}
		}
	}
	// The body of a fenced write is the value itself: any type will do (a
	// page cannot send a PUT to another origin without asking first).
	f := &fakeCluster{leader: true}
	if status, _, _ := do(t, NewServer(f, f, nil).Handler(), call{"PUT", "/v1/kv/k", "v", map[string]string{"Fencing-Token": "5", "Content-Type": "text/plain"}}); status != http.StatusOK {
		t.Fatalf("fenced write as text/plain: %d", status)
	}
}

// membersAt is a leader whose members serve at the given HTTP addresses.
type membersAt struct {
	fakeCluster
	addrs []string
}

func (m *membersAt) Status() (wire.ClusterStatus, error) {
	st := wire.ClusterStatus{Node: "n1"}
	for _, a := range m.addrs {
		st.Members = append(st.Members, wire.Member{HTTPAddr: a})
	}
	return st, nil
}

// Without access control, a node answers requests that name it by an IP
// address, localhost, an allowed name or a member's name, and nothing else:
// a page whose name was re-pointed at the node (DNS rebinding) cannot read
// its answers.
func TestHostCheck(t *testing.T) {
	f := &membersAt{fakeCluster: fakeCluster{leader: true}, addrs: []string{"127.0.0.1:7001", "n3.example:7003", "https://n4.example:7004"}}
	guarded := NewServer(f, f, nil, WithBrowserGuard([]string{"fencer.internal", "n1.example:7001", "http://n2.example:7002", "127.0.0.1:7001"})).Handler()
	get := func(h http.Handler, host string) (int, string) {
		req := httptest.NewRequest("GET", "/v1/cluster/snapshot", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	for _, host := range []string{"127.0.0.1:7001", "10.1.2.3", "[::1]:7001", "[fe80::1%25eth0]:7001", "localhost:7001", "LOCALHOST.", "localhost",
		"fencer.internal", "Fencer.Internal:443", "n1.example:9999", "n2.example", "n3.example:7003", "n4.example", ""} {
		if status, body := get(guarded, host); status != http.StatusOK {
			t.Errorf("Host %q: %d %s", host, status, body)
		}
	}
	f.calls = nil
	for _, host := range []string{"evil.example", "evil.example:7001", "localhost.evil.example", "127.0.0.1.evil.example:7001", "sub.localhost", "fencer.internal.evil", "n3.example.evil:7003"} {
		status, body := get(guarded, host)
		if status != http.StatusMisdirectedRequest || !strings.Contains(body, wire.CodeHostNotAllowed) {
			t.Errorf("Host %q: %d %s, want 421 host_not_allowed", host, status, body)
		}
	}
	if len(f.calls) != 0 {
		t.Fatalf("refused hosts reached the cluster: %v", f.calls)
	}
	// A node with access control (no guard) answers to any name.
	if status, _ := get(NewServer(f, f, nil).Handler(), "evil.example"); status != http.StatusOK {
		t.Fatalf("no guard: %d", status)
	}
}

// Without access control, a browser may not change state from another
// origin, whatever the body: restore and transfer need none.
func TestCrossOriginRefused(t *testing.T) {
	send := func(method, path, body string, headers ...string) (int, *fakeCluster) {
		f := &fakeCluster{leader: true}
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Host = "localhost:7001"
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		NewServer(f, f, nil, WithBrowserGuard(nil)).Handler().ServeHTTP(rec, req)
		return rec.Code, f
	}
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "http://evil.example"},
		{"Origin", "http://localhost:7002"},
	} {
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/v1/cluster/leader/transfer", ""},
			{"POST", "/v1/cluster/restore", "snapshot bytes"},
			{"POST", "/v1/locks/a/acquire", `{"holder":"w"}`},
			{"DELETE", "/v1/cluster/members/n2", ""},
		} {
			status, f := send(r.method, r.path, r.body, append([]string{"Content-Type", "application/json"}, h...)...)
			if status != http.StatusForbidden || len(f.calls) != 0 {
				t.Errorf("%s %s with %q: %d, calls %v; want 403 cross_origin", r.method, r.path, h, status, f.calls)
			}
		}
	}
	for _, h := range [][]string{nil, {"Sec-Fetch-Site", "same-origin"}, {"Sec-Fetch-Site", "none"}, {"Origin", "http://localhost:7001"}} {
		if status, _ := send("POST", "/v1/cluster/leader/transfer", "", h...); status != http.StatusOK {
			t.Errorf("transfer with %q: %d", h, status)
		}
	}
}
