package coord

import (
	"errors"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// permitted is what a permit acquire in a goroutine answered.
type permitted struct {
	permit fsm.PermitResult
	err    error
}

func mustPermit(t *testing.T, s *Service, holder string, limit int) fsm.PermitResult {
	t.Helper()
	r, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: holder, Limit: limit, TTL: time.Second})
	if err != nil {
		t.Fatalf("permit for %s: %v", holder, err)
	}
	return r
}

// A released permit goes to the head waiter in the release's own entry; an
// expired one in the expiry's.
func TestPermitHandoffInOneEntry(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	a := mustPermit(t, s, "a", 2)
	mustPermit(t, s, "b", 2)
	if _, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: "c", Limit: 2, TTL: time.Second}); !errors.Is(err, refusal.ErrSemaphoreFull) {
		t.Fatalf("a third permit of 2: %v", err)
	}
	queued := make(chan permitted, 2)
	for _, h := range []string{"c", "d"} {
		go func() {
			r, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: h, Limit: 2, TTL: 10 * time.Second, Wait: time.Minute})
			queued <- permitted{permit: r, err: err}
		}()
		n := map[string]int{"c": 1, "d": 2}[h]
		poll(t, h+" queued", func() bool { return s.permitWaiters("s") == n })
	}
	if err := s.ReleasePermit(bg, "s", a.Permit.Token, a.Permit.Lease); err != nil {
		t.Fatal(err)
	}
	got := <-queued
	log := f.log()
	rel, ok := log[len(log)-1].(*entry.SemRelease)
	if got.err != nil || !ok || rel.Next == nil || got.permit.Permit.Holder != "c" || got.permit.Permit.Token != uint64(len(log)) {
		t.Fatalf("c got %+v (%v) after entry %#v: want the release's own entry", got.permit, got.err, log[len(log)-1])
	}
	clock.Advance(time.Second) // b's permit expires: d gets it in the expiry
	got = <-queued
	log = f.log()
	exp, ok := log[len(log)-1].(*entry.SemExpire)
	if got.err != nil || !ok || exp.Next == nil || got.permit.Permit.Holder != "d" || got.permit.Permit.Token != uint64(len(log)) {
		t.Fatalf("d got %+v (%v) after entry %#v: want the expiry's own entry", got.permit, got.err, log[len(log)-1])
	}
}

// An acquire whose limit differs from the held permits' is refused with
// no entry, even with room; once the semaphore is empty a new limit holds.
func TestPermitLimitMismatch(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	a := mustPermit(t, s, "a", 3)
	entries := len(f.log())
	_, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: "b", Limit: 2, TTL: time.Second, Wait: time.Minute})
	var le *refusal.LimitError
	if !errors.As(err, &le) || le.Limit != 3 || le.Asked != 2 {
		t.Fatalf("limit 2 while 3 is held: %v", err)
	}
	if len(f.log()) != entries {
		t.Fatal("a refused acquire wrote the log")
	}
	if err := s.ReleasePermit(bg, "s", a.Permit.Token, a.Permit.Lease); err != nil {
		t.Fatal(err)
	}
	if r := mustPermit(t, s, "b", 2); r.Permit.Limit != 2 {
		t.Fatalf("after the release: %+v", r)
	}
}

// A new leader restarts every permit's lease at full TTL.
func TestPermitLeasesRestartedOnPromotion(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	mustPermit(t, s, "a", 2)
	clock.Advance(900 * time.Millisecond)
	f.setLeader(false)
	poll(t, "demotion", func() bool { return s.timers.Len() == 0 })
	f.setLeader(true)
	waitReady(t, s)
	clock.Advance(999 * time.Millisecond)
	if len(f.fsm.Semaphore("s").Permits) != 1 {
		t.Fatal("a permit ended before a full TTL after the promotion")
	}
	clock.Advance(time.Millisecond)
	poll(t, "the expiry", func() bool { return len(f.fsm.Semaphore("s").Permits) == 0 })
}

// Permits count against MaxLocks with the held locks.
func TestPermitsCountAgainstMaxLocks(t *testing.T) {
	s, _, _ := newTestService(t, Config{MaxLocks: 2})
	mustAcquire(t, s, "l", "a", time.Second)
	mustPermit(t, s, "b", 5)
	if _, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: "c", Limit: 5, TTL: time.Second}); !errors.Is(err, ErrTooManyLocks) {
		t.Fatalf("a permit past MaxLocks: %v", err)
	}
}

