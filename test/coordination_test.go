package test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/fsm/entry"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// coordClient returns a client of c once its leader writes this build's
// log format (every member has registered theirs), which the new
// primitives need.
func coordClient(t *testing.T, c *tc.Cluster) *client.Client {
	t.Helper()
	cl, err := client.New(endpoints(c), client.WithTimeout(5*time.Second),
		client.WithRetry(client.Retry{Attempts: 40, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	tc.Poll(t, 10*time.Second, "the leader to write log format "+strconv.Itoa(entry.LogFormat), func() bool {
		st, err := cl.Cluster(context.Background())
		return err == nil && st.LogFormat == entry.LogFormat
	})
	return cl
}

// A grant with a lock-delay that expires keeps the lock from everybody for
// the delay, through any node; GET shows the time left; afterwards the lock
// is free again.
func TestLockDelayThroughTheClient(t *testing.T) {
	c := tc.New(t, 3)
	c.WaitLeader(10 * time.Second)
	cl := coordClient(t, c)
	ctx := context.Background()
	l, err := cl.Acquire(ctx, "delayed", client.TTL(200*time.Millisecond), client.NoKeepAlive(), client.LockDelay(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done() // the lease ends unrenewed
	tc.Poll(t, 5*time.Second, "the expiry", func() bool {
		st, err := cl.Lock(ctx, "delayed")
		return err == nil && !st.Held && st.DelayRemainingMillis != nil
	})
	_, err = cl.Acquire(ctx, "delayed", client.TTL(time.Second))
	var apiErr *client.APIError
	if !errors.Is(err, client.ErrLockDelay) || !errors.As(err, &apiErr) || apiErr.RetryAfter <= 0 || apiErr.RetryAfter > 2*time.Second {
		t.Fatalf("acquire in the delay: %v, want lock_delay with retry_after_ms", err)
	}
	// A waiter waits through the delay and gets the lock when it ends.
	l2, err := cl.Acquire(ctx, "delayed", client.TTL(time.Second), client.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("waiting through the delay: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d after %d", l2.Token(), l.Token())
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A release starts no delay.
	l3, err := cl.Acquire(ctx, "delayed", client.TTL(time.Second), client.LockDelay(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l4, err := cl.Acquire(ctx, "delayed", client.TTL(time.Second))
	if err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	l4.Release(ctx)
}

// A semaphore through the client on a three-node cluster: permits up to the
// limit, each with its own increasing token; full and limit mismatch are
// refused; a waiter gets the permit a release frees, and another the one an
// expiry frees; check and status agree.
func TestSemaphoreThroughTheClient(t *testing.T) {
	c := tc.New(t, 3)
	c.WaitLeader(10 * time.Second)
	cl := coordClient(t, c)
	ctx := context.Background()
	a, err := cl.AcquirePermit(ctx, "workers", 2, client.TTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cl.AcquirePermit(ctx, "workers", 2, client.TTL(300*time.Millisecond), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("tokens %d then %d", a.Token(), b.Token())
	}
	_, err = cl.AcquirePermit(ctx, "workers", 2)
	var apiErr *client.APIError
	if !errors.Is(err, client.ErrSemaphoreFull) || !errors.As(err, &apiErr) || apiErr.Held != 2 {
		t.Fatalf("a third permit of 2: %v", err)
	}
	if _, err := cl.AcquirePermit(ctx, "workers", 3); !errors.Is(err, client.ErrLimitMismatch) {
		t.Fatalf("limit 3 while 2 are held: %v", err)
	}
	if st, err := cl.Semaphore(ctx, "workers"); err != nil || st.Limit != 2 || len(st.Holders) != 2 {
		t.Fatalf("status %+v (%v)", st, err)
	}
	// b is not renewed: its permit expires and a waiter gets it.
	w, err := cl.AcquirePermit(ctx, "workers", 2, client.TTL(5*time.Second), client.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("waiting for b's permit: %v", err)
	}
	<-b.Done()
	if cur, err := cl.CheckPermit(ctx, "workers", b.Token()); err != nil || cur {
		t.Fatalf("b's permit still current: %v %v", cur, err)
	}
	if cur, err := cl.CheckPermit(ctx, "workers", w.Token()); err != nil || !cur || w.Token() <= b.Token() {
		t.Fatalf("the waiter's permit %d: current %v (%v)", w.Token(), cur, err)
	}
	// A release hands a permit to the next waiter.
	next := make(chan *client.Lease, 1)
	go func() {
		l, err := cl.AcquirePermit(ctx, "workers", 2, client.TTL(5*time.Second), client.Wait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	tc.Poll(t, 5*time.Second, "a waiter", func() bool {
		st, err := cl.Semaphore(ctx, "workers")
		return err == nil && st.Waiters == 1
	})
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	n := <-next
	if n == nil || n.Token() <= w.Token() {
		t.Fatal("no permit after the release")
	}
	n.Release(ctx)
	w.Release(ctx)
	if list, err := cl.Semaphores(ctx); err != nil || len(list) != 0 {
		t.Fatalf("semaphores after every release: %+v (%v)", list, err)
	}
}

// An election through the client: the first campaigner leads and publishes
// its value; a second waits; Proclaim changes the value with the token
// unchanged; when the leader resigns the second leads with a higher token
// (term), and the deposed leader's Proclaim is refused.
func TestElectionThroughTheClient(t *testing.T) {
	c := tc.New(t, 3)
	c.WaitLeader(10 * time.Second)
	cl := coordClient(t, c)
	ctx := context.Background()
	first, err := cl.Campaign(ctx, "svc.leader", "10.0.0.1:80", client.TTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// An observer on another client sees every term and value, in order.
	obsCtx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	seen := make(chan client.Leadership, 16)
	go func() {
		for l, err := range coordClient(t, c).Observe(obsCtx, "svc.leader") {
			if err != nil {
				return
			}
			seen <- l
		}
	}()
	expect := func(w client.Leadership) {
		t.Helper()
		select {
		case got := <-seen:
			if got != w {
				t.Fatalf("observed %+v, want %+v", got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("observed nothing, want %+v", w)
		}
	}
	expect(client.Leadership{Holder: first.Holder(), Token: first.Token(), Value: "10.0.0.1:80"}) // from the list
	if st, err := cl.ElectionLeader(ctx, "svc.leader"); err != nil || st.Value != "10.0.0.1:80" || st.Token != first.Token() {
		t.Fatalf("leader %+v (%v)", st, err)
	}
	second := make(chan *client.Lease, 1)
	go func() {
		l, err := cl.Campaign(ctx, "svc.leader", "10.0.0.2:80", client.TTL(5*time.Second))
		if err != nil {
			t.Error(err)
		}
		second <- l
	}()
	if err := first.Proclaim(ctx, "10.0.0.1:81"); err != nil {
		t.Fatal(err)
	}
	if st, _ := cl.ElectionLeader(ctx, "svc.leader"); st.Value != "10.0.0.1:81" || st.Token != first.Token() {
		t.Fatalf("after proclaim: %+v", st)
	}
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	s := <-second
	if s == nil || s.Token() <= first.Token() {
		t.Fatal("the second campaigner did not lead with a later term")
	}
	if st, _ := cl.ElectionLeader(ctx, "svc.leader"); st.Value != "10.0.0.2:80" {
		t.Fatalf("new leader %+v", st)
	}
	if _, err := cl.RenewRaw(ctx, "svc.leader", first.Token(), first.Secret()); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("the deposed leader renews: %v", err)
	}
	expect(client.Leadership{Holder: first.Holder(), Token: first.Token(), Value: "10.0.0.1:81"})
	expect(client.Leadership{Holder: s.Holder(), Token: s.Token(), Value: "10.0.0.2:80"})
	s.Resign(ctx)
}

// A permit with a lock-delay that expires keeps its slot for the delay,
// through any node: an acquire of the last slot gets lock_delay with
// retry_after_ms, GET shows the delay, a waiter waits it out; a released
// permit delays nothing.
func TestPermitLockDelayThroughTheClient(t *testing.T) {
	c := tc.New(t, 3)
	c.WaitLeader(10 * time.Second)
	cl := coordClient(t, c)
	ctx := context.Background()
	p, err := cl.AcquirePermit(ctx, "pool", 1, client.TTL(200*time.Millisecond), client.NoKeepAlive(), client.LockDelay(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done() // the lease ends unrenewed
	tc.Poll(t, 5*time.Second, "the expiry", func() bool {
		st, err := cl.Semaphore(ctx, "pool")
		return err == nil && len(st.Holders) == 0 && len(st.Delays) == 1 && st.Limit == 1
	})
	_, err = cl.AcquirePermit(ctx, "pool", 1, client.TTL(time.Second))
	var apiErr *client.APIError
	if !errors.Is(err, client.ErrLockDelay) || !errors.As(err, &apiErr) || apiErr.RetryAfter <= 0 || apiErr.RetryAfter > 2*time.Second {
		t.Fatalf("acquire of the delayed slot: %v, want lock_delay with retry_after_ms", err)
	}
	p2, err := cl.AcquirePermit(ctx, "pool", 1, client.TTL(time.Second), client.Wait(10*time.Second), client.LockDelay(2*time.Second))
	if err != nil {
		t.Fatalf("waiting through the delay: %v", err)
	}
	if p2.Token() <= p.Token() {
		t.Fatalf("token %d after %d", p2.Token(), p.Token())
	}
	if err := p2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p3, err := cl.AcquirePermit(ctx, "pool", 1, client.TTL(time.Second))
	if err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	p3.Release(ctx)
}
