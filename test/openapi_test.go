package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/fencer-io/fencer/api"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// exchange is one request and its response, as a client saw them.
type exchange struct {
	req    *http.Request
	status int
	header http.Header
	body   []byte
}

// recorder is an http.RoundTripper that keeps every exchange it carries.
type recorder struct {
	mu   sync.Mutex
	seen []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.seen = append(r.seen, exchange{req: req, status: resp.StatusCode, header: resp.Header.Clone(), body: body})
	r.mu.Unlock()
	return resp, nil
}

// validate checks every recorded response against openapi.yaml: its route
// and status must be described, its headers and body must match.
func (r *recorder) validate(t *testing.T) {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = nil // match paths on any host: the nodes listen on random ports
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	r.mu.Lock()
	defer r.mu.Unlock()
	codes := map[string]bool{}
	for _, ex := range r.seen {
		body := bytes.TrimSpace(ex.body)
		if len(body) > 200 {
			body = append(body[:200:200], "…"...)
		}
		what := fmt.Sprintf("%s %s -> %d %s", ex.req.Method, ex.req.URL.RequestURI(), ex.status, body)
		route, params, err := router.FindRoute(ex.req)
		if err != nil {
			t.Errorf("%s: no route in openapi.yaml: %v", what, err)
			continue
		}
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: ex.req, PathParams: params, Route: route, Options: opts},
			Status:                 ex.status,
			Header:                 ex.header,
			Options:                opts,
		}
		in.SetBodyBytes(ex.body)
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			msg := err.Error()
			if i := strings.Index(msg, "\nSchema:"); i > 0 {
				msg = msg[:i] // not the whole document
			}
			t.Errorf("%s: does not match openapi.yaml: %s", what, msg)
		}
		if ex.status >= 400 && ex.req.Method != http.MethodHead {
			var e wire.Error
			if json.Unmarshal(ex.body, &e) == nil {
				codes[e.Code] = true
			}
		}
	}
	t.Logf("validated %d responses against openapi.yaml; error codes seen: %v", len(r.seen), codes)
}

