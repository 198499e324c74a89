package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// serverSession reads a session's status from the leader with the client
// of another process: nil once the server no longer has it.
func serverSession(t *testing.T, cl *client.Client, id uint64) *wire.SessionStatus {
	t.Helper()
	st, err := cl.Session(context.Background(), id)
	if errors.Is(err, client.ErrUnknownSession) || errors.Is(err, client.ErrSessionExpired) {
		return nil
	}
	if err != nil {
		t.Fatalf("session %d: %v", id, err)
	}
	return &st
}

// On a real 3-node cluster: one session holds three locks and a permit on
// one keep-alive, past several TTLs; releasing one lock keeps the session
// and the rest; Close releases the others in one entry, returns them, and
// frees their names for the next holder.
func TestSessionOnACluster(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	other, _ := newClient(t, c)
	ctx := context.Background()
	var grantRenewals atomic.Int32
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/renew") && !strings.HasPrefix(req.URL.Path, "/v1/sessions/") {
			grantRenewals.Add(1)
		}
		return next.RoundTrip(req)
	})
	const ttl = time.Second
	s, err := cl.NewSession(ctx, client.SessionTTL(ttl), client.SessionHolder("owner-1"))
	if err != nil {
		t.Fatal(err)
	}
	var locks []*client.Lease
	for _, name := range []string{"part-0", "part-1", "part-2"} {
		l, err := s.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	permit, err := s.AcquirePermit(ctx, "loaders", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range append(locks, permit) {
		if l.Token() <= s.ID() || l.Grant().Session != s.ID() || l.TTL() != ttl {
			t.Fatalf("%s: token %d (session %d), grant session %d, ttl %v", l.Name(), l.Token(), s.ID(), l.Grant().Session, l.TTL())
		}
	}
	select {
	case <-s.Done():
		t.Fatalf("session lost: %v", s.Err())
	case <-time.After(3 * ttl):
	}
	for _, l := range append(locks, permit) {
		if err := l.Err(); err != nil {
			t.Fatalf("%s after three TTLs: %v", l.Name(), err)
		}
	}
	if n := grantRenewals.Load(); n != 0 {
		t.Fatalf("%d renewals of grants under the session", n)
	}
	if st := serverLock(t, c, "part-1"); !st.Held || st.Token != locks[1].Token() || st.Session != s.ID() {
		t.Fatalf("part-1 on the server: %+v", st)
	}

	if err := locks[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	st := serverSession(t, other, s.ID())
	if st == nil || st.Holder != "owner-1" || len(st.Grants) != 3 || s.Err() != nil || locks[0].Err() != nil {
		t.Fatalf("after one release: session %+v (%v), part-0 %v", st, s.Err(), locks[0].Err())
	}
	if l, err := other.Acquire(ctx, "part-1", client.Holder("owner-2")); err != nil || l.Token() <= locks[1].Token() {
		t.Fatalf("part-1 after its release: %v", err)
	} else {
		l.Release(ctx)
	}
	if _, err := other.Acquire(ctx, "part-0", client.Holder("owner-2")); !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("part-0 while the session holds it: %v", err)
	}

	released, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]wire.SessionGrant{{Kind: "lock", Name: "part-0", Token: locks[0].Token()}, {Kind: "lock", Name: "part-2", Token: locks[2].Token()},
		{Kind: "semaphore", Name: "loaders", Token: permit.Token()}})
	if got := fmt.Sprint(released); got != want {
		t.Fatalf("released %v, want %v", got, want)
	}
	for _, l := range append(locks, permit) {
		if !closed(l.Done()) {
			t.Fatalf("%s still open after Close", l.Name())
		}
	}
	for _, name := range []string{"part-0", "part-2"} {
		if st := serverLock(t, c, name); st.Held {
			t.Fatalf("%s held after Close: %+v", name, st)
		}
	}
	if st := serverSession(t, other, s.ID()); st != nil {
		t.Fatalf("session after Close: %+v", st)
	}
	if err := s.Renew(ctx); !errors.Is(err, client.ErrReleased) {
		t.Fatalf("renew after Close: %v", err)
	}
}

