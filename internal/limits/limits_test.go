package limits

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/acl"
)

func send(h http.Handler, remote, path string, ctx context.Context) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, nil).WithContext(ctx)
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestRateLimitPerClient(t *testing.T) {
	mw, err := RateLimit(RateConfig{Requests: 3, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }))
	bg := context.Background()
	for i := 0; i < 3; i++ {
		if rec := send(h, "10.0.0.1:5000", "/v1/locks/a/acquire", bg); rec.Code != 200 {
			t.Fatalf("request %d: %d", i, rec.Code)
		}
	}
	rec := send(h, "10.0.0.1:5001", "/v1/locks/a/acquire", bg)
	var body struct{ Error, Code string }
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusTooManyRequests || body.Code != wire.CodeRateLimited || body.Error == "" || rec.Header().Get("Retry-After") != "60" {
		t.Fatalf("over the limit: %d %+v Retry-After %q", rec.Code, body, rec.Header().Get("Retry-After"))
	}
	if reached != 3 {
		t.Fatalf("a refused request reached the handler: %d", reached)
	}
	// Another client has its own budget, and probes are never limited.
	if rec := send(h, "10.0.0.2:5000", "/v1/locks/a/acquire", bg); rec.Code != 200 {
		t.Fatalf("other client: %d", rec.Code)
	}
	if rec := send(h, "10.0.0.1:5000", "/healthz", bg); rec.Code != 200 {
		t.Fatalf("healthz limited: %d", rec.Code)
	}
	// An IPv6 client cannot escape by rotating addresses within its /64.
	for i, addr := range []string{"[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8::3]:1", "[2001:db8::4]:1"} {
		if rec := send(h, addr, "/v1/kv/k", bg); (rec.Code == 200) != (i < 3) {
			t.Fatalf("IPv6 request %d: %d", i, rec.Code)
		}
	}
}

func TestRateLimitKeysByPrincipal(t *testing.T) {
	mw, err := RateLimit(RateConfig{Requests: 1, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	a, _ := acl.Parse([]byte(`{"tokens":[{"name":"ci","secret":"ci-secret-0123456789","role":"client","keys":["*"]},{"name":"ops","secret":"ops-secret-0123456789","role":"operator","keys":["*"]}]}`))
	auth := acl.Middleware(acl.NewStore(a))
	h = auth(h)
	do := func(secret string) int {
		req := httptest.NewRequest("GET", "/v1/locks", nil)
		req.RemoteAddr = "10.0.0.9:1" // one IP: e.g. a follower forwarding for both
		req.Header.Set("Authorization", "Bearer "+secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if do("ci-secret-0123456789") != 200 || do("ops-secret-0123456789") != 200 {
		t.Fatal("first request of each principal refused")
	}
	if do("ci-secret-0123456789") != 429 {
		t.Fatal("second request of ci not limited")
	}
}

func TestRateLimitExemptAndDisabled(t *testing.T) {
	mw, err := RateLimit(RateConfig{Requests: 1, Window: time.Minute, Exempt: func(r *http.Request) bool { return r.Header.Get("X-Exempt") != "" }})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := 0; i < 3; i++ {
		req := httptest.NewRequest("GET", "/v1/locks", nil)
		req.Header.Set("X-Exempt", "1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("exempt request limited: %d", rec.Code)
		}
	}
	off, err := RateLimit(RateConfig{Requests: -1})
	if err != nil {
		t.Fatal(err)
	}
	h = off(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := 0; i < 200; i++ {
		if rec := send(h, "10.0.0.1:1", "/v1/locks", context.Background()); rec.Code != 200 {
			t.Fatal("disabled limiter limited")
		}
	}
	if _, err := RateLimit(RateConfig{Window: time.Millisecond}); err == nil {
		t.Fatal("sub-second window accepted")
	}
	cfg := RateConfig{}
	if err := cfg.Validate(); err != nil || cfg.Requests != DefaultRateRequests || cfg.Window != DefaultRateWindow {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	if req := httptest.NewRequest("GET", "/", nil); ForwardedByNode(req) {
		t.Fatal("plain request counted as forwarded")
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Fencer-Forwarded-By", "n2")
	if ForwardedByNode(req) {
		t.Fatal("a forwarding header without a node certificate was trusted")
	}
}

func TestMaxBody(t *testing.T) {
	var got []byte
	var readErr error
	h := MaxBody(10, "/v1/cluster/restore")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, readErr = io.ReadAll(r.Body)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/kv/k", strings.NewReader(strings.Repeat("x", 11))))
	var body struct{ Code string }
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != 413 || body.Code != wire.CodeBodyTooLarge || got != nil {
		t.Fatalf("announced oversized body: %d %q reached=%v", rec.Code, body.Code, got != nil)
	}
	// A body whose length is not announced is cut at the cap.
	req := httptest.NewRequest("PUT", "/v1/kv/k", io.NopCloser(strings.NewReader(strings.Repeat("x", 11))))
	req.ContentLength = -1
	h.ServeHTTP(httptest.NewRecorder(), req)
	if readErr == nil {
		t.Fatal("an unannounced oversized body was read whole")
	}
	got, readErr = nil, nil
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/cluster/restore", strings.NewReader(strings.Repeat("x", 100))))
	if len(got) != 100 || readErr != nil {
		t.Fatalf("exempt path capped: %d %v", len(got), readErr)
	}
}

func TestServerConfig(t *testing.T) {
	var c ServerConfig
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{}
	c.Apply(srv)
	if srv.ReadHeaderTimeout != DefaultReadHeaderTimeout || srv.WriteTimeout != DefaultWriteTimeout || srv.MaxHeaderBytes != DefaultMaxHeaderBytes || c.MaxBodyBytes != DefaultMaxBodyBytes {
		t.Fatalf("defaults not applied: %+v", srv)
	}
	if err := (&ServerConfig{ReadTimeout: -1}).Validate(); err == nil {
		t.Fatal("negative timeout accepted")
	}
}
