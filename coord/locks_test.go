package coord

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// These tests run the lock service over a fake Raft (fakeraft_test.go) and
// a fake clock: no network, no sleeping for time to pass.

var bg = context.Background()

func mustAcquire(t *testing.T, s *Service, lock, holder string, ttl time.Duration) entry.Lock {
	t.Helper()
	res, err := s.Acquire(bg, AcquireRequest{Lock: lock, Holder: holder, TTL: ttl})
	if err != nil {
		t.Fatalf("acquire %s by %s: %v", lock, holder, err)
	}
	return res.Grant
}

type acquired struct {
	res fsm.AcquireResult
	err error
}

// enqueue starts an acquire that waits up to wait, and returns once it is
// queued behind n-1 others.
func enqueue(t *testing.T, s *Service, lock, holder string, wait time.Duration, n int) <-chan acquired {
	t.Helper()
	out := make(chan acquired, 1)
	go func() {
		res, err := s.Acquire(bg, AcquireRequest{Lock: lock, Holder: holder, TTL: 10 * time.Second, Wait: wait})
		out <- acquired{res, err}
	}()
	poll(t, fmt.Sprintf("%s queued", holder), func() bool { return s.Waiters(lock) == n })
	return out
}

func receive(t *testing.T, ch <-chan acquired) acquired {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to a queued acquire")
		return acquired{}
	}
}

// expiring reports whether the lock's lease has run out on the leader's
// timers: no time left (the fake clock fires due timers synchronously in
// Advance, so the expiry is under way by then).
func expiring(s *Service, f *fakeRaft, lock string) bool {
	cur, held := f.fsm.Lock(lock)
	if !held {
		return false
	}
	left, known := s.timers.Remaining(timed.LockKey(lock), cur.Token)
	return known && left == 0
}

func isHeld(f *fakeRaft, lock string) bool {
	_, held := f.fsm.Lock(lock)
	return held
}

// A released lock goes to the head waiter in the release's own entry: the
// waiter's token is that entry's index, and no acquire entry follows.
func TestHandoffInTheReleasingEntry(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	a := mustAcquire(t, s, "l", "a", 10*time.Second)
	b := enqueue(t, s, "l", "b", time.Minute, 1)
	if err := s.Release(bg, "l", a.Token, a.Lease); err != nil {
		t.Fatal(err)
	}
	got := receive(t, b)
	if got.err != nil {
		t.Fatal(got.err)
	}
	log := f.log()
	rel, ok := log[len(log)-1].(*entry.Release)
	if !ok || rel.Next == nil || rel.Next.Holder != "b" {
		t.Fatalf("last entry %#v: want the release carrying b's acquire", log[len(log)-1])
	}
	if got.res.Grant.Token != uint64(len(log)) || got.res.Grant.Holder != "b" {
		t.Fatalf("b got %+v; want the token of the release's entry, %d", got.res.Grant, len(log))
	}
	if cur, _ := f.fsm.Lock("l"); cur.Token != got.res.Grant.Token {
		t.Fatalf("FSM holds %+v", cur)
	}
	// The handoff's lease runs: b can renew it.
	if _, err := s.Renew(bg, "l", got.res.Grant.Token, got.res.Grant.Lease); err != nil {
		t.Fatalf("renewing the handed-off grant: %v", err)
	}
}

// Waiters are served first come, first served.
func TestWaitersServedInFIFOOrder(t *testing.T) {
	s, _, _ := newTestService(t, Config{})
	prev := mustAcquire(t, s, "l", "w0", 10*time.Second)
	var waiters []<-chan acquired
	for i := 1; i <= 3; i++ {
		waiters = append(waiters, enqueue(t, s, "l", fmt.Sprintf("w%d", i), time.Minute, i))
	}
	for i, w := range waiters {
		if err := s.Release(bg, "l", prev.Token, prev.Lease); err != nil {
			t.Fatal(err)
		}
		got := receive(t, w)
		if got.err != nil || got.res.Grant.Holder != fmt.Sprintf("w%d", i+1) || got.res.Grant.Token <= prev.Token {
			t.Fatalf("waiter %d got %+v, %v after %+v", i+1, got.res.Grant, got.err, prev)
		}
		prev = got.res.Grant
	}
}

