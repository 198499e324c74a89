package test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// A multi-lock in shared mode against real nodes through the Go client:
// it is granted beside a single shared grant of one of its names, with
// one token for both names; an exclusive acquire of either is refused
// while it lives; and a shared multi-lock asked while an exclusive
// request waits for a name queues behind it (FIFO: no writer starvation),
// granted only after the exclusive one has had the name and let it go.
// Fails with multiRefusal's ahead left false (coord/multiwait.go): the
// second shared multi-lock passes the queued exclusive and is granted at
// once.
func TestSharedMultiLockThroughTheClient(t *testing.T) {
	c := tc.New(t, 3)
	c.WaitLeader(10 * time.Second)
	cl := coordClient(t, c)
	ctx := context.Background()
	shared := client.Mode(wire.ModeShared)
	r, err := cl.Acquire(ctx, "doc.a", client.Holder("reader"), shared)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cl.MultiLock(ctx, []string{"doc.a", "doc.b"}, client.Holder("mr"), shared)
	if err != nil {
		t.Fatalf("shared multi-lock beside a shared grant: %v", err)
	}
	if !m.Shared() || m.Token() <= r.Token() {
		t.Fatalf("shared multi-lock: shared %v token %d after %d", m.Shared(), m.Token(), r.Token())
	}
	for _, n := range []string{"doc.a", "doc.b"} {
		if _, err := cl.Acquire(ctx, n, client.Holder("w")); !errors.Is(err, client.ErrLockHeld) {
			t.Fatalf("exclusive acquire of %s under a shared multi-lock: %v", n, err)
		}
	}
	// An exclusive request waits for doc.b; a shared multi-lock asked
	// after it does not pass it.
	writer := make(chan *client.Lease, 1)
	go func() {
		l, err := cl.Acquire(ctx, "doc.b", client.Holder("writer"), client.Wait(20*time.Second))
		if err != nil {
			t.Error(err)
		}
		writer <- l
	}()
	tc.Poll(t, 5*time.Second, "the writer queued", func() bool {
		st, err := cl.Lock(ctx, "doc.b")
		return err == nil && st.Waiters == 1
	})
	if _, err := cl.MultiLock(ctx, []string{"doc.b", "doc.c"}, client.Holder("late"), shared); !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("shared multi-lock past a queued exclusive request: %v", err)
	}
	late := make(chan *client.MultiLock, 1)
	go func() {
		l, err := cl.MultiLock(ctx, []string{"doc.c", "doc.b"}, client.Holder("late"), shared, client.Wait(20*time.Second))
		if err != nil {
			t.Error(err)
		}
		late <- l
	}()
	tc.Poll(t, 5*time.Second, "the shared multi-lock queued", func() bool {
		st, err := cl.Lock(ctx, "doc.b")
		return err == nil && st.Waiters == 2
	})
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var w *client.Lease
	select {
	case w = <-writer:
	case <-time.After(15 * time.Second):
		t.Fatal("the writer was not granted")
	}
	if w == nil || w.Token() <= m.Token() {
		t.Fatalf("writer's grant after the shared multi-lock: %+v", w)
	}
	select {
	case l := <-late:
		t.Fatalf("shared multi-lock granted while the writer holds doc.b: %+v", l)
	default:
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-late:
		if l == nil || !l.Shared() || l.Token() <= w.Token() {
			t.Fatalf("queued shared multi-lock: %+v", l)
		}
		_ = l.Release(ctx)
	case <-time.After(15 * time.Second):
		t.Fatal("the queued shared multi-lock was not granted")
	}
	_ = r.Release(ctx)
}
