package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

func TestHistoryTokenAndWaitLock(t *testing.T) {
	c := tc.New(t, 3)
	c.WaitReady(15 * time.Second)
	cl, _ := newClient(t, c)
	ctx := context.Background()
	a, err := cl.Acquire(ctx, "hist.a", client.Holder("one"), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	st, index, err := cl.WaitLock(ctx, "hist.a", 0, time.Second)
	if err != nil || !st.Held || index < a.Token() {
		t.Fatalf("wait from 0: %+v at %d: %v", st, index, err)
	}
	woke := make(chan wire.LockStatus, 1)
	go func() {
		st, _, err := cl.WaitLock(ctx, "hist.a", index, time.Minute)
		if err != nil {
			t.Error(err)
		}
		woke <- st
	}()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-woke:
		if st.Held {
			t.Fatalf("woken with %+v", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the release did not wake WaitLock")
	}
	b, err := cl.Acquire(ctx, "hist.a", client.Holder("two"), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	// Any member answers from its applied state: poll until the one asked
	// has applied the grant.
	var hist []wire.GrantRecord
	tc.Poll(t, 5*time.Second, "the history", func() bool {
		hist, err = cl.History(ctx, "hist.a", 0)
		return err == nil && len(hist) == 2
	})
	if hist[0].Token != b.Token() || hist[0].Ended != wire.GrantHeld || hist[1].Token != a.Token() || hist[1].Ended != "released" || hist[1].Holder != "one" {
		t.Fatalf("history %+v", hist)
	}
	if one, err := cl.History(ctx, "hist.a", 1); err != nil || len(one) != 1 || one[0].Token != b.Token() {
		t.Fatalf("history limited to 1: %+v %v", one, err)
	}
	g, err := cl.Token(ctx, a.Token())
	if err != nil || g.Lock != "hist.a" || g.Holder != "one" || g.Ended != "released" || g.EndedIndex <= g.GrantedIndex {
		t.Fatalf("token %d: %+v %v", a.Token(), g, err)
	}
	_, err = cl.Token(ctx, b.Token()+1_000_000)
	var apiErr *client.APIError
	if !errors.Is(err, client.ErrUnknownToken) || !errors.As(err, &apiErr) || apiErr.Reason != wire.ReasonNeverGranted {
		t.Fatalf("a token never issued: %v", err)
	}
}

// A semaphore permit's token answers with its semaphore, holder and how it
// ended, on any member once applied, and the semaphore's history lists it.
func TestPermitTokenAndSemaphoreHistory(t *testing.T) {
	c := tc.New(t, 3)
	tc.Poll(t, 15*time.Second, "permits in the grant history settings on every member", func() bool {
		for _, n := range c.Running() {
			if cfg, ok := n.Inst.Coord.GrantHistorySettings(); !ok || !cfg.Permits {
				return false
			}
		}
		return true
	})
	cl, _ := newClient(t, c)
	ctx := context.Background()
	a, err := cl.AcquirePermit(ctx, "hist.s", 2, client.Holder("one"), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := cl.AcquirePermit(ctx, "hist.s", 2, client.Holder("two"), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	var hist []wire.GrantRecord
	tc.Poll(t, 5*time.Second, "the semaphore's history", func() bool {
		hist, err = cl.SemaphoreHistory(ctx, "hist.s", 0)
		return err == nil && len(hist) == 2
	})
	if hist[0].Token != b.Token() || hist[0].Ended != wire.GrantHeld || hist[0].Semaphore != "hist.s" || hist[1].Token != a.Token() || hist[1].Ended != "released" {
		t.Fatalf("history %+v", hist)
	}
	g, err := cl.Token(ctx, a.Token())
	if err != nil || g.Semaphore != "hist.s" || g.Lock != "" || g.Holder != "one" || g.Ended != "released" || g.EndedIndex <= g.GrantedIndex {
		t.Fatalf("token %d: %+v %v", a.Token(), g, err)
	}
}
