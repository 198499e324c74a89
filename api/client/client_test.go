package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/entry"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// hooks is a RoundTripper that lets a test intercept requests by path.
type hooks struct {
	base http.RoundTripper
	mu   sync.Mutex
	fn   func(req *http.Request, next http.RoundTripper) (*http.Response, error)
}

func (h *hooks) RoundTrip(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	fn := h.fn
	h.mu.Unlock()
	if fn != nil {
		return fn(req, h.base)
	}
	return h.base.RoundTrip(req)
}

func (h *hooks) set(fn func(req *http.Request, next http.RoundTripper) (*http.Response, error)) {
	h.mu.Lock()
	h.fn = fn
	h.mu.Unlock()
}

func endpoints(c *tc.Cluster) []string {
	var eps []string
	for _, n := range c.Running() {
		eps = append(eps, n.HTTPAddr)
	}
	return eps
}

func newClient(t *testing.T, c *tc.Cluster, opts ...client.Option) (*client.Client, *hooks) {
	t.Helper()
	h := &hooks{base: &http.Transport{}}
	opts = append([]client.Option{client.WithHTTPClient(&http.Client{Transport: h}), client.WithTimeout(5 * time.Second)}, opts...)
	cl, err := client.New(endpoints(c), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, h
}

// serverLock reads a lock's status from the leader with plain HTTP.
func serverLock(t *testing.T, c *tc.Cluster, name string) wire.LockStatus {
	t.Helper()
	l := c.WaitLeader(10 * time.Second)
	status, body, _ := tc.Do(t, http.MethodGet, l.URL()+"/v1/locks/"+name, "")
	if status != http.StatusOK {
		t.Fatalf("GET lock %s: %d %s", name, status, body)
	}
	var st wire.LockStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAcquireRenewRelease(t *testing.T) {
	c := tc.New(t, 3)
	cl, _ := newClient(t, c)
	ctx := context.Background()

	lease, err := cl.Acquire(ctx, "job", client.TTL(5*time.Second), client.Holder("worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	if lease.Token() == 0 || lease.Name() != "job" || lease.Holder() != "worker-1" || lease.TTL() != 5*time.Second || len(lease.Secret()) != 32 {
		t.Fatalf("lease: token %d name %q holder %q ttl %v secret %q", lease.Token(), lease.Name(), lease.Holder(), lease.TTL(), lease.Secret())
	}
	if want := c.WaitLeader(time.Second).URL(); cl.Leader() != want {
		t.Errorf("cached leader %q, want %q", cl.Leader(), want)
	}
	before := lease.Deadline()
	if err := lease.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if !lease.Deadline().After(before) {
		t.Errorf("renewal did not move the local deadline")
	}
	st, err := cl.Lock(ctx, "job")
	if err != nil || !st.Held || st.Token != lease.Token() || st.Holder != "worker-1" {
		t.Fatalf("lock status %+v, %v", st, err)
	}
	chk, err := cl.Check(ctx, "job", lease.Token())
	if err != nil || !chk.Current || chk.Token != lease.Token() {
		t.Fatalf("check %+v, %v", chk, err)
	}
	list, err := cl.Locks(ctx)
	if err != nil || len(list) != 1 || list[0].Lock != "job" {
		t.Fatalf("locks %+v, %v", list, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !closed(lease.Done()) || !errors.Is(lease.Err(), client.ErrReleased) {
		t.Fatalf("after release: done %v, err %v", closed(lease.Done()), lease.Err())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if st := serverLock(t, c, "job"); st.Held {
		t.Fatalf("lock still held after release: %+v", st)
	}
	// The next grant gets a greater token, and the raw calls work on it.
	g, err := cl.Acquire(ctx, "job", client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if g.Token() <= lease.Token() {
		t.Fatalf("token %d after %d", g.Token(), lease.Token())
	}
	if _, err := cl.RenewRaw(ctx, "job", g.Token(), g.Secret()); err != nil {
		t.Fatal(err)
	}
	if out, err := cl.ReleaseRaw(ctx, "job", g.Token(), g.Secret()); err != nil || !out.Released {
		t.Fatalf("release raw: %+v, %v", out, err)
	}
	if _, err := cl.RenewRaw(ctx, "job", g.Token(), g.Secret()); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("renew after release: %v", err)
	}
}

// The keep-alive holds a short lease well past its TTL.
func TestKeepAliveOutlivesTTL(t *testing.T) {
	c := tc.New(t, 3)
	cl, _ := newClient(t, c)
	lease, err := cl.Acquire(context.Background(), "short", client.TTL(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	select {
	case <-lease.Done():
		t.Fatalf("lease lost: %v", lease.Err())
	case <-time.After(2 * time.Second): // four TTLs
	}
	if st := serverLock(t, c, "short"); !st.Held || st.Token != lease.Token() {
		t.Fatalf("server: %+v", st)
	}
}

// With renewals blocked (a partition between client and cluster), the
// client gives the lease up before the server's TTL could have run out, and
// the server expires it afterwards.
func TestLeaseLostBeforeServerExpiry(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	const ttl = 500 * time.Millisecond
	var blocked atomic.Int32
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/renew") {
			blocked.Add(1)
			<-req.Context().Done() // hang like a lost packet
			return nil, req.Context().Err()
		}
		return next.RoundTrip(req)
	})
	start := time.Now() // no later than the acquire's send time
	lease, err := cl.Acquire(context.Background(), "partitioned", client.TTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	lost := time.Now()
	st := serverLock(t, c, "partitioned")
	if !errors.Is(lease.Err(), client.ErrLeaseExpired) {
		t.Fatalf("err %v, want ErrLeaseExpired", lease.Err())
	}
	if !lost.Before(start.Add(ttl)) {
		t.Fatalf("lost after %v, not before the TTL %v", lost.Sub(start), ttl)
	}
	if !st.Held || st.Token != lease.Token() || st.RemainingMillis == nil || *st.RemainingMillis <= 0 {
		t.Fatalf("server should still hold the lease when the client gives up: %+v", st)
	}
	if blocked.Load() == 0 {
		t.Fatal("no renewal was attempted")
	}
	var freed time.Time
	tc.Poll(t, 5*time.Second, "server-side expiry", func() bool {
		freed = time.Now()
		return !serverLock(t, c, "partitioned").Held
	})
	t.Logf("ttl %v: client declared the lease lost %v after acquire start; server still had %dms; server freed the lock %v later",
		ttl, lost.Sub(start).Round(time.Millisecond), *st.RemainingMillis, freed.Sub(lost).Round(time.Millisecond))
	t.Logf("loss: %v", lease.Err())
}

// A renewal refused by the server (here the lease was released behind the
// holder's back, as an operator would) ends the lease at once.
func TestLeaseLostWhenRenewalRefused(t *testing.T) {
	c := tc.New(t, 3)
	cl, _ := newClient(t, c)
	lease, err := cl.Acquire(context.Background(), "revoked", client.TTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ReleaseRaw(context.Background(), "revoked", lease.Token(), lease.Secret()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease not lost after its release by someone else")
	}
	err = lease.Err()
	var ae *client.APIError
	if !errors.Is(err, client.ErrLeaseLost) || !errors.As(err, &ae) || ae.Code != wire.CodeLeaseLost || ae.Status != http.StatusGone {
		t.Fatalf("err %v (%#v), want a lease_lost APIError", err, ae)
	}
	if err := lease.Release(context.Background()); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("release of a lost lease: %v", err)
	}
}

// dropFirstAcquireAnswer makes the first acquire's answer get lost on its
// way back, after the server made the grant; the function it returns
// lists the request ids of the acquires sent so far.
func dropFirstAcquireAnswer(h *hooks) func() []string {
	var ids []string
	var mu sync.Mutex
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		if !strings.HasSuffix(req.URL.Path, "/acquire") {
			return next.RoundTrip(req)
		}
		body, _ := io.ReadAll(req.Body)
		var ar wire.AcquireRequest
		json.Unmarshal(body, &ar)
		req.Body = io.NopCloser(strings.NewReader(string(body)))
		mu.Lock()
		ids = append(ids, ar.RequestID)
		first := len(ids) == 1
		mu.Unlock()
		resp, err := next.RoundTrip(req)
		if err != nil || !first {
			return resp, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errors.New("test: connection reset after the server answered")
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ids...)
	}
}

// An acquire whose answer is lost is retried with the same request id and
// returns the same grant.
func TestAcquireRetryAfterDroppedAnswer(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	requestIDs := dropFirstAcquireAnswer(h)
	lease, err := cl.Acquire(context.Background(), "once", client.TTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	if ids := requestIDs(); len(ids) != 2 || ids[0] != ids[1] || len(ids[0]) != 32 {
		t.Fatalf("request ids %q: want two equal 128-bit ids", ids)
	}
	if !lease.Grant().Existing {
		t.Fatalf("grant %+v: want existing (the retry's answer)", lease.Grant())
	}
	if st := serverLock(t, c, "once"); st.Token != lease.Token() {
		t.Fatalf("server token %d, lease token %d", st.Token, lease.Token())
	}
}

// AcquireRaw, like Acquire, sends every attempt with one request id: a
// retry after a lost answer gets the grant the first attempt made.
func TestAcquireRawRetryAfterDroppedAnswer(t *testing.T) {
	c := tc.New(t, 1)
	cl, h := newClient(t, c)
	requestIDs := dropFirstAcquireAnswer(h)
	g, err := cl.AcquireRaw(context.Background(), "raw-once", wire.AcquireRequest{Holder: "bench", TTLMillis: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if ids := requestIDs(); len(ids) != 2 || ids[0] != ids[1] || len(ids[0]) != 32 {
		t.Fatalf("request ids %q: want two equal 128-bit ids", ids)
	}
	if !g.Existing || g.RequestID != requestIDs()[0] {
		t.Fatalf("grant %+v: want the first attempt's grant back (existing)", g)
	}
	if st := serverLock(t, c, "raw-once"); st.Token != g.Token {
		t.Fatalf("server token %d, grant's %d", st.Token, g.Token)
	}
	if _, err := cl.ReleaseRaw(context.Background(), "raw-once", g.Token, g.Lease); err != nil {
		t.Fatal(err)
	}
}

// A caller that gives no TTL gets the default: the client never sends
// ttl_ms 0, which the server refuses as an explicit TTL of 0 (invalid_ttl).
// (AcquirePermit takes its TTL from the same options as Acquire.)
func TestNoTTLGetsTheDefault(t *testing.T) {
	c := tc.New(t, 1)
	cl, _ := newClient(t, c)
	ctx := context.Background()
	lease, err := cl.Acquire(ctx, "no-ttl")
	if err != nil || lease.Grant().TTLMillis != wire.DefaultTTL.Milliseconds() {
		t.Fatalf("Acquire without a TTL: %v, grant %+v; want the default %v", err, lease, wire.DefaultTTL)
	}
	lease.Release(ctx)
	g, err := cl.AcquireRaw(ctx, "no-ttl-raw", wire.AcquireRequest{Holder: "raw"})
	if err != nil || g.TTLMillis != wire.DefaultTTL.Milliseconds() {
		t.Fatalf("AcquireRaw with TTLMillis 0: %v, grant %+v; want the default %v", err, g, wire.DefaultTTL)
	}
}

func TestErrorsMatchCodes(t *testing.T) {
	c := tc.New(t, 3)
	cl, _ := newClient(t, c)
	ctx := context.Background()
	first, err := cl.Acquire(ctx, "contended", client.Holder("first"))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release(ctx)

	_, err = cl.Acquire(ctx, "contended", client.Holder("second"))
	var ae *client.APIError
	if !errors.Is(err, client.ErrLockHeld) || !errors.As(err, &ae) || ae.Holder != "first" || ae.Token != first.Token() || ae.Status != http.StatusConflict {
		t.Fatalf("second acquire: %v %+v", err, ae)
	}

	newer, err := cl.Acquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Release(ctx)
	if err := cl.PutFenced(ctx, "k", []byte("v1"), newer.Token()); err != nil {
		t.Fatal(err)
	}
	err = cl.PutFenced(ctx, "k", []byte("v0"), first.Token())
	if !errors.Is(err, client.ErrStaleToken) || !errors.As(err, &ae) || ae.LastToken != newer.Token() {
		t.Fatalf("stale put: %v %+v", err, ae)
	}
	if errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("a first-attempt stale_token is not an unknown outcome: %v", err)
	}
	if err := cl.PutFenced(ctx, "k", []byte("v"), 0); !errors.Is(err, client.ErrMissingToken) {
		t.Fatalf("zero token: %v", err)
	}
	status, body, _ := tc.Do(t, http.MethodPut, c.Nodes[0].URL()+"/v1/kv/k", "v")
	if status != http.StatusPreconditionRequired || !strings.Contains(body, wire.CodeMissingToken) {
		t.Fatalf("raw put without token: %d %s", status, body)
	}
	next, err := cl.Acquire(ctx, "third")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if err := cl.PutFenced(ctx, "k", []byte("v2"), next.Token(), client.WithLock("contended")); !errors.Is(err, client.ErrNotLockHolder) {
		t.Fatalf("put under another lock: %v", err)
	}
	if err := cl.PutFenced(ctx, "k", []byte("v2"), next.Token(), client.WithLock("third")); err != nil {
		t.Fatal(err)
	}
	v, tok, err := cl.Get(ctx, "k")
	if err != nil || string(v) != "v2" || tok != next.Token() {
		t.Fatalf("get: %q %d %v", v, tok, err)
	}
	if _, _, err := cl.Get(ctx, "missing"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := cl.Lock(ctx, "bad name!"); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := cl.Acquire(ctx, "x", client.TTL(time.Millisecond)); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("tiny ttl: %v", err)
	}
}

// A put whose first answer is lost and whose retry finds the value already
// written reports an unknown outcome, not a plain stale token.
func TestPutRetryAfterDroppedAnswer(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	ctx := context.Background()
	lease, err := cl.Acquire(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	var dropped atomic.Bool
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && req.Method == http.MethodPut && dropped.CompareAndSwap(false, true) {
			resp.Body.Close()
			return nil, errors.New("test: answer lost")
		}
		return resp, err
	})
	err = cl.PutFenced(ctx, "out", []byte("x"), lease.Token())
	if !errors.Is(err, client.ErrOutcomeUnknown) || !errors.Is(err, client.ErrStaleToken) {
		t.Fatalf("retried put: %v", err)
	}
	if _, tok, err := cl.Get(ctx, "out"); err != nil || tok != lease.Token() {
		t.Fatalf("the first attempt landed: token %d, %v", tok, err)
	}
}

// The client follows a leader change; a lease survives it.
func TestFollowsLeaderAcrossFailover(t *testing.T) {
	c := tc.New(t, 3)
	cl, _ := newClient(t, c)
	ctx := context.Background()
	lease, err := cl.Acquire(ctx, "survivor", client.TTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	old := c.WaitLeader(time.Second)
	c.Stop(old)
	nl := c.WaitNewLeader(old.ID, 10*time.Second)
	after := time.Now()
	tc.Poll(t, 10*time.Second, "a renewal confirmed by the new leader", func() bool {
		return lease.Err() == nil && lease.Deadline().After(after.Add(lease.TTL()-client.Margin(lease.TTL())))
	})
	if err := lease.Err(); err != nil {
		t.Fatal(err)
	}
	// A write first: the new leader's linearizable reads wait for its FSM to
	// reach the commit index, which raft's no-op entry alone never moves.
	other, err := cl.Acquire(ctx, "after-failover")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	st, err := cl.Lock(ctx, "survivor")
	if err != nil || !st.Held || st.Token != lease.Token() {
		t.Fatalf("after failover: %+v %v", st, err)
	}
	if cl.Leader() != nl.URL() {
		t.Fatalf("cached leader %q, want %q", cl.Leader(), nl.URL())
	}
}

// A release whose answer was lost is retried, and the retry, which finds
// the lease gone, reports the release the first attempt made: a lock's with
// the answer the server would have given, a permit's as plain success.
func TestReleaseAfterLostAnswer(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	ctx := context.Background()
	tc.Poll(t, 10*time.Second, "the leader to write a log format with semaphores", func() bool {
		st, err := cl.Cluster(ctx)
		return err == nil && st.LogFormat == entry.LogFormat
	})
	var lost atomic.Int32
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && strings.HasSuffix(req.URL.Path, "/release") && lost.Add(1)%2 == 1 {
			resp.Body.Close()
			return nil, errors.New("test: connection reset after the server answered")
		}
		return resp, err
	})
	g, err := cl.Acquire(ctx, "lost-release", client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	out, err := cl.ReleaseRaw(ctx, "lost-release", g.Token(), g.Secret())
	if want := (wire.ReleaseResponse{Lock: "lost-release", Token: g.Token(), Released: true}); err != nil || out != want {
		t.Fatalf("release raw after a lost answer: %+v, %v; want %+v", out, err, want)
	}
	p, err := cl.AcquirePermit(ctx, "lost-release-sem", 2, client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ReleasePermitRaw(ctx, "lost-release-sem", p.Token(), p.Secret()); err != nil {
		t.Fatalf("release permit raw after a lost answer: %v", err)
	}
	if n := lost.Load(); n != 4 {
		t.Fatalf("%d release attempts, want 4 (two lost, two retries)", n)
	}
	if st := serverLock(t, c, "lost-release"); st.Held {
		t.Fatalf("lock still held: %+v", st)
	}
}
