package coord

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

func sharedReq(lock, holder string, wait time.Duration) AcquireRequest {
	return AcquireRequest{Lock: lock, Holder: holder, TTL: 10 * time.Second, Wait: wait, Shared: true}
}

func mustShare(t *testing.T, s *Service, lock, holder string) entry.Lock {
	t.Helper()
	res, err := s.Acquire(bg, sharedReq(lock, holder, 0))
	if err != nil {
		t.Fatalf("shared acquire of %s by %s: %v", lock, holder, err)
	}
	return res.Grant
}

// enqueueReq starts req and returns once it is queued behind n-1 others.
func enqueueReq(t *testing.T, s *Service, req AcquireRequest, n int) <-chan acquired {
	t.Helper()
	out := make(chan acquired, 1)
	go func() {
		res, err := s.Acquire(bg, req)
		out <- acquired{res, err}
	}()
	poll(t, fmt.Sprintf("%s queued", req.Holder), func() bool { return s.Waiters(req.Lock) == n })
	return out
}

// Shared holders hold at once; a queued exclusive request blocks the
// shared ones after it (FIFO, no writer starvation), waited or not; the
// release of one shared grant of two offers the exclusive waiter nothing
// (it waits on, unanswered), the last one hands it the lock in its entry,
// with a token above every shared one; its release hands the lock to the
// shared requests queued behind it, the first in the release's entry and
// the next in the entry right after, each its own token.
func TestSharedLocksFIFOAcrossModes(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	r1, r2 := mustShare(t, s, "l", "r1"), mustShare(t, s, "l", "r2")
	if r1.Token == r2.Token || r2.Mode != entry.ModeShared {
		t.Fatalf("shared grants %+v %+v", r1, r2)
	}
	w := enqueueReq(t, s, AcquireRequest{Lock: "l", Holder: "w", TTL: 10 * time.Second, Wait: time.Minute}, 1)
	r3 := enqueueReq(t, s, sharedReq("l", "r3", time.Minute), 2)
	r4 := enqueueReq(t, s, sharedReq("l", "r4", time.Minute), 3)
	var held *refusal.HeldError
	if _, err := s.Acquire(bg, sharedReq("l", "late", 0)); !errors.As(err, &held) || held.Shared != 2 {
		t.Fatalf("a shared acquire passing the queued exclusive one: %v", err)
	}
	if err := s.Release(bg, "l", r1.Token, r1.Lease); err != nil {
		t.Fatal(err)
	}
	if rel := f.log()[len(f.log())-1].(*entry.Release); rel.Next != nil || s.Waiters("l") != 3 {
		t.Fatalf("the release of one shared grant of two offered %+v; %d waiting", rel.Next, s.Waiters("l"))
	}
	if err := s.Release(bg, "l", r2.Token, r2.Lease); err != nil {
		t.Fatal(err)
	}
	got := receive(t, w)
	if got.err != nil || got.res.Grant.Token != uint64(len(f.log())) || got.res.Grant.Token <= r2.Token || got.res.Grant.Mode != "" {
		t.Fatalf("the exclusive waiter got %+v, %v", got.res.Grant, got.err)
	}
	if err := s.Release(bg, "l", got.res.Grant.Token, got.res.Grant.Lease); err != nil {
		t.Fatal(err)
	}
	g3, g4 := receive(t, r3), receive(t, r4)
	if g3.err != nil || g4.err != nil {
		t.Fatal(g3.err, g4.err)
	}
	log := f.log()
	rel, ok := log[g3.res.Grant.Token-1].(*entry.Release)
	if !ok || rel.Next == nil || rel.Next.Holder != "r3" || g4.res.Grant.Token != g3.res.Grant.Token+1 {
		t.Fatalf("r3 got %d (entry %#v), r4 %d: want r3 in the release's entry, r4 in the next", g3.res.Grant.Token, log[g3.res.Grant.Token-1], g4.res.Grant.Token)
	}
	if acq, ok := log[g4.res.Grant.Token-1].(*entry.Acquire); !ok || acq.Holder != "r4" || acq.Mode != entry.ModeShared {
		t.Fatalf("entry %d: %#v", g4.res.Grant.Token, log[g4.res.Grant.Token-1])
	}
	st, err := s.Lock(bg, "l", false)
	if err != nil || st.Held || len(st.Shared) != 2 || !st.Shared[0].Known {
		t.Fatalf("status %+v, %v", st, err)
	}
	if c, err := s.Check(bg, "l", g4.res.Grant.Token, false); err != nil || !c.Current || !c.Shared {
		t.Fatalf("check of a shared grant: %+v %v", c, err)
	}
}

// A shared grant's lease is its own: renewed, it outlives its TTL; not
// renewed, it expires alone at its TTL while the other shared grant stays;
// a new leader restarts it at full length.
func TestSharedLeasesExpireAlone(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	a, b := mustShare(t, s, "l", "a"), mustShare(t, s, "l", "b")
	clock.Advance(6 * time.Second)
	if _, err := s.Renew(bg, "l", b.Token, b.Lease); err != nil {
		t.Fatal(err)
	}
	f.setLeader(false)
	poll(t, "demotion", func() bool { return s.timers.Len() == 0 })
	f.setLeader(true)
	waitReady(t, s)
	clock.Advance(5 * time.Second)
	if _, err := s.Renew(bg, "l", b.Token, b.Lease); err != nil {
		t.Fatal(err)
	}
	clock.Advance(4999 * time.Millisecond)
	if len(f.fsm.SharedLocks("l")) != 2 {
		t.Fatal("a shared lease ended before a full TTL after the promotion")
	}
	clock.Advance(time.Millisecond)
	poll(t, "a's expiry", func() bool { return len(f.fsm.SharedLocks("l")) == 1 })
	if left := f.fsm.SharedLocks("l"); left[0].Token != b.Token {
		t.Fatalf("left %+v, want b's renewed grant", left)
	}
	clock.Advance(5 * time.Second)
	poll(t, "b's expiry", func() bool { return len(f.fsm.SharedLocks("l")) == 0 })
	if _, err := s.Renew(bg, "l", a.Token, a.Lease); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("renewal of an expired shared grant: %v", err)
	}
}

// Until every member reads LogFormatLockModes a shared acquire cannot be
// written: refused at once with entry.ErrFormatTooOld, before it could
// queue behind a held lock (no entry could ever carry it), nothing
// proposed.
func TestSharedWaitsForTheFormat(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	mustAcquire(t, s, "l", "w", time.Minute)
	setFormat(f, entry.LogFormatSession)
	entries := len(f.log())
	ch := make(chan acquired, 1)
	go func() {
		res, err := s.Acquire(bg, sharedReq("l", "r", time.Minute))
		ch <- acquired{res, err}
	}()
	if got := receive(t, ch); !errors.Is(got.err, entry.ErrFormatTooOld) || len(f.log()) != entries {
		t.Fatalf("shared acquire with a member on an older build: %v", got.err)
	}
}