// A lease expires at its TTL, and the expiry hands the lock to the head
// waiter in the same entry.
func TestExpiryHandsOffInTheExpireEntry(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	mustAcquire(t, s, "l", "a", time.Second)
	b := enqueue(t, s, "l", "b", time.Minute, 1)
	clock.Advance(999 * time.Millisecond)
	if expiring(s, f, "l") {
		t.Fatal("expired before its TTL")
	}
	clock.Advance(time.Millisecond)
	got := receive(t, b)
	if got.err != nil {
		t.Fatal(got.err)
	}
	log := f.log()
	exp, ok := log[len(log)-1].(*entry.Expire)
	if !ok || exp.Next == nil || got.res.Grant.Token != uint64(len(log)) {
		t.Fatalf("last entry %#v, b's grant %+v: want b granted by the expire entry", log[len(log)-1], got.res.Grant)
	}
}

// After a failover the new leader cannot know how much of a lease was
// left (deadlines are not replicated), so it restarts every lease at its
// full TTL: a lease may outlive its TTL, never end early.
func TestFailoverRestartsLeasesAtFullTTL(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	mustAcquire(t, s, "l", "a", 10*time.Second)
	clock.Advance(8 * time.Second)
	f.setLeader(false)
	poll(t, "demotion", func() bool { return s.timers.Len() == 0 })
	f.setLeader(true)
	waitReady(t, s)
	clock.Advance(9999 * time.Millisecond) // 17.999 s after the grant
	if expiring(s, f, "l") || !isHeld(f, "l") {
		t.Fatal("a lease ended before a full TTL after the promotion")
	}
	clock.Advance(time.Millisecond)
	poll(t, "the expiry", func() bool { return !isHeld(f, "l") })
	if _, ok := f.log()[len(f.log())-1].(*entry.Expire); !ok {
		t.Fatal("the lock was freed by something other than an expire entry")
	}
}

// A follower tracks nothing: demotion stops every lease timer and answers
// every waiter, and no expiry is proposed however much time passes.
func TestDemotionDropsTimersAndWaiters(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	mustAcquire(t, s, "l", "a", time.Second)
	b := enqueue(t, s, "l", "b", time.Minute, 1)
	f.setLeader(false)
	if got := receive(t, b); !errors.Is(got.err, cluster.ErrNotLeader) {
		t.Fatalf("waiter after demotion: %v", got.err)
	}
	poll(t, "timers dropped", func() bool { return s.timers.Len() == 0 && clock.Pending() == 0 })
	entries := len(f.log())
	clock.Advance(time.Hour)
	if len(f.log()) != entries || !isHeld(f, "l") {
		t.Fatal("a follower proposed an expiry")
	}
	if _, err := s.Acquire(bg, AcquireRequest{Lock: "m", Holder: "c", TTL: time.Second}); !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("acquire on a follower: %v", err)
	}
}

// A retry with the request id of a grant gets that grant back, also when
// the first attempt's outcome was unknown to the caller.
func TestRetryWithRequestIDGetsTheSameGrant(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	f.mu.Lock()
	f.hook = func(entry.Command) (bool, error) { return true, cluster.ErrOutcomeUnknown } // committed, answer lost
	f.mu.Unlock()
	req := AcquireRequest{Lock: "l", Holder: "a", TTL: 10 * time.Second, RequestID: "r1"}
	if _, err := s.Acquire(bg, req); !errors.Is(err, cluster.ErrOutcomeUnknown) {
		t.Fatalf("first attempt: %v", err)
	}
	f.mu.Lock()
	f.hook = nil
	f.mu.Unlock()
	first, _ := f.fsm.Lock("l")
	for range 2 {
		res, err := s.Acquire(bg, req)
		if err != nil || !res.Existing || res.Grant.Token != first.Token || res.Grant.Lease != first.Lease {
			t.Fatalf("retry: %+v, %v; want the grant %+v again", res, err, first)
		}
	}
	if _, err := s.Renew(bg, "l", first.Token, first.Lease); err != nil {
		t.Fatalf("the retried grant's lease is not tracked: %v", err)
	}
	if _, err := s.Acquire(bg, AcquireRequest{Lock: "l", Holder: "a", TTL: 10 * time.Second, RequestID: "r2"}); !errors.Is(err, refusal.ErrLockHeld) {
		t.Fatalf("another request id: %v", err)
	}
}

// A held lock is refused without writing the log.
func TestHeldLockRefusedWithoutAnEntry(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	a := mustAcquire(t, s, "l", "a", 10*time.Second)
	entries := len(f.log())
	_, err := s.Acquire(bg, AcquireRequest{Lock: "l", Holder: "b", TTL: time.Second})
	var held *refusal.HeldError
	if !errors.As(err, &held) || held.Holder != "a" || held.Token != a.Token || len(f.log()) != entries {
		t.Fatalf("acquire of a held lock: %v, %d new entries", err, len(f.log())-entries)
	}
}

