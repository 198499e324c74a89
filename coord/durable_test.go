package coord

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/internal/fakeclock"
	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// askDurable starts holder's durable acquire of lock, request id
// "r-"+holder, waiting up to wait; it returns once the FSM holds n durable
// waiters.
func askDurable(t *testing.T, s *Service, lock, holder string, wait time.Duration, n int) <-chan acquired {
	t.Helper()
	out := make(chan acquired, 1)
	go func() {
		res, err := s.Acquire(bg, AcquireRequest{Lock: lock, Holder: holder, TTL: 10 * time.Second, Wait: wait,
			RequestID: "r-" + holder, Durable: true})
		out <- acquired{res, err}
	}()
	poll(t, fmt.Sprintf("%s enqueued", holder), func() bool { return s.fsm.DurableCount() == n })
	return out
}

// countOf counts the log's entries of type typ.
func countOf(f *fakeRaft, typ entry.CommandType) int {
	n := 0
	for _, c := range f.log() {
		if c.Type() == typ {
			n++
		}
	}
	return n
}

// Three durable waiters queued behind a holder keep their order across a
// demotion and a promotion: the new view queues them again from the FSM,
// ahead of a new arrival; asked again with their request ids, they attach
// (no second Enqueue), and each is granted in turn, in enqueue order, with
// a greater token and its Enqueue's index.
func TestDurableWaitersKeepTheirOrderAcrossALeaderChange(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	holder := mustAcquire(t, s, "a", "holder", 10*time.Second)
	var first []<-chan acquired
	for i, w := range []string{"w1", "w2", "w3"} {
		first = append(first, askDurable(t, s, "a", w, time.Minute, i+1))
	}
	f.setLeader(false)
	for _, ch := range first {
		if a := receive(t, ch); !errors.Is(a.err, cluster.ErrNotLeader) {
			t.Fatalf("a waiter on a demoted leader: %+v", a)
		}
	}
	f.setLeader(true)
	waitReady(t, s)
	if n := s.Waiters("a"); n != 3 {
		t.Fatalf("the new leader queued %d durable waiters again, want 3", n)
	}
	late := enqueue(t, s, "a", "late", time.Minute, 4)
	var again []<-chan acquired
	for _, w := range []string{"w3", "w1", "w2"} { // asked again in another order
		again = append(again, askDurable(t, s, "a", w, time.Minute, 3))
	}
	waiters := f.fsm.DurableWaiters()
	if err := s.Release(bg, "a", holder.Token, holder.Lease); err != nil {
		t.Fatal(err)
	}
	last := holder.Token
	for i, ch := range []<-chan acquired{again[1], again[2], again[0]} {
		a := receive(t, ch)
		if a.err != nil || a.res.Grant.Token <= last || a.res.Grant.Holder != waiters[i].Holder() || a.res.Grant.WaitIndex != waiters[i].Index {
			t.Fatalf("grant %d: %+v (%v), want %s enqueued at %d above token %d", i, a.res.Grant, a.err, waiters[i].Holder(), waiters[i].Index, last)
		}
		last = a.res.Grant.Token
		if err := s.Release(bg, "a", a.res.Grant.Token, a.res.Grant.Lease); err != nil {
			t.Fatal(err)
		}
	}
	if a := receive(t, late); a.err != nil || a.res.Grant.Holder != "late" || a.res.Grant.Token <= last {
		t.Fatalf("the new arrival after the durable waiters: %+v", a)
	}
	if n := countOf(f, entry.CmdEnqueue); n != 3 {
		t.Fatalf("%d Enqueue entries, want one per waiter", n)
	}
}

