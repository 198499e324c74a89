package test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Issue 28 item 2 against real nodes through the Go client: two
// multi-locks that wait on the same names asked in crossing orders, with a
// single waiter behind them, are granted in the order they queued, each
// with one token for all its names; a lock kept for the first while free
// is refused to an acquire without a wait; none waits on the other; and
// both names' histories show both grants.
func TestWaitingMultiLocksThroughTheClient(t *testing.T) {
	c := tc.New(t, 3)
	c.WaitLeader(10 * time.Second)
	cl := coordClient(t, c)
	ctx := context.Background()
	hx, err := cl.Acquire(ctx, "acct.x", client.Holder("hx"))
	if err != nil {
		t.Fatal(err)
	}
	hy, err := cl.Acquire(ctx, "acct.y", client.Holder("hy"))
	if err != nil {
		t.Fatal(err)
	}
	queued := func(n int) {
		tc.Poll(t, 5*time.Second, "waiters queued", func() bool {
			st, err := cl.Lock(ctx, "acct.x")
			return err == nil && st.Waiters == n
		})
	}
	type got struct {
		m   *client.MultiLock
		err error
	}
	wait := func(holder string, names ...string) <-chan got {
		out := make(chan got, 1)
		go func() {
			m, err := cl.MultiLock(ctx, names, client.Holder(holder), client.Wait(20*time.Second))
			out <- got{m, err}
		}()
		return out
	}
	a := wait("A", "acct.x", "acct.y")
	queued(1)
	b := wait("B", "acct.y", "acct.x")
	queued(2)
	single := make(chan *client.Lease, 1)
	go func() {
		l, err := cl.Acquire(ctx, "acct.x", client.Holder("S"), client.Wait(20*time.Second))
		if err != nil {
			t.Error(err)
		}
		single <- l
	}()
	queued(3)
	if err := hx.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, "acct.x", client.Holder("late")); !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("an acquire of a name kept for a queued multi-lock: %v", err)
	}
	if err := hy.Release(ctx); err != nil {
		t.Fatal(err)
	}
	receive := func(ch <-chan got, who string) *client.MultiLock {
		select {
		case g := <-ch:
			if g.err != nil {
				t.Fatalf("%s: %v", who, g.err)
			}
			return g.m
		case <-time.After(15 * time.Second):
			t.Fatalf("%s not granted", who)
			return nil
		}
	}
	ma := receive(a, "A")
	for _, n := range []string{"acct.x", "acct.y"} {
		if st, err := cl.Lock(ctx, n); err != nil || st.Token != ma.Token() || st.Holder != "A" {
			t.Fatalf("%s after A's grant: %+v %v", n, st, err)
		}
	}
	select {
	case g := <-b:
		t.Fatalf("B granted beside A: %+v %v", g.m, g.err)
	default:
	}
	if err := ma.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mb := receive(b, "B")
	if mb.Token() <= ma.Token() {
		t.Fatalf("B's token %d not above A's %d", mb.Token(), ma.Token())
	}
	// Every name's history shows each multi-grant, as one grant with its
	// names; the token lookup answers it under its first name.
	for _, n := range []string{"acct.x", "acct.y"} {
		hist, err := cl.History(ctx, n, 2)
		if err != nil || len(hist) != 2 || hist[0].Token != mb.Token() || hist[1].Token != ma.Token() || hist[1].Lock != n ||
			!slices.Equal(hist[1].Names, []string{"acct.x", "acct.y"}) || hist[1].Ended != wire.EventReleased {
			t.Fatalf("%s's history: %+v %v", n, hist, err)
		}
	}
	if rec, err := cl.Token(ctx, mb.Token()); err != nil || rec.Lock != "acct.y" || !slices.Equal(rec.Names, []string{"acct.y", "acct.x"}) {
		t.Fatalf("B's token: %+v %v", rec, err)
	}
	if err := mb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-single:
		if l == nil || l.Token() <= mb.Token() {
			t.Fatalf("the single waiter behind them: %+v", l)
		}
		l.Release(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the single waiter behind the multi-locks was not served")
	}
}
