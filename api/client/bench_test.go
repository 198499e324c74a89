package client_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
)

// cannedServer is a RoundTripper that answers an acquire with a grant and
// a release with its answer, without a network or a server.
type cannedServer struct{}

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
		g, err := c.AcquireRaw(ctx, "bench-u-0", wire.AcquireRequest{Holder: "bench", TTLMillis: 10000})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.ReleaseRaw(ctx, g.Lock, g.Token, g.Lease); err != nil {
			b.Fatal(err)
		}
	}
}
