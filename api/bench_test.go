package api

import (
	"net/http"
	"strings"
	"testing"
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
