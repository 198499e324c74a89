package api

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// discardWriter is a ResponseWriter that keeps only the status, with a
// fresh header map per request as net/http's own writer has.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkLockCycle measures the edge's own cost of one lock cycle (an
// acquire and a release, as a client sends them) on a leader: the whole
// handler chain as a node without an ACL serves it (metrics, browser
// guard, forwarding, reading and checking the body, the answer), over a
// coordination layer that answers at once. The allocations and CPU per op
// are fencer's per-request work on top of Raft (docs/benchmarks.md).
//
//	go test -run '^$' -bench LockCycle -benchmem ./api/
func BenchmarkLockCycle(b *testing.B) {
	f := &fakeCluster{leader: true}
	h := NewServer(f, f, nil, WithBrowserGuard(nil)).Handler()
	acquire := `{"holder":"bench-1a2b3c4d","ttl_ms":10000,"request_id":"00112233445566778899aabbccddeeff"}`
	release := `{` + lease + `,"token":7}`
	serve := func(path, body string) {
		r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:7001"+path, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, r)
		if w.status != http.StatusOK {
			b.Fatalf("POST %s: status %d", path, w.status)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		serve("/v1/locks/bench-1a2b3c4d-u-0/acquire", acquire)
		serve("/v1/locks/bench-1a2b3c4d-u-0/release", release)
	}
}

// registryCluster is fakeCluster with one registry, to read the metrics.
type registryCluster struct {
	*fakeCluster
	reg *prometheus.Registry
}

func (c registryCluster) Registry() *prometheus.Registry { return c.reg }

// Each request is counted under its route's pattern, method and status,
// also when the series was looked up before (the cache of series).
func TestRequestMetricsBySeries(t *testing.T) {
	f := &fakeCluster{leader: true}
	c := registryCluster{f, prometheus.NewRegistry()}
	h := NewServer(c, f, nil).Handler()
	acquire := call{"POST", "/v1/locks/a/acquire", `{"holder":"w"}`, nil}
	for _, cl := range []call{acquire, acquire, {"POST", "/v1/locks/b/acquire", `{"holder":"w"}`, nil},
		{"POST", "/v1/locks/a/acquire", `{"holder":""}`, nil}, {"GET", "/v1/locks/a", ``, nil}, {"GET", "/nowhere", ``, nil}, {"GET", "/nowhere/else", ``, nil},
		{"BREW", "/v1/locks/a", ``, nil}, {"X-1", "/v1/locks/a", ``, nil}} {
		do(t, h, cl)
	}
	families, err := c.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, fam := range families {
		if fam.GetName() != "fencer_http_request_duration_seconds" {
			continue
		}
		for _, m := range fam.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			got[l["method"]+" "+l["route"]+" "+l["status"]] = m.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{
		"POST /v1/locks/{name}/acquire 200": 3,
		"POST /v1/locks/{name}/acquire 400": 1,
		"GET /v1/locks/{name} 200":          1,
		"GET unmatched 404":                 2,
		"other unmatched 405":               2, // a method is the client's to choose: not a label value
	}
	if !maps.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
}
