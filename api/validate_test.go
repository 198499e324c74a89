package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// Holders that would print alike but compare different, or that
// encoding/json would quietly rewrite into U+FFFD, are refused; others pass
// through byte for byte.
func TestHolderCharacters(t *testing.T) {
	refused := map[string]string{
		"invalid UTF-8":           "w\xff",
		"truncated UTF-8":         "w\xe2\x82",
		"lone high surrogate":     `w\ud800`,
		"lone low surrogate":      `w\udc00x`,
		"high then non-low":       `w\ud800\u0041`,
		"C1 control (NEL)":        `w\u0085`,
		"C1 control, literal":     "w\u0085",
		"DEL":                     `w\u007f`,
		"bidi override RLO":       "w\u202e",
		"bidi embedding LRE":      `w\u202a`,
		"bidi isolate FSI":        "w\u2068",
		"bidi isolate PDI":        `w\u2069`,
		"line separator":          "w\u2028",
		"paragraph separator":     `w\u2029`,
		"zero-width space":        "w\u200b",
		"zero-width joiner":       `w\u200d`,
		"right-to-left mark":      "w\u200f",
		"byte order mark":         "\ufeffw",
		"escaped zero-width nbsp": `w\ufeff`,
	}
	for name, holder := range refused {
		t.Run(name, func(t *testing.T) {
			f := &fakeCluster{leader: true}
			status, e, _ := do(t, NewServer(f, f, nil).Handler(), call{"POST", "/v1/locks/a/acquire", `{"holder":"` + holder + `"}`, nil})
			if status != http.StatusBadRequest || e.Code != wire.CodeInvalidHolder || len(f.calls) != 0 {
				t.Fatalf("holder %q: %d %q (%s), calls %v; want 400 invalid_holder", holder, status, e.Code, e.Message, f.calls)
			}
		})
	}
	for body, want := range map[string]string{
		`"wörker-1"`:       "wörker-1",
		`"\ud83d\ude00 x"`: "\U0001F600 x",
		`"作業者"`:            "作業者",
		`"a\u00a0b"`:       "a\u00a0b", // a visible no-break space is fine
		`"\ufffd"`:         "\ufffd",   // a replacement character sent as such
	} {
		f := &fakeCluster{leader: true}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/locks/a/acquire", strings.NewReader(`{"holder":`+body+`}`))
		req.Header.Set("Content-Type", "application/json")
		NewServer(f, f, nil).Handler().ServeHTTP(rec, req)
		var g wire.Grant
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &g) != nil || g.Holder != want {
			t.Fatalf("holder %s: %d %s, want holder %q", body, rec.Code, rec.Body, want)
		}
	}
	// request_id follows the same rule, with its own code.
	f := &fakeCluster{leader: true}
	status, e, _ := do(t, NewServer(f, f, nil).Handler(), call{"POST", "/v1/locks/a/acquire", `{"holder":"w","request_id":"r` + "\xff" + `"}`, nil})
	if status != http.StatusBadRequest || e.Code != wire.CodeInvalidRequestID {
		t.Fatalf("request_id with invalid UTF-8: %d %q", status, e.Code)
	}
}

