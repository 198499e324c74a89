package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
)

// cannedServer is a RoundTripper that answers an acquire with a grant and
// a release with its answer, without a network or a server.
type cannedServer struct{}

// cannedRequestID is the request id of cannedGrant, which the benchmarks'
// acquires send: the client believes a grant only for its own request.
const cannedRequestID = "00112233445566778899aabbccddeeff"

const (
	cannedGrant   = `{"lock":"bench-u-0","holder":"bench","token":7,"lease":"0123456789abcdef0123456789abcdef","ttl_ms":10000,"request_id":"00112233445566778899aabbccddeeff"}` + "\n"
	cannedRelease = `{"lock":"bench-u-0","token":7,"released":true}` + "\n"
	cannedCluster = `{"node":"n1","leader":"n1","members":[{"id":"n1","raft_addr":"127.0.0.1:8001","http_addr":"127.0.0.1:7001","voter":true}]}` + "\n"
)

func (cannedServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	body := cannedRelease
	switch {
	case strings.HasSuffix(req.URL.Path, "/acquire"):
		body = cannedGrant
	case req.URL.Path == "/v1/cluster":
		body = cannedCluster
	}
	return &http.Response{
		StatusCode:    http.StatusOK,
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(body))}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// BenchmarkRawCycle measures the client's own cost of one lock cycle as
// the benchmark sends it (AcquireRaw, ReleaseRaw), against canned answers:
// building, encoding and sending each request, reading and decoding its
// answer, short of net/http's transport.
//
//	go test -run '^$' -bench RawCycle -benchmem ./api/client/
func BenchmarkRawCycle(b *testing.B) {
	c, err := client.New([]string{"127.0.0.1:7001"}, client.WithHTTPClient(&http.Client{Transport: cannedServer{}}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		g, err := c.AcquireRaw(ctx, "bench-u-0", wire.AcquireRequest{Holder: "bench", TTLMillis: 10000, RequestID: cannedRequestID})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.ReleaseRaw(ctx, g.Lock, g.Token, g.Lease); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoopbackCycle is RawCycle over a real loopback connection to a
// net/http server that answers as cannedServer does, once over HTTP/1.1 and
// once over HTTP/2 with prior knowledge (h2c): what the protocol itself
// costs a lock cycle, both sides, short of fencer's handlers.
//
//	go test -run '^$' -bench LoopbackCycle -benchmem -count 5 ./api/client/
func BenchmarkLoopbackCycle(b *testing.B) {
	var both http.Protocols
	both.SetHTTP1(true)
	both.SetUnencryptedHTTP2(true)
	var cluster string // names this server as the leader, so the client stays
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, cluster)
			return
		}
		resp, _ := cannedServer{}.RoundTrip(r)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		io.Copy(w, resp.Body)
	}))
	srv.Config.Protocols = &both
	srv.Start()
	defer srv.Close()
	cluster = strings.Replace(cannedCluster, "127.0.0.1:7001", srv.Listener.Addr().String(), 1)
	// http1 and h2c go through net/http's transport; http1-direct is the
	// client's own default for HTTP/1.1 (the caller's goroutine does the
	// exchange).
	for _, proto := range []string{"http1", "http1-direct", "h2c"} {
		b.Run("proto="+proto, func(b *testing.B) {
			hc := &http.Client{Transport: &http.Transport{Protocols: client.Protocols(proto == "h2c")}}
			opts := []client.Option{client.WithHTTPClient(hc)}
			if proto == "http1-direct" {
				opts = nil
			}
			c, err := client.New([]string{srv.URL}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				g, err := c.AcquireRaw(ctx, "bench-u-0", wire.AcquireRequest{Holder: "bench", TTLMillis: 10000, RequestID: cannedRequestID})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.ReleaseRaw(ctx, g.Lock, g.Token, g.Lease); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
