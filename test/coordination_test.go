package test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/fsm"
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
	tc.Poll(t, 10*time.Second, "the leader to write log format "+strconv.Itoa(fsm.LogFormat), func() bool {
		st, err := cl.Cluster(context.Background())
		return err == nil && st.LogFormat == fsm.LogFormat
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
