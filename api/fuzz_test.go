package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// fuzzErrs are the answers the fake cluster can give, chosen by a fuzzed byte.
var fuzzErrs = []error{
	nil,
	&refusal.HeldError{Lock: "a", Holder: "w0", Token: 4},
	refusal.ErrLeaseLost,
	&refusal.StaleError{Key: "k", Token: 5, LastToken: 9},
	refusal.ErrNotLockHolder,
	cluster.ErrNoLeader,
	cluster.ErrOutcomeUnknown,
	coord.ErrTooManyWaiters,
	cluster.ErrMemberConflict,
	cluster.ErrUnknownMember,
	errors.New("boom"),
	&refusal.UnissuedError{Key: "k", Token: 1 << 62},
	coord.ErrKVFull,
	refusal.ErrNoSuchKey,
	entry.ErrFormatTooOld,
	cluster.ErrInvalidEpoch,
}

// fuzzHeaders are the header names a fuzzed request may carry, chosen by a
// fuzzed byte; the value is fuzzed.
var fuzzHeaders = []string{wire.HeaderToken, wire.HeaderLock, "Content-Type", "Content-Length", wire.HeaderForwardedBy, "Authorization", "X-Other", wire.HeaderForwardedPrincipal, "Connection", "Host", "Origin", "Sec-Fetch-Site"}

