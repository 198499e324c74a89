package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// crash takes a lock as a holder that dies at once: nothing renews or
// releases it, so the server frees it only when its TTL runs out.
func crash(t *testing.T, cl *client.Client, name string, ttl time.Duration) uint64 {
	t.Helper()
	l, err := cl.Acquire(context.Background(), name, client.TTL(ttl), client.Holder("crashed"), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	return l.Token()
}

// A waiter that outwaits a crashed holder gets a lease it can use: the wait
// (about 2s, the crashed holder's TTL) is longer than the waiter's own TTL,
// which must not make the fresh grant look expired.
func TestWaiterOutwaitsCrashedHolder(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	var renewed atomic.Int32
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusOK && strings.HasSuffix(req.URL.Path, "/renew") {
			renewed.Add(1)
		}
		return resp, err
	})
	const ttl = time.Second
	dead := crash(t, cl, "ex2", 2*ttl)
	start := time.Now()
	lease, err := cl.Acquire(context.Background(), "ex2", client.TTL(ttl), client.Wait(5*time.Second), client.Holder("waiter"))
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	defer lease.Release(context.Background())
	waited := time.Since(start)
	if lease.Token() <= dead {
		t.Fatalf("waiter's token %d, crashed holder's %d", lease.Token(), dead)
	}
	if waited < ttl {
		t.Fatalf("waited only %v: the test needs a wait longer than the TTL %v", waited, ttl)
	}
	ctx := lease.Context()
	base := renewed.Load()
	tc.Poll(t, 10*time.Second, "three renewals under the waiter's lease", func() bool {
		if ctx.Err() != nil {
			t.Fatalf("lease lost after %d renewals: %v", renewed.Load()-base, context.Cause(ctx))
		}
		return renewed.Load()-base >= 3
	})
	if st := serverLock(t, c, "ex2"); !st.Held || st.Token != lease.Token() || st.Holder != "waiter" {
		t.Fatalf("server: %+v, want the waiter's token %d", st, lease.Token())
	}
	t.Logf("waited %v for the crashed holder; lease alive through 3 renewals", waited.Round(time.Millisecond))
}

// A grant the client cannot keep is given back at once: here the acquire's
// context ends while the client confirms a grant that came after a long
// wait (as when "fencer exec" is interrupted). The lock is free right after
// Acquire returns, long before the server would have expired the grant.
func TestUnconfirmedGrantIsReleased(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var confirms atomic.Int32
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/renew") {
			confirms.Add(1)
			cancel()
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return next.RoundTrip(req)
	})
	crash(t, cl, "abandoned", 1500*time.Millisecond)
	// A wait of 1.5s is more than a third of the 3s TTL: the grant is
	// confirmed before Acquire returns it. Unconfirmed, the server would
	// hold it for 3s.
	lease, err := cl.Acquire(ctx, "abandoned", client.TTL(3*time.Second), client.Wait(5*time.Second), client.Holder("waiter"))
	returned := time.Now()
	if err == nil {
		lease.Release(context.Background())
		t.Fatal("acquire succeeded although its grant could not be confirmed")
	}
	if confirms.Load() == 0 {
		t.Fatalf("no confirming renewal was sent: %v", err)
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "released") {
		t.Fatalf("err %v: want the cancellation, and that the grant was released", err)
	}
	st := serverLock(t, c, "abandoned")
	if st.Held {
		t.Fatalf("lock still held %v after the failed acquire: %+v", time.Since(returned).Round(time.Millisecond), st)
	}
	t.Logf("acquire: %v", err)
}

// The lease of a grant that came after a wait is measured from when its
// first renewal was sent, not from when that renewal's answer came back:
// with the answer held up 500ms (more than the 200ms margin) and later
// renewals cut off, the client still gives the lease up before the server
// could expire it.
func TestWaitedGrantLostBeforeServerExpiry(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	const delay = 500 * time.Millisecond
	var renewals atomic.Int32
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		if !strings.HasSuffix(req.URL.Path, "/renew") {
			return next.RoundTrip(req)
		}
		if renewals.Add(1) > 1 {
			<-req.Context().Done() // partitioned from here on
			return nil, req.Context().Err()
		}
		resp, err := next.RoundTrip(req)
		select { // a slow answer
		case <-time.After(delay):
		case <-req.Context().Done():
		}
		return resp, err
	})
	const ttl = 2 * time.Second
	crash(t, cl, "late", 1500*time.Millisecond) // a wait longer than ttl/3
	lease, err := cl.Acquire(context.Background(), "late", client.TTL(ttl), client.Wait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	<-lease.Done()
	st := serverLock(t, c, "late")
	if !errors.Is(lease.Err(), client.ErrLeaseExpired) {
		t.Fatalf("err %v, want ErrLeaseExpired", lease.Err())
	}
	if !st.Held || st.Token != lease.Token() || st.RemainingMillis == nil || *st.RemainingMillis <= 0 {
		t.Fatalf("server should still hold the lease when the client gives up: %+v", st)
	}
	t.Logf("server had %dms left when the client gave up", *st.RemainingMillis)
}

// Retries of an acquire whose answers are lost can take longer than the
// TTL: each retry is answered with the first grant (existing: true), which
// the client can only measure from the first attempt. It confirms that
// grant instead of reporting it expired.
func TestAcquireRetriesOutlastTTL(t *testing.T) {
	c := tc.New(t, 3)
	const ttl = time.Second
	// Nine lost answers: a lost answer sends the retry to the next node at
	// once, and a round of three costs a pause of 0.4s to 0.8s, so three
	// pauses take 1.2s or more in all, more than the TTL, while each retry
	// comes before the grant (renewed by the retry before it) could expire.
	cl, h := newClient(t, c, client.WithRetry(client.Retry{Attempts: 12, MinBackoff: 800 * time.Millisecond, MaxBackoff: 800 * time.Millisecond}))
	var attempts atomic.Int32
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && strings.HasSuffix(req.URL.Path, "/acquire") && attempts.Add(1) <= 9 {
			resp.Body.Close()
			return nil, errors.New("test: connection reset after the server answered")
		}
		return resp, err
	})
	start := time.Now()
	lease, err := cl.Acquire(context.Background(), "retried", client.TTL(ttl))
	if err != nil {
		t.Fatalf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	defer lease.Release(context.Background())
	if !lease.Grant().Existing || attempts.Load() != 10 {
		t.Fatalf("grant %+v after %d attempts: want the first grant, on the tenth", lease.Grant(), attempts.Load())
	}
	if took := time.Since(start); took < ttl {
		t.Fatalf("retries took only %v: the test needs more than the TTL", took)
	}
	if err := lease.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := serverLock(t, c, "retried"); !st.Held || st.Token != lease.Token() {
		t.Fatalf("server: %+v, want token %d", st, lease.Token())
	}
}