// A durable waiter whose caller is gone keeps its place for its wait after
// its last ask, on the leader's timers, and then leaves by a Dequeue; an
// ask within that restarts it. Its caller's own wait ends as an acquire
// without a wait would (lock_held), the waiter staying queued.
func TestDurableWaiterLeavesAfterItsWait(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	mustAcquire(t, s, "a", "holder", time.Hour)
	ask := func() <-chan acquired {
		pending := clock.Pending()
		ch := askDurable(t, s, "a", "w", time.Second, 1)
		poll(t, "the caller's wait to be timed", func() bool { return clock.Pending() > pending })
		return ch
	}
	first := ask()
	clock.Advance(600 * time.Millisecond)
	second := ask() // restarts the waiter's wait: it ends 1.6 s after the first ask
	clock.Advance(400 * time.Millisecond)
	if a := receive(t, first); !errors.Is(a.err, refusal.ErrLockHeld) {
		t.Fatalf("the first caller's wait ended: %+v", a)
	}
	clock.Advance(500 * time.Millisecond)
	ws := s.fsm.DurableWaiters()
	if len(ws) != 1 || countOf(f, entry.CmdDequeue) != 0 {
		t.Fatalf("a waiter asked again 0.9 s ago left: %+v", ws)
	}
	index := ws[0].Index
	if left, ok := s.timers.Remaining(timed.LockWaitKey("a", index), index); !ok || left != 100*time.Millisecond {
		t.Fatalf("the wait of a waiter asked again 0.9 s ago has %v left (%v), want 0.1 s", left, ok)
	}
	clock.Advance(100 * time.Millisecond)
	if a := receive(t, second); !errors.Is(a.err, refusal.ErrLockHeld) {
		t.Fatalf("the second caller's wait ended: %+v", a)
	}
	poll(t, "the waiter to leave", func() bool { return s.fsm.DurableCount() == 0 && s.Waiters("a") == 0 })
	if n := countOf(f, entry.CmdDequeue); n != 1 {
		t.Fatalf("%d Dequeue entries, want 1", n)
	}
	if n := countOf(f, entry.CmdEnqueue); n != 1 {
		t.Fatalf("%d Enqueue entries, want 1", n)
	}
}

// A durable waiter served on a new leader with nobody attached gets its
// grant, timed: its caller collects it with its request id (the grant's
// wait index kept), or it expires after its TTL.
func TestDurableWaiterServedUnattached(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	holder := mustAcquire(t, s, "a", "holder", 10*time.Second)
	ch := askDurable(t, s, "a", "w", time.Minute, 1)
	f.setLeader(false)
	receive(t, ch)
	// The holder's grant ends while no node leads (the next leader's
	// release of it, say): here a release applied directly.
	f.fsm.ApplyCommand(&entry.Release{Lock: "a", Token: holder.Token, Lease: holder.Lease}, 1000)
	f.mu.Lock()
	f.index = 1000
	f.mu.Unlock()
	f.setLeader(true)
	waitReady(t, s)
	poll(t, "the unattached waiter to be granted", func() bool { l, ok := f.fsm.Lock("a"); return ok && l.Holder == "w" })
	res, err := s.Acquire(bg, AcquireRequest{Lock: "a", Holder: "w", TTL: 10 * time.Second, Wait: time.Minute, RequestID: "r-w", Durable: true})
	if err != nil || !res.Existing || res.Grant.WaitIndex == 0 {
		t.Fatalf("collected: %+v (%v)", res, err)
	}
	clock.Advance(10 * time.Second)
	poll(t, "the uncollected grant to expire", func() bool { return !isHeld(f, "a") })
}

// A durable acquire is refused while a member reads log formats before
// durable waiters.
func TestDurableNeedsItsFormat(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	f.mu.Lock()
	f.format = entry.LogFormatLockModes
	f.mu.Unlock()
	_, err := s.Acquire(bg, AcquireRequest{Lock: "a", Holder: "w", TTL: time.Second, Wait: time.Second, RequestID: "r", Durable: true})
	if !errors.Is(err, entry.ErrFormatTooOld) {
		t.Fatalf("durable acquire in format 9: %v", err)
	}
}