// MaxLocksPerHolder counts a holder's permits with its locks, on one
// semaphore and across several (issue 26 F10: one holder got 6 permits on
// one semaphore and 6 across six with the limit at 5). Fails with
// checkGrants counting locks alone.
func TestPermitsCountAgainstMaxLocksPerHolder(t *testing.T) {
	s, _, _ := newTestService(t, Config{MaxLocksPerHolder: 3})
	mustAcquire(t, s, "l", "w", time.Minute)
	for _, sem := range []string{"one", "one"} {
		if _, err := s.AcquirePermit(bg, PermitRequest{Semaphore: sem, Holder: "w", Limit: 10, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sem := range []string{"one", "two"} {
		if _, err := s.AcquirePermit(bg, PermitRequest{Semaphore: sem, Holder: "w", Limit: 10, TTL: time.Minute}); !errors.Is(err, ErrTooManyLocks) {
			t.Fatalf("a fourth grant for w on %s with the per-holder limit at 3: %v", sem, err)
		}
	}
	if _, err := s.Acquire(bg, AcquireRequest{Lock: "l2", Holder: "w", TTL: time.Minute}); !errors.Is(err, ErrTooManyLocks) {
		t.Fatalf("a lock for w holding a lock and two permits, limit 3: %v", err)
	}
	if _, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "two", Holder: "other", Limit: 10, TTL: time.Minute}); err != nil {
		t.Fatalf("another holder: %v", err)
	}
}

// A permit waiter whose wait ends as a permit comes free elsewhere gets it,
// rather than being told the semaphore is full with a permit free.
func TestPermitWaiterTakesAPermitFreedAsItsWaitEnds(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	a := mustPermit(t, s, "a", 1)
	done := make(chan permitted, 1)
	go func() {
		r, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: "b", Limit: 1, TTL: 10 * time.Second, Wait: 5 * time.Second})
		done <- permitted{permit: r, err: err}
	}()
	poll(t, "b queued", func() bool { return s.permitWaiters("s") == 1 })
	if _, err := f.Apply(&entry.SemRelease{Semaphore: "s", Token: a.Permit.Token, Lease: a.Permit.Lease}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	select {
	case got := <-done:
		if got.err != nil || got.permit.Permit.Holder != "b" {
			t.Fatalf("permit waiter whose wait ended with a permit free: %+v, %v; want a permit for b", got.permit, got.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
}

func permitDelayed(s *Service, holder string, ttl, delay, wait time.Duration) (fsm.PermitResult, error) {
	return s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: holder, Limit: 2, TTL: ttl, LockDelay: delay, Wait: wait})
}

// A permit with a lock-delay that expires keeps its slot from everybody for
// the delay: a new acquire is refused with the time left, a waiter waits
// through it and gets the slot in the entry that ends the delay; the other
// slot stays usable. GET shows the delay.
func TestPermitDelayAfterExpiry(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	a, err := permitDelayed(s, "a", time.Second, 5*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second) // a expires: its slot's delay starts
	poll(t, "the expiry", func() bool { return len(f.fsm.Semaphore("s").Delays) == 1 })
	exp, ok := f.log()[len(f.log())-1].(*entry.SemExpire)
	if !ok || exp.Token != a.Permit.Token || exp.Next != nil {
		t.Fatalf("last entry %#v: want a's expiry, handing to nobody", f.log()[len(f.log())-1])
	}
	b, err := permitDelayed(s, "b", time.Minute, 0, 0) // the other slot is free
	if err != nil {
		t.Fatal(err)
	}
	_, err = permitDelayed(s, "c", time.Second, 0, 0)
	var de *DelayedError
	if !errors.Is(err, refusal.ErrLockDelay) || !errors.As(err, &de) || de.Semaphore != "s" || de.Remaining != 5*time.Second {
		t.Fatalf("acquire while the only free slot is delayed: %v, want lock_delay with 5s left", err)
	}
	st, err := s.Semaphore(bg, "s", false)
	if err != nil || len(st.Delays) != 1 || st.Delays[0].Remaining != 5*time.Second || len(st.Holders) != 1 || st.Limit != 2 {
		t.Fatalf("status during the delay: %+v (%v)", st, err)
	}
	queued := make(chan permitted, 1)
	go func() {
		r, err := permitDelayed(s, "c", 10*time.Second, 0, time.Minute)
		queued <- permitted{permit: r, err: err}
	}()
	poll(t, "c queued", func() bool { return s.permitWaiters("s") == 1 })
	clock.Advance(4999 * time.Millisecond)
	select {
	case r := <-queued:
		t.Fatalf("c got %+v (%v) before the delay ended", r.permit, r.err)
	default:
	}
	clock.Advance(time.Millisecond)
	c := <-queued
	end, ok := f.log()[len(f.log())-1].(*entry.EndDelay)
	if c.err != nil || !ok || end.Semaphore != "s" || end.NextPermit == nil || c.permit.Permit.Token != uint64(len(f.log())) {
		t.Fatalf("c got %+v (%v) after %#v: want the slot in the delay's end", c.permit, c.err, f.log()[len(f.log())-1])
	}
	if st := f.fsm.Semaphore("s"); len(st.Delays) != 0 || len(st.Permits) != 2 || st.Permits[0].Token != b.Permit.Token {
		t.Fatalf("after the delay: %+v", st)
	}
}

// A released permit starts no delay, whatever it asked for.
func TestPermitDelayNotAfterRelease(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	a, err := permitDelayed(s, "a", time.Second, 5*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustPermit(t, s, "b", 2)
	if err := s.ReleasePermit(bg, "s", a.Permit.Token, a.Permit.Lease); err != nil {
		t.Fatal(err)
	}
	if st := f.fsm.Semaphore("s"); len(st.Delays) != 0 {
		t.Fatalf("a release started a delay: %+v", st.Delays)
	}
	mustPermit(t, s, "c", 2)
}

// A new leader restarts a slot's delay at full length: it may last longer
// across a failover, never shorter.
func TestPermitDelayRestartedOnPromotion(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	if _, err := permitDelayed(s, "b", time.Minute, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := permitDelayed(s, "a", time.Second, 5*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	poll(t, "the expiry", func() bool { return len(f.fsm.Semaphore("s").Delays) == 1 })
	clock.Advance(4 * time.Second) // the delay is nearly over
	f.setLeader(false)
	poll(t, "demotion", func() bool { return s.timers.Len() == 0 })
	f.setLeader(true)
	waitReady(t, s)
	if st, err := s.Semaphore(bg, "s", false); err != nil || len(st.Delays) != 1 || st.Delays[0].Remaining != 5*time.Second {
		t.Fatalf("after the promotion: %+v (%v), want the delay restarted at its full 5s", st.Delays, err)
	}
	clock.Advance(4999 * time.Millisecond)
	if _, err := permitDelayed(s, "c", time.Second, 0, 0); !errors.Is(err, refusal.ErrLockDelay) {
		t.Fatalf("acquire before a full delay after the promotion: %v", err)
	}
	clock.Advance(time.Millisecond)
	poll(t, "the end of the delay", func() bool { return len(f.fsm.Semaphore("s").Delays) == 0 })
	if _, err := permitDelayed(s, "c", time.Second, 0, 0); err != nil {
		t.Fatalf("acquire after the delay: %v", err)
	}
}

// A semaphore's status, and the list, do not wait for a proposal in flight
// on its name: the name's queue mutex is held across proposals, and on a
// leader whose disk stalled a read that took it would wait for good.
func TestSemaphoreStatusDoesNotWaitForAProposal(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	mustPermit(t, s, "a", 2)
	entered, release := make(chan struct{}), make(chan struct{})
	f.mu.Lock()
	f.hook = func(cmd entry.Command) (bool, error) {
		if _, ok := cmd.(*entry.SemAcquire); ok {
			close(entered)
			<-release
		}
		return true, nil
	}
	f.mu.Unlock()
	acquired := make(chan error, 1)
	go func() {
		_, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: "b", Limit: 2, TTL: time.Second})
		acquired <- err
	}()
	<-entered // b's proposal holds the queue of "s" now
	read := make(chan int, 2)
	go func() {
		st, _ := s.Semaphore(bg, "s", true)
		read <- len(st.Holders)
		all, _ := s.Semaphores(bg, true)
		read <- len(all)
	}()
	for _, what := range []string{"status", "list"} {
		select {
		case n := <-read:
			if n != 1 {
				t.Errorf("%s: %d; want 1 (a's permit, b's not yet committed)", what, n)
			}
		case <-time.After(5 * time.Second):
			close(release)
			t.Fatalf("the semaphore's %s waited for a proposal in flight", what)
		}
	}
	close(release)
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
}