// validHeaderValue reports whether v could arrive on the wire: net/http's
// server refuses header values with control characters other than tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// FuzzHandlers sends random requests to every route. The handler never
// panics; every error response is a JSON body with a code and a message; a
// request refused for its input (400, 413, 428) never reaches the cluster;
// a JSON success body is valid JSON; and what succeeds passed the input
// rules: no "." or ".." name, a holder of visible UTF-8 from a body of valid
// UTF-8, member addresses of HOST:PORT, JSON bodies sent as
// application/json, a Host the node answers to and no cross-origin state
// change (the fuzzed node has no access control, so its browser guard is
// on).
func FuzzHandlers(f *testing.F) {
	type seed struct {
		method, path string
		hdr          uint8
		hdrValue     string
		body         string
		flags        uint8 // bit 0: leader; bits 1..: index into fuzzErrs
	}
	for _, s := range []seed{
		{"POST", "/v1/locks/a/acquire", 0, "", `{"holder":"w","ttl_ms":1000,"wait_ms":0,"request_id":"r-0123456789abcdef"}`, 1},
		// A request id too short to be unguessable.
		{"POST", "/v1/locks/a/acquire", 0, "", `{"holder":"w","request_id":"r-123456789abcd"}`, 1},
		{"POST", "/v1/locks/a/acquire", 0, "", `{"holder":"w"}`, 1 | 1<<1},
		{"POST", "/v1/locks/a/renew", 0, "", `{` + lease + `,"token":3}`, 1},
		{"POST", "/v1/locks/a/release", 0, "", `{` + lease + `,"token":3}`, 1 | 2<<1},
		{"GET", "/v1/locks/a", 0, "", "", 1},
		{"GET", "/v1/locks", 0, "", "", 1},
		{"GET", "/v1/locks/a?stale=true", 0, "", "", 0},
		{"GET", "/v1/locks/a/check?token=7", 0, "", "", 1},
		{"GET", "/v1/locks/a/check?token=07", 0, "", "", 1},
		{"PUT", "/v1/kv/k", 0, "5", "value", 1},
		{"PUT", "/v1/kv/k", 0, "5", "value", 1 | 3<<1},
		{"PUT", "/v1/kv/k", 1, "a", "value", 1},
		{"GET", "/v1/kv/k", 0, "", "", 1},
		{"DELETE", "/v1/kv/k", 0, "", "", 1},
		{"DELETE", "/v1/kv/k", 0, "", "", 1 | 13<<1},
		{"PUT", "/v1/kv/k", 0, "18446744073709551615", "value", 1 | 11<<1},
		{"PUT", "/v1/kv/k", 0, "5", "value", 1 | 12<<1},
		{"POST", "/v1/cluster/restore?min_epoch=16777215", 0, "", "{}", 1 | 15<<1},
		{"POST", "/v1/cluster/restore?min_epoch=16777216", 0, "", "{}", 1},
		{"GET", "/v1/cluster", 0, "", "", 1},
		{"POST", "/v1/cluster/join", 0, "", `{"id":"n4","raft_addr":"127.0.0.1:8004","http_addr":"127.0.0.1:7004"}`, 1},
		{"POST", "/v1/cluster/members", 0, "", `{"id":"n4","raft_addr":"127.0.0.1:8004","http_addr":"127.0.0.1:7004","voter":false}`, 1},
		{"DELETE", "/v1/cluster/members/n2", 0, "", "", 1 | 9<<1},
		{"POST", "/v1/cluster/leader/transfer", 3, "2", `{}`, 1},
		{"POST", "/v1/cluster/leader/transfer", 0, "", ``, 0},
		{"GET", "/v1/debug/state", 0, "", "", 1},
		{"GET", "/healthz", 0, "", "", 0},
		{"GET", "/readyz", 0, "", "", 0},
		{"PATCH", "/v1/locks/a/acquire", 0, "", "", 1},
		{"GET", "/v1/nope/%zz", 0, "", "", 1},
		{"POST", "/v1/locks/a%2Fb/acquire", 5, "Bearer x", `{"holder":"w"}`, 1},
		// ttl_ms whose conversion to a Duration overflowed into range.
		{"POST", "/v1/locks/a/acquire", 0, "", `{"holder":"w","ttl_ms":288230376151721744}`, 1},
		// Field names only case-insensitively right; a key twice.
		{"POST", "/v1/locks/a/acquire", 0, "", `{"HOLDER":"w"}`, 1},
		{"POST", "/v1/locks/a/release", 0, "", `{` + lease + `,"token":3,"Token":4}`, 1},
		// Holders that encoding/json would rewrite, or that do not show.
		{"POST", "/v1/locks/a/acquire", 0, "", "{\"holder\":\"w\xff\"}", 1},
		{"POST", "/v1/locks/a/acquire", 0, "", `{"holder":"w\udc00"}`, 1},
		{"POST", "/v1/locks/a/acquire", 0, "", `{"holder":"w\u202e\u200b"}`, 1},
		{"POST", "/v1/locks/a/acquire", 0, "", `{"holder":"\ud83d\ude00"}`, 1},
		// Dot names and keys.
		{"POST", "/v1/locks/../acquire", 0, "", `{"holder":"w"}`, 1},
		{"PUT", "/v1/kv/.", 0, "5", "v", 1},
		// A member address that is no address.
		{"POST", "/v1/cluster/members", 0, "", `{"id":"n4","raft_addr":"not an address","http_addr":"127.0.0.1:7004"}`, 1},
		// Bodies of another type; a rebinding page's Host; a cross-site
		// state change.
		{"POST", "/v1/locks/a/acquire", 2, "text/plain", `{"holder":"w"}`, 1},
		{"GET", "/v1/cluster/snapshot", 9, "evil.example:7001", "", 1},
		{"POST", "/v1/cluster/leader/transfer", 11, "cross-site", "", 1},
		{"POST", "/v1/cluster/restore", 10, "http://evil.example", "x", 1},
		// Probes by HEAD.
		{"HEAD", "/healthz", 0, "", "", 0},
		{"HEAD", "/readyz", 0, "", "", 1},
	} {
		f.Add(s.method, s.path, s.hdr, s.hdrValue, []byte(s.body), s.flags)
	}

	f.Fuzz(func(t *testing.T, method, path string, hdr uint8, hdrValue string, body []byte, flags uint8) {
		if _, err := url.ParseRequestURI(path); err != nil || !strings.HasPrefix(path, "/") {
			t.Skip("not a request target a server would accept")
		}
		req, err := http.NewRequest(method, "http://fencer.test"+path, bytes.NewReader(body))
		if err != nil {
			t.Skip("not a request a server would accept")
		}
		req.Header.Set("Content-Type", "application/json") // unless the fuzzed header replaces it
		if name := fuzzHeaders[int(hdr)%len(fuzzHeaders)]; validHeaderValue(hdrValue) {
			if name == "Content-Length" {
				// The server frames the body by its length; a request whose
				// length disagrees with its body never reaches a handler.
				req.ContentLength = int64(len(body))
			} else if name == "Host" {
				req.Host = hdrValue
			} else {
				req.Header.Set(name, hdrValue)
			}
		}
		fake := &fakeCluster{leader: flags&1 == 1, err: fuzzErrs[int(flags>>1)%len(fuzzErrs)]}
		rec := httptest.NewRecorder()
		NewServer(fake, fake, nil, WithBrowserGuard([]string{"fencer.test"}), WithLeaderWait(0)).Handler().ServeHTTP(rec, req)

		out := rec.Body.Bytes()
		if rec.Code >= 400 {
			var e wire.Error
			if err := json.Unmarshal(out, &e); err != nil {
				t.Fatalf("%s %s: %d error body %q is not JSON: %v", method, path, rec.Code, out, err)
			}
			if e.Code == "" || e.Message == "" {
				t.Fatalf("%s %s: %d error body %q lacks code or message", method, path, rec.Code, out)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("%s %s: error with Content-Type %q", method, path, ct)
			}
			switch rec.Code {
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusPreconditionRequired, http.StatusUnsupportedMediaType,
				http.StatusMisdirectedRequest, http.StatusForbidden:
				if fake.err == nil && len(fake.calls) != 0 {
					t.Fatalf("%s %s: input refused with %d (%s) after reaching the cluster: %v", method, path, rec.Code, e.Code, fake.calls)
				}
			case http.StatusServiceUnavailable:
				if rec.Header().Get("Retry-After") == "" {
					t.Fatalf("%s %s: 503 without Retry-After", method, path)
				}
			}
			return
		}
		if rec.Header().Get("Content-Type") == "application/json" && !json.Valid(out) {
			t.Fatalf("%s %s: %d body %q is not JSON", method, path, rec.Code, out)
		}
		// Without access control: only names the node answers to, and no
		// state change from a browser on another origin.
		if host := hostName(req.Host); host != "" && host != "localhost" && host != "fencer.test" {
			if _, err := netip.ParseAddr(host); err != nil {
				t.Fatalf("%s %s: %d for Host %q", method, path, rec.Code, req.Host)
			}
		}
		if site := req.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" &&
			method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions {
			t.Fatalf("%s %s: %d with Sec-Fetch-Site %q", method, path, rec.Code, site)
		}
		for _, seg := range strings.Split(req.URL.EscapedPath(), "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%s %s: %d for a path with a %q segment", method, path, rec.Code, seg)
			}
		}
		var member wire.AddMemberRequest
		if strings.HasPrefix(req.URL.Path, "/v1/cluster/") && json.Unmarshal(body, &member) == nil && member.RaftAddr != "" {
			if _, port, err := net.SplitHostPort(member.RaftAddr); err != nil || port == "" {
				t.Fatalf("%s %s: %d for raft_addr %q", method, path, rec.Code, member.RaftAddr)
			}
		}
		// A granted lease has the TTL that was asked for, never another one.
		var asked wire.AcquireRequest
		var got wire.Grant
		if strings.HasSuffix(req.URL.Path, "/acquire") && json.Unmarshal(body, &asked) == nil && asked.TTLMillis != 0 &&
			json.Unmarshal(out, &got) == nil && got.TTLMillis != asked.TTLMillis {
			t.Fatalf("acquire with ttl_ms %d granted a lease of %d ms", asked.TTLMillis, got.TTLMillis)
		}
		if strings.HasSuffix(req.URL.Path, "/acquire") && json.Unmarshal(out, &got) == nil && got.Lock != "" {
			if !utf8.Valid(body) || !request.Printable(got.Holder, request.MaxHolderLen) {
				t.Fatalf("acquire granted to holder %q from body %q", got.Holder, body)
			}
			if n := utf8.RuneCountInString(asked.RequestID); asked.RequestID != "" && (n < wire.MinRequestIDLen || len(asked.RequestID) > wire.MaxRequestIDLen) {
				t.Fatalf("acquire granted for request id %q of %d characters", asked.RequestID, n)
			}
		}
	})
}