// A semaphore's durable waiters are kept and served as a lock's: queued
// behind a full semaphore, queued again by a new leader in enqueue order,
// and granted a permit each, in that order, saying where they queued.
func TestDurablePermitWaitersKeepTheirOrder(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	held, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: "holder", Limit: 1, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(who string, n int) <-chan error {
		out := make(chan error, 1)
		go func() {
			r, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: who, Limit: 1, TTL: time.Minute, Wait: time.Minute,
				RequestID: "r-" + who, Durable: true})
			if err == nil && r.Permit.WaitIndex == 0 {
				err = fmt.Errorf("%s's permit has no wait index", who)
			}
			if err == nil {
				err = s.ReleasePermit(bg, "s", r.Permit.Token, r.Permit.Lease)
			}
			out <- err
		}()
		poll(t, who+" enqueued", func() bool { return s.fsm.DurableCount() == n })
		return out
	}
	ask("p1", 1)
	ask("p2", 2)
	f.setLeader(false)
	f.setLeader(true)
	waitReady(t, s)
	first, second := ask("p1", 2), ask("p2", 2)
	waiters := f.fsm.DurableWaiters()
	if err := s.ReleasePermit(bg, "s", held.Permit.Token, held.Permit.Lease); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, c := range f.log() {
		if r, ok := c.(*entry.SemRelease); ok && r.Next != nil {
			got = append(got, r.Next.Holder)
		}
	}
	if len(waiters) != 2 || fmt.Sprint(got) != "[p1 p2]" {
		t.Fatalf("permits handed to %v, want p1 then p2 (%+v)", got, waiters)
	}
}

// BenchmarkDurableWaitersOnTheLeader measures what a durable waiter nobody
// asks for costs a new leader, beyond the FSM's record of it: its place in
// the waitq, its keeper (a goroutine) and the timer of its wait, as the
// growth of the heap and the goroutine stacks when 10,000 are queued again
// by a promotion, on 100 held locks.
func BenchmarkDurableWaitersOnTheLeader(b *testing.B) {
	const locks, waiters = 100, 10_000
	for range b.N {
		f := newFakeRaft()
		s := New(f, f.fsm, Config{Clock: fakeclock.New(), MaxWaiters: 2 * waiters, MaxWaitersPerLock: waiters})
		poll(b, "the service to serve", s.leader.Ready)
		for i := range locks {
			if _, err := s.Acquire(bg, AcquireRequest{Lock: fmt.Sprint("l", i), Holder: "holder", TTL: time.Hour}); err != nil {
				b.Fatal(err)
			}
		}
		for i := range waiters {
			go s.Acquire(bg, AcquireRequest{Lock: fmt.Sprint("l", i%locks), Holder: fmt.Sprint("w", i), TTL: time.Hour, Wait: time.Hour,
				RequestID: fmt.Sprintf("%032x", i), Durable: true})
		}
		poll(b, "every waiter enqueued", func() bool { return f.fsm.DurableCount() == waiters })
		f.setLeader(false)
		poll(b, "every caller answered", func() bool { return s.queued.Load() == 0 })
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f.setLeader(true)
		poll(b, "the service to serve again", s.leader.Ready)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if n := s.queued.Load(); n != waiters {
			b.Fatalf("%d queued again", n)
		}
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/waiters, "heap-B/waiter")
		b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/waiters, "stack-B/waiter")
		s.Close()
	}
}

// A service that closes (its node shutting down) leaves its durable
// waiters in the log for the next leader: it proposes no Dequeue, and the
// caller attached is told there is no leader. Fails if a keeper ends its
// waiter's wait on any answer but a grant (the close's answer proposes a
// Dequeue).
func TestDurableWaiterOutlivesItsLeadersClose(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	mustAcquire(t, s, "a", "holder", time.Hour)
	ch := askDurable(t, s, "a", "w", time.Minute, 1)
	s.Close()
	if a := receive(t, ch); !errors.Is(a.err, cluster.ErrNoLeader) {
		t.Fatalf("the waiter of a closed service: %+v", a)
	}
	poll(t, "the keeper to end", func() bool { return s.queued.Load() == 0 })
	if n, d := f.fsm.DurableCount(), countOf(f, entry.CmdDequeue); n != 1 || d != 0 {
		t.Fatalf("after the close: %d durable waiters, %d Dequeue entries; want it kept", n, d)
	}
}
