package test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Issue 28 item 1 against real nodes through the Go client: two shared
// holders at once (one under a session), a queued exclusive request that
// a later shared one does not pass, a shared grant's fenced write refused
// as not the holder, the lock's status listing the shared holders, /check
// and the token lookup reporting the mode, and the exclusive grant after
// the last shared release, with a greater token, which writes.
func TestSharedLocksThroughTheClient(t *testing.T) {
	c := tc.New(t, 3)
	c.WaitLeader(10 * time.Second)
	cl := coordClient(t, c)
	ctx := context.Background()
	r1, err := cl.Acquire(ctx, "db", client.Mode(wire.ModeShared), client.Holder("r1"))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.NewSession(ctx, client.SessionTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	r2, err := sess.Lock(ctx, "db", client.Mode(wire.ModeShared), client.Holder("r2"))
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Shared() || !r2.Shared() || r2.Token() <= r1.Token() {
		t.Fatalf("shared grants %+v %+v", r1.Grant(), r2.Grant())
	}
	writer := make(chan *client.Lease, 1)
	go func() {
		l, err := cl.Acquire(ctx, "db", client.Holder("w"), client.Wait(20*time.Second))
		if err != nil {
			t.Error(err)
		}
		writer <- l
	}()
	tc.Poll(t, 5*time.Second, "the writer queued", func() bool {
		st, err := cl.Lock(ctx, "db")
		return err == nil && st.Waiters == 1
	})
	if _, err := cl.Acquire(ctx, "db", client.Mode(wire.ModeShared), client.Holder("late")); !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("a shared acquire passing the queued writer: %v", err)
	}
	err = cl.PutFenced(ctx, "k", []byte("v"), r1.Token(), client.WithLock("db"))
	if !errors.Is(err, client.ErrNotLockHolder) || !strings.Contains(err.Error(), "shared grant cannot write") {
		t.Fatalf("a shared grant's fenced write: %v", err)
	}
	st, err := cl.Lock(ctx, "db")
	if err != nil || st.Held || len(st.SharedHolders) != 2 || st.SharedHolders[1].Session != sess.ID() {
		t.Fatalf("status %+v, %v", st, err)
	}
	if chk, err := cl.Check(ctx, "db", r2.Token()); err != nil || !chk.Current || chk.Mode != wire.ModeShared {
		t.Fatalf("check of a shared grant: %+v, %v", chk, err)
	}
	if rec, err := cl.Token(ctx, r1.Token()); err != nil || rec.Mode != wire.ModeShared || rec.Ended != wire.GrantHeld {
		t.Fatalf("token lookup of a shared grant: %+v, %v", rec, err)
	}
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var w *client.Lease
	select {
	case w = <-writer:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer was not served")
	}
	if w == nil || w.Shared() || w.Token() <= r2.Token() {
		t.Fatalf("writer's grant %+v after shared %d", w, r2.Token())
	}
	if err := cl.PutFenced(ctx, "k", []byte("v"), w.Token(), client.WithLock("db")); err != nil {
		t.Fatalf("the exclusive grant's write: %v", err)
	}
	if chk, err := cl.Check(ctx, "db", w.Token()); err != nil || !chk.Current || chk.Mode != wire.ModeExclusive {
		t.Fatalf("check of the exclusive grant: %+v, %v", chk, err)
	}
	w.Release(ctx)
}