// Field names match exactly and once: encoding/json alone would take
// "HOLDER" for "holder" and the last of two "holder"s.
func TestJSONFieldNamesExactAndOnce(t *testing.T) {
	for _, c := range []call{
		{"POST", "/v1/locks/a/acquire", `{"Holder":"w"}`, nil},
		{"POST", "/v1/locks/a/acquire", `{"holder":"w","TTL_MS":1000}`, nil},
		{"POST", "/v1/locks/a/acquire", `{"holder":"a","holder":"b"}`, nil},
		{"POST", "/v1/locks/a/acquire", `{"holder":"a","hold\u0065r":"b"}`, nil},
		{"POST", "/v1/locks/a/acquire", `{"holder":"a","ttl_ms":1000,"ttl_ms":2000}`, nil},
		{"POST", "/v1/locks/a/acquire", `null`, nil},
		{"POST", "/v1/locks/a/acquire", `["holder","w"]`, nil},
		{"POST", "/v1/locks/a/renew", `{"Lease":"0123456789abcdef0123456789abcdef","token":3}`, nil},
		{"POST", "/v1/locks/a/release", `{` + lease + `,"token":3,"token":4}`, nil},
		{"POST", "/v1/cluster/members", `{"id":"n4","ID":"n5","raft_addr":"127.0.0.1:8004","http_addr":"127.0.0.1:7004"}`, nil},
		{"POST", "/v1/cluster/join", `{"id":"n4","raft_addr":"127.0.0.1:8004","http_addr":"127.0.0.1:7004","Voter":true}`, nil},
		{"POST", "/v1/cluster/leader/transfer", `{"Id":"n2"}`, nil},
		{"POST", "/v1/cluster/members", `{"id":"n\udfff4","raft_addr":"127.0.0.1:8004","http_addr":"127.0.0.1:7004"}`, nil},
	} {
		f := &fakeCluster{leader: true}
		status, e, _ := do(t, NewServer(f, f, nil).Handler(), c)
		if status != http.StatusBadRequest || e.Code != wire.CodeInvalidJSON || len(f.calls) != 0 {
			t.Errorf("%s %s: %d %q (%s), calls %v; want 400 invalid_json", c.path, c.body, status, e.Code, e.Message, f.calls)
		}
	}
	// Deep nesting is refused without walking it.
	deep := `{"holder":"w","x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	if status, e, _ := do(t, newFakeServer(&fakeCluster{leader: true}).Handler(), call{"POST", "/v1/locks/a/acquire", deep, nil}); status != 400 || e.Code != wire.CodeInvalidJSON {
		t.Fatalf("deep nesting: %d %q", status, e.Code)
	}
}

// "." and ".." are path segments to every proxy and most clients: never
// names or keys.
func TestDotNamesRefused(t *testing.T) {
	for _, c := range []struct {
		call call
		code string
	}{
		{call{"POST", "/v1/locks/./acquire", `{"holder":"w"}`, nil}, wire.CodeInvalidName},
		{call{"POST", "/v1/locks/../acquire", `{"holder":"w"}`, nil}, wire.CodeInvalidName},
		{call{"GET", "/v1/locks/..", "", nil}, wire.CodeInvalidName},
		{call{"GET", "/v1/locks/./check?token=1", "", nil}, wire.CodeInvalidName},
		{call{"PUT", "/v1/kv/..", "v", map[string]string{"Fencing-Token": "5"}}, wire.CodeInvalidKey},
		{call{"GET", "/v1/kv/.", "", nil}, wire.CodeInvalidKey},
		{call{"PUT", "/v1/kv/k", "v", map[string]string{"Fencing-Token": "5", "Fencing-Lock": ".."}}, wire.CodeInvalidName},
	} {
		f := &fakeCluster{leader: true}
		status, e, _ := do(t, NewServer(f, f, nil).Handler(), c.call)
		if status != http.StatusBadRequest || e.Code != c.code || len(f.calls) != 0 {
			t.Errorf("%s %s: %d %q, calls %v; want 400 %s", c.call.method, c.call.path, status, e.Code, f.calls, c.code)
		}
	}
	f := &fakeCluster{leader: true}
	if status, _, _ := do(t, NewServer(f, f, nil).Handler(), call{"POST", "/v1/locks/.../acquire", `{"holder":"w"}`, nil}); status != 200 {
		t.Fatalf(`"..." refused: %d`, status)
	}
}

// Member addresses must be dialable: "members add" with a raft_addr that is
// not HOST:PORT would sit in the configuration counting towards the quorum.
func TestMemberAddresses(t *testing.T) {
	body := func(raft, http string) string {
		b, _ := json.Marshal(wire.AddMemberRequest{ID: "n4", RaftAddr: raft, HTTPAddr: http})
		return string(b)
	}
	for _, a := range []struct {
		raft, http string
		ok         bool
	}{
		{"10.0.0.4:8001", "10.0.0.4:7001", true},
		{"[::1]:8001", "[::1]:7001", true},
		{"n4.example.com:8001", "https://n4.example.com:7001", true},
		{"n4:8001", "http://n4:7001", true},
		{"n4:8001", ":7001", true},
		{"not an address", "10.0.0.4:7001", false},
		{"10.0.0.4", "10.0.0.4:7001", false},
		{":8001", "10.0.0.4:7001", false},
		{"10.0.0.4:0", "10.0.0.4:7001", false},
		{"10.0.0.4:65536", "10.0.0.4:7001", false},
		{"10.0.0.4:http", "10.0.0.4:7001", false},
		{"n4..example:8001", "10.0.0.4:7001", false},
		{"n4/x:8001", "10.0.0.4:7001", false},
		{"10.0.0.4:8001", "not an address", false},
		{"10.0.0.4:8001", "ftp://10.0.0.4:7001", false},
		{"10.0.0.4:8001", "10.0.0.4:7001/path", false},
	} {
		for _, path := range []string{"/v1/cluster/members", "/v1/cluster/join"} {
			f := &fakeCluster{leader: true}
			status, e, _ := do(t, NewServer(f, f, nil).Handler(), call{"POST", path, body(a.raft, a.http), nil})
			if a.ok && status != 200 || !a.ok && (status != 400 || e.Code != wire.CodeInvalidMember || len(f.calls) != 0) {
				t.Errorf("%s raft_addr %q http_addr %q: %d %q (%s), want ok=%v", path, a.raft, a.http, status, e.Code, e.Message, a.ok)
			}
		}
	}
}

// Load balancers probe with HEAD.
func TestProbesAnswerHEAD(t *testing.T) {
	for _, path := range []string{"/healthz", "/readyz"} {
		rec := httptest.NewRecorder()
		newFakeServer(&fakeCluster{leader: true}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodHead, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("HEAD %s: %d", path, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	newFakeServer(&fakeCluster{leader: false}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("HEAD /readyz without a leader: %d", rec.Code)
	}
}

// Every acquire that takes ttl_ms (a lock, an election's value-publishing
// acquire, a semaphore's permit) defaults a missing TTL and refuses an
// explicit 0 or negative one with invalid_ttl, as the CLI refuses --ttl 0:
// "ttl_ms":0 used to become 10 s without a word. Renewals take no TTL (a
// renewal extends by the grant's own).
func TestExplicitZeroTTLRefused(t *testing.T) {
	for _, ep := range []struct{ name, path, fields string }{
		{"lock", "/v1/locks/a/acquire", `"holder":"w"`},
		{"election", "/v1/locks/a/acquire", `"holder":"w","value":"10.0.0.7:8080","wait_ms":1000`},
		{"semaphore", "/v1/semaphores/s/acquire", `"holder":"w","limit":2`},
	} {
		t.Run(ep.name, func(t *testing.T) {
			for body, want := range map[string]time.Duration{
				`{` + ep.fields + `}`:                               wire.DefaultTTL,
				`{` + ep.fields + `,"ttl_ms":null}`:                 wire.DefaultTTL,
				`{` + ep.fields + `,"ttl_ms":100}`:                  100 * time.Millisecond,
				`{"ttl_ms":86400000,` + ep.fields + `}`:             wire.MaxTTL,
				`{` + ep.fields + `,"ttl_ms":0}`:                    0,
				`{"ttl_ms":0,` + ep.fields + `}`:                    0,
				`{` + ep.fields + `,"ttl_ms":-1}`:                   0,
				`{` + ep.fields + `,"ttl_ms":-9223372036854775808}`: 0,
				`{` + ep.fields + `,"ttl_ms":99}`:                   0,
				`{` + ep.fields + `,"ttl_ms":86400001}`:             0,
			} {
				f := &fakeCluster{leader: true}
				status, e, _ := do(t, NewServer(f, f, nil).Handler(), call{"POST", ep.path, body, nil})
				if want == 0 {
					if status != http.StatusBadRequest || e.Code != wire.CodeInvalidTTL || len(f.calls) != 0 {
						t.Errorf("%s: %d %q (%s), calls %v; want 400 invalid_ttl and nothing done", body, status, e.Code, e.Message, f.calls)
					}
					continue
				}
				if status != http.StatusOK || f.ttl != want {
					t.Errorf("%s: %d %q (%s), lease asked for %v; want 200 and %v", body, status, e.Code, e.Message, f.ttl, want)
				}
			}
		})
	}
}