// TestResponsesMatchOpenAPI sends a representative set of requests, successes
// and refusals, to a real cluster (through a follower, so forwarding is
// included, and to an ACL'd node for 401 and 403) and validates every
// response against api/openapi.yaml.
func TestResponsesMatchOpenAPI(t *testing.T) {
	rec := &recorder{}
	hc := &http.Client{Transport: rec, Timeout: 20 * time.Second}
	send := func(method, url, body string, headers ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" && strings.HasPrefix(body, "{") {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(headers); i += 2 {
			if headers[i] == "Host" {
				req.Host = headers[i+1]
				continue
			}
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// expect sends the request, fails unless it is answered wantStatus, and
	// returns the body.
	expect := func(wantStatus int, method, url, body string, headers ...string) string {
		t.Helper()
		status, resp := send(method, url, body, headers...)
		if status != wantStatus {
			t.Fatalf("%s %s: status %d (%s), want %d", method, url, status, resp, wantStatus)
		}
		return resp
	}

	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	c.WaitReady(15 * time.Second)
	follower := c.Other(leader)
	for _, u := range []string{leader.URL(), follower.URL()} {
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			expect(200, m, u+"/healthz", "")
			expect(200, m, u+"/readyz", "")
		}
		expect(200, "GET", u+"/v1/openapi.yaml", "")
		expect(200, "GET", u+"/metrics", "")
		expect(200, "GET", u+"/v1/cluster", "")
		expect(200, "GET", u+"/v1/debug/state", "")
	}
	f := follower.URL()
	var g wire.Grant
	mustJSON(t, expect(200, "POST", f+"/v1/locks/jobs.a/acquire", `{"holder":"w1","ttl_ms":10000,"wait_ms":0,"request_id":"openapi-test-request-0001"}`), &g)
	expect(200, "POST", f+"/v1/locks/jobs.a/acquire", `{"holder":"w1","ttl_ms":10000,"wait_ms":0,"request_id":"openapi-test-request-0001"}`)
	expect(409, "POST", f+"/v1/locks/jobs.a/acquire", `{"holder":"w2","ttl_ms":10000}`)
	expect(400, "POST", f+"/v1/locks/jobs.a/acquire", `{"holder":"w2","ttl_ms":5}`)
	expect(400, "POST", f+"/v1/locks/jobs.a/acquire", `{"holder":`)
	expect(400, "POST", f+"/v1/locks/jobs.a/acquire", `{"holder":"w2","ttl_ms":1000,"request_id":"`+strings.Repeat("r", 300)+`"}`)
	expect(400, "POST", f+"/v1/locks/bad%20name/acquire", `{"holder":"w2"}`)
	expect(415, "POST", f+"/v1/locks/jobs.a/acquire", `{"holder":"w2"}`, "Content-Type", "text/plain")
	expect(421, "GET", f+"/v1/locks/jobs.a", "", "Host", "rebound.example:80")
	expect(403, "POST", f+"/v1/locks/jobs.a/acquire", `{"holder":"w2"}`, "Sec-Fetch-Site", "cross-site", "Origin", "http://rebound.example")
	lease := fmt.Sprintf(`{"lease":%q,"token":%d}`, g.Lease, g.Token)
	expect(200, "POST", f+"/v1/locks/jobs.a/renew", lease)
	expect(410, "POST", f+"/v1/locks/jobs.a/renew", fmt.Sprintf(`{"lease":"0123456789abcdef0123456789abcdef","token":%d}`, g.Token))
	expect(200, "GET", f+"/v1/locks/jobs.a", "")
	expect(200, "GET", f+"/v1/locks/jobs.a?stale=true", "")
	expect(200, "GET", f+"/v1/locks/jobs.free", "")
	expect(200, "GET", f+"/v1/locks", "")
	expect(200, "GET", f+fmt.Sprintf("/v1/locks/jobs.a/check?token=%d", g.Token), "")
	expect(400, "GET", f+"/v1/locks/jobs.a/check?token=007", "")
	tok := fmt.Sprint(g.Token)
	expect(200, "PUT", f+"/v1/kv/jobs.out", "v1", "Fencing-Token", tok, "Fencing-Lock", "jobs.a")
	expect(409, "PUT", f+"/v1/kv/jobs.out", "v0", "Fencing-Token", fmt.Sprint(g.Token-1))
	expect(409, "PUT", f+"/v1/kv/jobs.out2", "v0", "Fencing-Token", tok, "Fencing-Lock", "jobs.free")
	expect(428, "PUT", f+"/v1/kv/jobs.out", "v2")
	expect(400, "PUT", f+"/v1/kv/jobs.out", "v2", "Fencing-Token", "-3")
	expect(413, "PUT", f+"/v1/kv/jobs.big", strings.Repeat("x", wire.MaxBodyBytes+1), "Fencing-Token", tok)
	expect(200, "GET", f+"/v1/kv/jobs.out", "")
	expect(404, "GET", f+"/v1/kv/jobs.never", "")
	expect(409, "PUT", f+"/v1/kv/jobs.out", "v9", "Fencing-Token", "999999999")
	expect(200, "DELETE", f+"/v1/kv/jobs.out", "")
	expect(404, "DELETE", f+"/v1/kv/jobs.out", "")
	expect(200, "POST", f+"/v1/locks/jobs.a/release", lease)
	expect(410, "POST", f+"/v1/locks/jobs.a/release", lease)
	expect(200, "GET", f+"/v1/locks/jobs.a/history?limit=5", "")
	expect(400, "GET", f+"/v1/locks/jobs.a/history?limit=0", "")
	expect(200, "GET", f+"/v1/tokens/"+tok, "")
	expect(404, "GET", f+"/v1/tokens/1", "")
	expect(400, "GET", f+"/v1/tokens/x", "")
	expect(200, "GET", f+"/v1/locks/jobs.a?wait_index=1&wait=10ms", "")
	expect(400, "GET", f+"/v1/locks/jobs.a?wait_index=1&wait=6m", "")
	expect(200, "GET", f+"/v1/cluster/snapshot", "")
	expect(404, "DELETE", f+"/v1/cluster/members/n9", "")
	expect(400, "POST", f+"/v1/cluster/members", `{"id":"","raft_addr":"x"}`)
	expect(200, "POST", f+"/v1/cluster/join", `{"id":"n4","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2","voter":true,"dry_run":true}`)
	expect(400, "POST", f+"/v1/cluster/restore", "not a snapshot")
	if status, body := send("POST", f+"/v1/cluster/leader/transfer", `{"id":"n9"}`); status < 400 {
		t.Fatalf("transfer to n9: %d %s", status, body)
	}

	// Access control: 401 with its challenge, 403, and the open routes.
	secured := tc.New(t, 1, tc.Options{Server: aclServer(t, aclFile)})
	s := secured.WaitLeader(10 * time.Second).URL()
	expect(401, "POST", s+"/v1/locks/jobs.a/acquire", `{"holder":"w"}`)
	expect(403, "POST", s+"/v1/locks/other/acquire", `{"holder":"w"}`, "Authorization", "Bearer client-secret-0123456789")
	expect(200, "GET", s+"/v1/openapi.yaml", "")
	expect(401, "GET", s+"/metrics", "")

	rec.validate(t)
}