// FuzzDecodeJSON checks the strict decoding of request bodies against a
// plain reading of the same bytes: what it accepts is valid UTF-8, and each
// field it decoded is the one value under exactly that name (no
// case-insensitive match, no duplicate key deciding by position).
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"holder":"w","ttl_ms":1000}`, `{"holder":"a","holder":"b"}`, `{"Holder":"w"}`, `{"holder":"w\ud800"}`,
		"{\"holder\":\"\xff\"}", `{"holder":"\ud83d\ude00","request_id":"r"}`, `null`, `{"holder":"w","x":{"a":1,"a":2}}`,
		`{"holder":"w"} {}`, `{"holder":"w","wait_ms":1e3}`, `{"hold\u0065r":"w"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v1/locks/a/acquire", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		var got wire.AcquireRequest
		if err := request.DecodeJSON(httptest.NewRecorder(), req, &got); err != nil {
			var e *wire.Error
			if !errors.As(err, &e) || e.Code == "" || e.Message == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("accepted invalid UTF-8: %q", body)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatalf("accepted %q, which is no JSON object: %v", body, err)
		}
		for name := range fields {
			if name != "holder" && name != "ttl_ms" && name != "wait_ms" && name != "request_id" {
				t.Fatalf("accepted field %q in %q", name, body)
			}
		}
		var holder string
		if raw, ok := fields["holder"]; ok && (json.Unmarshal(raw, &holder) != nil || holder != got.Holder) {
			t.Fatalf("holder decoded as %q, but the body's one \"holder\" is %s", got.Holder, raw)
		}
	})
}