// A stalled client (its session renewals hang, as across a partition)
// sees the session's Done close, and every grant's with it, while the
// server still holds the session; then the server expires it, and another
// client takes each lock with a greater token.
func TestStalledSessionLostBeforeServerExpiry(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	other, _ := newClient(t, c)
	ctx := context.Background()
	const ttl = 2 * time.Second
	s, err := cl.NewSession(ctx, client.SessionTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"shard-a", "shard-b", "shard-c"}
	var locks []*client.Lease
	for _, name := range names {
		l, err := s.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	permit, err := s.AcquirePermit(ctx, "writers", 1)
	if err != nil {
		t.Fatal(err)
	}
	var stalled atomic.Int32
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		if strings.HasPrefix(req.URL.Path, "/v1/sessions/") && strings.HasSuffix(req.URL.Path, "/renew") {
			stalled.Add(1)
			<-req.Context().Done() // hang like a lost packet
			return nil, req.Context().Err()
		}
		return next.RoundTrip(req)
	})
	// The others queue for the locks and the permit meanwhile.
	type taken struct {
		name  string
		token uint64
		err   error
	}
	got := make(chan taken, len(names)+1)
	for _, name := range names {
		go func() {
			l, err := other.Acquire(ctx, name, client.Wait(4*ttl), client.Holder("successor"))
			if err != nil {
				got <- taken{name, 0, err}
				return
			}
			got <- taken{name, l.Token(), nil}
		}()
	}
	go func() {
		l, err := other.AcquirePermit(ctx, "writers", 1, client.Wait(4*ttl), client.Holder("successor"))
		if err != nil {
			got <- taken{"writers", 0, err}
			return
		}
		got <- taken{"writers", l.Token(), nil}
	}()

	select {
	case <-s.Done():
	case <-time.After(2 * ttl):
		t.Fatal("the stalled session's Done never closed")
	}
	lost := time.Now()
	st := serverSession(t, other, s.ID())
	if st == nil || st.RemainingMillis == nil || *st.RemainingMillis <= 0 || len(st.Grants) != 4 {
		t.Fatalf("the server should still hold the session and its grants when the client gives up: %+v", st)
	}
	// Client and server share a clock here, so the server's time left is
	// about the margin, which is there for a clock-rate difference of up
	// to 10%: most of it must be left after the read's round trip.
	if left := time.Duration(*st.RemainingMillis) * time.Millisecond; left < client.Margin(ttl)/2 {
		t.Fatalf("the server had %v left when the client gave up: less than half the margin %v", left, client.Margin(ttl))
	}
	if !errors.Is(s.Err(), client.ErrLeaseExpired) || stalled.Load() == 0 {
		t.Fatalf("session err %v after %d stalled renewals", s.Err(), stalled.Load())
	}
	for _, l := range append(locks, permit) {
		if !closed(l.Done()) || !errors.Is(l.Err(), client.ErrLeaseExpired) {
			t.Fatalf("%s: done %t, err %v", l.Name(), closed(l.Done()), l.Err())
		}
	}
	old := map[string]uint64{"writers": permit.Token()}
	for i, name := range names {
		old[name] = locks[i].Token()
	}
	for range len(names) + 1 {
		tk := <-got
		if tk.err != nil || tk.token <= old[tk.name] {
			t.Fatalf("%s after the session: token %d (the session's %d), %v", tk.name, tk.token, old[tk.name], tk.err)
		}
	}
	t.Logf("ttl %v: Done closed with the server's session %dms from its expiry; the successors held every name %v later",
		ttl, *st.RemainingMillis, time.Since(lost).Round(time.Millisecond))
}

// A session outlives its leader: the keep-alive's renewal goes on to the
// new leader, which restarted the session at its full TTL, and the grants
// under it are still the session's.
func TestSessionAcrossFailover(t *testing.T) {
	c := tc.New(t, 3)
	cl, _ := newClient(t, c)
	ctx := context.Background()
	s, err := cl.NewSession(ctx, client.SessionTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	l, err := s.Lock(ctx, "survivor")
	if err != nil {
		t.Fatal(err)
	}
	old := c.WaitLeader(time.Second)
	c.Stop(old)
	c.WaitNewLeader(old.ID, 10*time.Second)
	after := time.Now()
	tc.Poll(t, 10*time.Second, "a session renewal confirmed by the new leader", func() bool {
		return s.Err() == nil && s.Deadline().After(after.Add(s.TTL()-client.Margin(s.TTL())))
	})
	if err := l.Err(); err != nil || l.Deadline() != s.Deadline() {
		t.Fatalf("the grant after failover: %v, deadline %v (session's %v)", err, l.Deadline(), s.Deadline())
	}
	st, err := cl.Session(ctx, s.ID())
	if err != nil || len(st.Grants) != 1 || st.Grants[0].Token != l.Token() {
		t.Fatalf("session after failover: %+v, %v", st, err)
	}
}

// A close whose answer was lost is retried, and the retry, which finds
// the session ended, reports the close the first attempt made (with no
// list: it was lost with the answer), rather than session_expired.
func TestSessionCloseAfterLostAnswer(t *testing.T) {
	c := tc.New(t, 3)
	cl, h := newClient(t, c)
	ctx := context.Background()
	s, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	var dropped atomic.Bool
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && strings.HasSuffix(req.URL.Path, "/close") && !dropped.Swap(true) {
			resp.Body.Close()
			return nil, errors.New("connection reset after the close was applied")
		}
		return resp, err
	})
	released, err := s.Close(ctx)
	if err != nil || len(released) != 0 || !dropped.Load() {
		t.Fatalf("close after a lost answer: %v, %v (dropped %t)", released, err, dropped.Load())
	}
	if st := serverLock(t, c, "job"); st.Held {
		t.Fatalf("job held after the close: %+v", st)
	}
}