// A queued acquire gives up when its wait ends, and leaves the queue.
func TestWaiterGivesUpAtItsWait(t *testing.T) {
	s, _, clock := newTestService(t, Config{})
	mustAcquire(t, s, "l", "a", time.Minute)
	b := enqueue(t, s, "l", "b", 5*time.Second, 1)
	clock.Advance(5 * time.Second)
	var held *refusal.HeldError
	if got := receive(t, b); !errors.As(got.err, &held) || held.Holder != "a" {
		t.Fatalf("waiter at the end of its wait: %v", got.err)
	}
	if n := s.Waiters("l"); n != 0 || s.queued.Load() != 0 {
		t.Fatalf("%d waiters left", n)
	}
}

// A new leader serves nothing before its Barrier: its FSM may lack entries
// of earlier leaders.
func TestServesOnlyAfterTheBarrier(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open) // before Close, which waits for the promotion
	f.mu.Lock()
	f.barrier = gate
	f.mu.Unlock()
	f.setLeader(false)
	f.setLeader(true)
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	if _, err := s.Acquire(ctx, AcquireRequest{Lock: "l", Holder: "a", TTL: time.Second}); !errors.Is(err, cluster.ErrNoLeader) {
		t.Fatalf("acquire before the barrier: %v", err)
	}
	open()
	waitReady(t, s)
	mustAcquire(t, s, "l", "a", time.Second)
}

// Limits refuse with their own errors before anything is proposed.
func TestLimits(t *testing.T) {
	s, f, _ := newTestService(t, Config{MaxWaitersPerLock: 1, MaxLocksPerHolder: 2})
	mustAcquire(t, s, "l1", "h", time.Minute)
	mustAcquire(t, s, "l2", "h", time.Minute)
	entries := len(f.log())
	if _, err := s.Acquire(bg, AcquireRequest{Lock: "l3", Holder: "h", TTL: time.Minute}); !errors.Is(err, ErrTooManyLocks) {
		t.Fatalf("third lock of a holder: %v", err)
	}
	enqueue(t, s, "l1", "w1", time.Minute, 1)
	if _, err := s.Acquire(bg, AcquireRequest{Lock: "l1", Holder: "w2", TTL: time.Minute, Wait: time.Minute}); !errors.Is(err, ErrTooManyWaiters) {
		t.Fatalf("second waiter: %v", err)
	}
	if len(f.log()) != entries {
		t.Fatal("a refused acquire wrote the log")
	}
}

// A waiter's holder that reached --max-locks-per-holder while it waited is
// refused when its turn comes, and the name goes to the next waiter: the
// limit was not checked when it queued behind a held name. Fails with the
// hand-off's check (overLimit) left out: h is handed l3 and holds three;
// and with grantWaiter's check left out: Release's serving grants it.
func TestLimitsHoldWhenAQueuedWaiterIsServed(t *testing.T) {
	s, _, _ := newTestService(t, Config{MaxLocksPerHolder: 2})
	mustAcquire(t, s, "l1", "h", time.Minute)
	g := mustAcquire(t, s, "l3", "o", time.Minute)
	queued := enqueue(t, s, "l3", "h", time.Minute, 1)
	next := enqueue(t, s, "l3", "w", time.Minute, 2)
	mustAcquire(t, s, "l2", "h", time.Minute)
	if err := s.Release(bg, "l3", g.Token, g.Lease); err != nil {
		t.Fatal(err)
	}
	if a := receive(t, queued); !errors.Is(a.err, ErrTooManyLocks) {
		t.Fatalf("h's queued acquire with two held: %+v %v", a.res, a.err)
	}
	if a := receive(t, next); a.err != nil || a.res.Grant.Holder != "w" {
		t.Fatalf("the waiter behind it: %+v %v", a.res, a.err)
	}
}

