package coord

import (
	"errors"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

func acquireDelayed(s *Service, lock, holder string, ttl, delay time.Duration) (entry.Lock, error) {
	res, err := s.Acquire(bg, AcquireRequest{Lock: lock, Holder: holder, TTL: ttl, LockDelay: delay})
	return res.Grant, err
}

// A grant with a lock-delay that expires keeps the lock from everybody for
// the delay: acquires are refused with the time left and write nothing, a
// waiter waits through it and gets the lock in the entry that ends it.
func TestLockDelayAfterExpiry(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	if _, err := acquireDelayed(s, "l", "a", time.Second, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	c := enqueue(t, s, "l", "c", time.Minute, 1) // queued before the expiry
	clock.Advance(time.Second)
	poll(t, "the expiry", func() bool { return !isHeld(f, "l") })
	if exp, ok := f.log()[len(f.log())-1].(*entry.Expire); !ok || exp.Next != nil {
		t.Fatalf("last entry %#v: want an expire handing off to nobody", f.log()[len(f.log())-1])
	}
	clock.Advance(2 * time.Second)
	entries := len(f.log())
	_, err := acquireDelayed(s, "l", "b", time.Second, 0)
	var de *DelayedError
	if !errors.As(err, &de) || !errors.Is(err, refusal.ErrLockDelay) || de.Remaining != 3*time.Second {
		t.Fatalf("acquire during the delay: %v, want lock_delay with 3s left", err)
	}
	if len(f.log()) != entries {
		t.Fatal("a refused acquire wrote the log")
	}
	if left, ok := s.DelayRemaining("l"); !ok || left != 3*time.Second {
		t.Fatalf("delay remaining %v %v", left, ok)
	}
	if s.Waiters("l") != 1 {
		t.Fatal("the waiter left the queue during the delay")
	}
	clock.Advance(2999 * time.Millisecond)
	if len(f.log()) != entries || isHeld(f, "l") {
		t.Fatal("the delay ended early")
	}
	clock.Advance(time.Millisecond)
	got := receive(t, c)
	if got.err != nil {
		t.Fatal(got.err)
	}
	log := f.log()
	end, ok := log[len(log)-1].(*entry.EndDelay)
	if !ok || end.Next == nil || got.res.Grant.Token != uint64(len(log)) || got.res.Grant.Holder != "c" {
		t.Fatalf("last entry %#v, c's grant %+v: want c granted by the entry that ends the delay", log[len(log)-1], got.res.Grant)
	}
}

// A release starts no delay, even of a grant that asked for one.
func TestLockDelayNotAfterRelease(t *testing.T) {
	s, _, _ := newTestService(t, Config{})
	g, err := acquireDelayed(s, "l", "a", time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(bg, "l", g.Token, g.Lease); err != nil {
		t.Fatal(err)
	}
	if _, err := acquireDelayed(s, "l", "b", time.Second, 0); err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
}

// A new leader restarts a running delay at its full length: it may last
// longer across a failover, never shorter.
func TestLockDelayRestartedOnPromotion(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	if _, err := acquireDelayed(s, "l", "a", time.Second, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	poll(t, "the expiry", func() bool { _, ok := f.fsm.Delay("l"); return ok })
	clock.Advance(4 * time.Second) // the delay is nearly over
	f.setLeader(false)
	poll(t, "demotion", func() bool { return s.timers.Len() == 0 })
	f.setLeader(true)
	waitReady(t, s)
	clock.Advance(4999 * time.Millisecond)
	if _, err := acquireDelayed(s, "l", "b", time.Second, 0); !errors.Is(err, refusal.ErrLockDelay) {
		t.Fatalf("acquire before a full delay after the promotion: %v", err)
	}
	clock.Advance(time.Millisecond)
	poll(t, "the end of the delay", func() bool { _, ok := f.fsm.Delay("l"); return !ok })
	if _, err := acquireDelayed(s, "l", "b", time.Second, 0); err != nil {
		t.Fatalf("acquire after the delay: %v", err)
	}
}

// An election's leader publishes a value with its grant and changes it
// with one log write; the token stays; a deposed leader cannot.
func TestProclaim(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	res, err := s.Acquire(bg, AcquireRequest{Lock: "leader", Holder: "n1", TTL: time.Second, Value: "a:1"})
	if err != nil || res.Grant.Value != "a:1" {
		t.Fatalf("campaign: %+v %v", res, err)
	}
	g := res.Grant
	entries := len(f.log())
	l, err := s.Proclaim(bg, "leader", g.Token, g.Lease, "a:2")
	if err != nil || l.Token != g.Token || l.Value != "a:2" || len(f.log()) != entries+1 {
		t.Fatalf("proclaim: %+v %v", l, err)
	}
	if st, _ := s.Lock(bg, "leader", false); st.Value != "a:2" {
		t.Fatalf("status %+v", st)
	}
	clock.Advance(time.Second)
	poll(t, "the expiry", func() bool { return !isHeld(f, "leader") })
	if _, err := s.Proclaim(bg, "leader", g.Token, g.Lease, "a:3"); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("a deposed leader's proclaim: %v", err)
	}
}

// A waiter whose wait ends during a lock-delay is answered lock_delay only
// after a quorum round: a leader deposed without knowing it (paused past its
// term) must not say the lock is delayed, since its successor may have
// ended the delay and granted the lock by then.
func TestLapsedWaiterInDelayConfirmsLeadership(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	if _, err := acquireDelayed(s, "l", "a", time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	c := enqueue(t, s, "l", "c", 3*time.Second, 1)
	clock.Advance(time.Second)
	poll(t, "the expiry", func() bool { return !isHeld(f, "l") })
	f.mu.Lock()
	f.leader = false // deposed, and this node has not noticed yet
	f.mu.Unlock()
	clock.Advance(2 * time.Second) // c's wait ends, in the delay
	got := receive(t, c)
	if errors.Is(got.err, refusal.ErrLockDelay) || !errors.Is(got.err, cluster.ErrNotLeader) {
		t.Fatalf("a deposed leader answered the lapsed waiter %v, want not-leader", got.err)
	}
}
