package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// loseAnswer is a RoundTripper that sends every request but loses the
// answer to the first one whose method and path match, as a connection
// reset after the server acted would.
type loseAnswer struct {
	base         http.RoundTripper
	method, path string
	lost         atomic.Int32
}

func (l *loseAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err != nil || req.Method != l.method || !strings.HasSuffix(req.URL.Path, l.path) || l.lost.Add(1) != 1 {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("test: connection reset after the server answered")
}

// newTestFencer is a Fencer on a one-node cluster whose client loses the
// first answer to method on a path ending in path.
func newTestFencer(t *testing.T, method, path string) (*Fencer, *loseAnswer) {
	c := tc.New(t, 1)
	leader := c.WaitLeader(20 * time.Second)
	lose := &loseAnswer{base: &http.Transport{}, method: method, path: path}
	cl, err := client.New([]string{leader.HTTPAddr}, client.WithHTTPClient(&http.Client{Transport: lose}), client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &Fencer{Client: cl, TTL: 10 * time.Second, Prefix: "bench-test"}, lose
}

// runOps runs n operations of a workload's first client.
func runOps(t *testing.T, f *Fencer, workload string, n int) {
	t.Helper()
	newClient, err := f.Workload(workload)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op, cleanup, err := newClient(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cleanup != nil {
		defer cleanup()
	}
	for i := range n {
		if err := op(ctx); err != nil {
			t.Fatalf("op %d: %v", i+1, err)
		}
	}
}

// An acquire whose answer is lost is retried with its request id and gets
// its grant back; the cycle completes, and so do the next ones (before,
// every later acquire found the lock held by the benchmark itself until
// the lost grant's TTL ran out).
func TestLostAcquireAnswerIsRecovered(t *testing.T) {
	f, lose := newTestFencer(t, http.MethodPost, "/acquire")
	runOps(t, f, "uncontended", 3)
	if lose.lost.Load() < 2 {
		t.Fatalf("%d acquires seen: the lost answer was never exercised", lose.lost.Load())
	}
}

// A fenced write whose answer is lost is confirmed by reading the key, as a
// fenced writer would, instead of counting as an error.
func TestLostFencedWriteAnswerIsConfirmed(t *testing.T) {
	f, lose := newTestFencer(t, http.MethodPut, "/"+f0Key)
	runOps(t, f, "fenced-write", 3)
	if lose.lost.Load() < 2 {
		t.Fatalf("%d writes seen: the lost answer was never exercised", lose.lost.Load())
	}
	_, token, err := f.Client.Get(context.Background(), f0Key)
	if err != nil || token == 0 {
		t.Fatalf("key %s: token %d, %v", f0Key, token, err)
	}
}

// f0Key is the fenced-write workload's key of client 0 for newTestFencer's
// prefix.
const f0Key = "bench-test-k-0"