// Fenced writes go through the log and are refused below the high-water
// mark; reads see them.
func TestFencedPutAndGet(t *testing.T) {
	s, _, _ := newTestService(t, Config{})
	g := mustAcquire(t, s, "l", "a", time.Minute)
	if _, err := s.Put(bg, PutRequest{Key: "k", Value: []byte("v1"), Token: g.Token, Lock: "l"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(bg, PutRequest{Key: "k", Value: []byte("v0"), Token: g.Token - 1}); !errors.Is(err, refusal.ErrStaleToken) {
		t.Fatalf("write below the mark: %v", err)
	}
	k, ok, _, err := s.Get(bg, "k", false)
	if err != nil || !ok || string(k.Value) != "v1" || k.Token != g.Token {
		t.Fatalf("get: %+v %v %v", k, ok, err)
	}
}

func TestLocksStreamsWithoutCopyingTheList(t *testing.T) {
	s, _, _ := newTestService(t, Config{})
	const n = 10_000
	for i := range n {
		mustAcquire(t, s, fmt.Sprintf("l%05d", n-1-i), "h", time.Hour)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	locks, _, err := s.Locks(bg, false)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// A pointer per lock (8 bytes) is the price of a consistent, sorted
	// view; a copy of the statuses would be over 150 bytes per lock.
	if perLock := float64(after.TotalAlloc-before.TotalAlloc) / n; perLock > 40 {
		t.Errorf("Locks allocated %.0f bytes per lock before the first was read, want a pointer's worth", perLock)
	}
	i := 0
	for st := range locks {
		if want := fmt.Sprintf("l%05d", i); st.Name != want || !st.Held || !st.Known {
			t.Fatalf("lock %d: %+v, want %s held with a known lease", i, st, want)
		}
		i++
	}
	if i != n {
		t.Errorf("%d locks listed, want %d", i, n)
	}
}

// A lock's status and the lock list count the acquires queued for it, and
// stop counting one that was served or gave up.
func TestLockStatusCountsWaiters(t *testing.T) {
	s, _, clock := newTestService(t, Config{})
	g := mustAcquire(t, s, "l", "a", time.Minute)
	b := enqueue(t, s, "l", "b", time.Minute, 1)
	c := enqueue(t, s, "l", "c", 5*time.Second, 2)
	waiters := func() (one, listed int) {
		st, err := s.Lock(bg, "l", false)
		if err != nil {
			t.Fatal(err)
		}
		locks, _, err := s.Locks(bg, false)
		if err != nil {
			t.Fatal(err)
		}
		var all []LockStatus
		for st := range locks {
			all = append(all, st)
		}
		if len(all) != 1 {
			t.Fatalf("locks: %+v", all)
		}
		return st.Waiters, all[0].Waiters
	}
	if one, listed := waiters(); one != 2 || listed != 2 {
		t.Fatalf("waiters with two queued: status %d, list %d", one, listed)
	}
	clock.Advance(5 * time.Second)
	receive(t, c)
	if one, listed := waiters(); one != 1 || listed != 1 {
		t.Fatalf("waiters after one gave up: status %d, list %d", one, listed)
	}
	if err := s.Release(bg, "l", g.Token, g.Lease); err != nil {
		t.Fatal(err)
	}
	receive(t, b)
	if one, listed := waiters(); one != 0 || listed != 0 {
		t.Fatalf("waiters after the last was served: status %d, list %d", one, listed)
	}
}

// A waiter whose wait ends as the lock comes free, released where this
// service did not hand it on (on another leader, say), gets the lock: it
// is never told the lock is held by nobody with token 0.
func TestWaiterTakesALockFreedAsItsWaitEnds(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	a := mustAcquire(t, s, "l", "a", time.Minute)
	b := enqueue(t, s, "l", "b", 5*time.Second, 1)
	if _, err := f.Apply(&entry.Release{Lock: "l", Token: a.Token, Lease: a.Lease}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	got := receive(t, b)
	if got.err != nil || got.res.Grant.Holder != "b" || got.res.Grant.Token <= a.Token {
		t.Fatalf("waiter whose wait ended on a free lock: %+v, %v; want a grant to b", got.res.Grant, got.err)
	}
}

// Waiters left on a free lock (freed by an entry this leader did not hand
// on, as a release whose outcome was unknown leaves them) keep their
// order: the one whose wait ends first serves those ahead of it before it
// is answered, instead of taking the lock past them.
func TestWaiterWhoseWaitEndsServesThoseAheadFirst(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	a := mustAcquire(t, s, "l", "a", time.Minute)
	b := enqueue(t, s, "l", "b", time.Minute, 1)
	c := enqueue(t, s, "l", "c", 5*time.Second, 2)
	if _, err := f.Apply(&entry.Release{Lock: "l", Token: a.Token, Lease: a.Lease}); err != nil {
		t.Fatal(err) // freed behind the service's back: nobody served
	}
	clock.Advance(5 * time.Second)
	gotC := receive(t, c)
	if !errors.Is(gotC.err, refusal.ErrLockHeld) {
		t.Fatalf("c, whose wait ended behind b: %+v, %v; want lock_held (b first)", gotC.res.Grant, gotC.err)
	}
	gotB := receive(t, b)
	if gotB.err != nil || gotB.res.Grant.Holder != "b" {
		t.Fatalf("b, ahead of c: %+v, %v; want the grant", gotB.res.Grant, gotB.err)
	}
}
