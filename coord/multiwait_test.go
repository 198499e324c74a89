package coord

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

type multiAcquired struct {
	res fsm.MultiResult
	err error
}

// enqueueMulti starts a multi-acquire that waits up to wait, and returns
// once the service holds queued waiters in all (its own among them).
func enqueueMulti(t *testing.T, s *Service, holder string, wait time.Duration, queued int64, names ...string) <-chan multiAcquired {
	t.Helper()
	out := make(chan multiAcquired, 1)
	go func() {
		res, err := s.MultiAcquire(bg, MultiAcquireRequest{Names: names, Holder: holder, TTL: time.Minute, Wait: wait})
		out <- multiAcquired{res, err}
	}()
	poll(t, holder+" queued", func() bool { return s.queued.Load() == queued })
	return out
}

func receiveMulti(t *testing.T, ch <-chan multiAcquired) multiAcquired {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to a queued multi-acquire")
		return multiAcquired{}
	}
}

// quietMulti reports that no multi-acquire's answer has arrived.
func quietMulti(t *testing.T, ch <-chan multiAcquired) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("a waiting multi-acquire answered early: %+v %v", a.res, a.err)
	default:
	}
}

// granted checks that r is one multi-grant of names whose token is the
// entry right after the one at index before-1, every name held with it.
func grantedAt(t *testing.T, f *fakeRaft, r multiAcquired, index int, names ...string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("multi-acquire of %v: %v", names, r.err)
	}
	log := f.log()
	if m, ok := log[index].(*entry.MultiAcquire); !ok || !slices.Equal(m.Names, names) {
		t.Fatalf("entry %d is %#v, want the multi-acquire of %v", index, log[index], names)
	}
	for _, n := range names {
		if l, _ := f.fsm.Lock(n); l.Token != r.res.Grant.Token || l.Holder != r.res.Grant.Holder {
			t.Fatalf("%s held by %s with %d, want the multi-grant %d", n, l.Holder, l.Token, r.res.Grant.Token)
		}
	}
}

// Two multi-acquires over the same names asked in crossing orders never
// wait on each other: the first queued collects each name as it frees and
// is granted, all names in one entry right after the release of the last
// (no other entry between), and the second only once that grant ends.
func TestMultiWaitersOverCrossingNamesNeverDeadlock(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	hx := mustAcquire(t, s, "x", "hx", time.Minute)
	hy := mustAcquire(t, s, "y", "hy", time.Minute)
	a := enqueueMulti(t, s, "A", time.Minute, 2, "x", "y")
	b := enqueueMulti(t, s, "B", time.Minute, 4, "y", "x")
	if err := s.Release(bg, "x", hx.Token, hx.Lease); err != nil {
		t.Fatal(err)
	}
	if isHeld(f, "x") || s.Waiters("x") != 2 {
		l, _ := f.fsm.Lock("x")
		t.Fatalf("x freed for A should stay free and kept, both waiters queued: %+v %d", l, s.Waiters("x"))
	}
	if _, err := s.Acquire(bg, AcquireRequest{Lock: "x", Holder: "c", TTL: time.Second}); !errors.Is(err, refusal.ErrLockHeld) {
		t.Fatalf("an acquire of x kept for A: %v", err)
	}
	quietMulti(t, a)
	before := len(f.log())
	if err := s.Release(bg, "y", hy.Token, hy.Lease); err != nil {
		t.Fatal(err)
	}
	ga := receiveMulti(t, a)
	grantedAt(t, f, ga, before+1, "x", "y")
	if ga.res.Grant.Token != uint64(before+2) { // the fake log's index is its position plus one
		t.Fatalf("A's token %d, want the entry after y's release", ga.res.Grant.Token)
	}
	quietMulti(t, b)
	before = len(f.log())
	if _, err := s.ReleaseMulti(bg, ga.res.Grant.Token, ga.res.Grant.Lease); err != nil {
		t.Fatal(err)
	}
	gb := receiveMulti(t, b)
	grantedAt(t, f, gb, before+1, "y", "x")
	if s.queued.Load() != 0 {
		t.Fatalf("%d waiters left", s.queued.Load())
	}
}

// A multi-waiter whose wait ends leaves every queue, is answered as an
// acquire without a wait (the held name's refusal), and the name it kept
// goes to the single waiter queued behind it, in the entry right after.
func TestMultiWaiterGivesUpAndServesWhatItKept(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	mustAcquire(t, s, "y", "hy", time.Minute)
	a := enqueueMulti(t, s, "A", 5*time.Second, 2, "x", "y")
	c := enqueue(t, s, "x", "c", time.Minute, 2)
	if isHeld(f, "x") {
		t.Fatal("x went to the waiter behind the multi-waiter that keeps it")
	}
	before := len(f.log())
	clock.Advance(5 * time.Second)
	var held *refusal.HeldError
	if got := receiveMulti(t, a); !errors.As(got.err, &held) || held.Lock != "y" {
		t.Fatalf("multi-waiter at the end of its wait: %v", got.err)
	}
	gc := receive(t, c)
	if gc.err != nil || gc.res.Grant.Token != uint64(before+1) {
		t.Fatalf("the waiter behind it: %+v %v, want the next entry's grant", gc.res.Grant, gc.err)
	}
	if s.queued.Load() != 0 {
		t.Fatalf("%d waiters left", s.queued.Load())
	}
}

// FIFO both ways on one name: a single waiter ahead of a multi-waiter is
// served first (in the freeing entry), one behind it only after the
// multi-grant ends.
func TestSingleAndMultiWaitersKeepTheirOrder(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	h := mustAcquire(t, s, "x", "h", time.Minute)
	first := enqueue(t, s, "x", "first", time.Minute, 1)
	m := enqueueMulti(t, s, "M", time.Minute, 3, "x", "y") // y free: M heads it
	last := enqueue(t, s, "x", "last", time.Minute, 3)
	if err := s.Release(bg, "x", h.Token, h.Lease); err != nil {
		t.Fatal(err)
	}
	g1 := receive(t, first)
	if g1.err != nil {
		t.Fatal(g1.err)
	}
	quietMulti(t, m)
	before := len(f.log())
	if err := s.Release(bg, "x", g1.res.Grant.Token, g1.res.Grant.Lease); err != nil {
		t.Fatal(err)
	}
	gm := receiveMulti(t, m)
	grantedAt(t, f, gm, before+1, "x", "y")
	if _, err := s.ReleaseMulti(bg, gm.res.Grant.Token, gm.res.Grant.Lease); err != nil {
		t.Fatal(err)
	}
	if gl := receive(t, last); gl.err != nil || gl.res.Grant.Holder != "last" {
		t.Fatalf("the waiter behind the multi-waiter: %v", gl.err)
	}
}

// Leadership loss answers a multi-waiter once and leaves no waiter of it
// in any queue.
func TestMultiWaiterAnsweredOnceOnDemotion(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	mustAcquire(t, s, "x", "h", time.Minute)
	mustAcquire(t, s, "z", "h", time.Minute)
	a := enqueueMulti(t, s, "A", time.Minute, 3, "x", "y", "z")
	f.setLeader(false)
	if got := receiveMulti(t, a); !errors.Is(got.err, cluster.ErrNotLeader) {
		t.Fatalf("multi-waiter after demotion: %v", got.err)
	}
	poll(t, "no waiter left", func() bool { return s.queued.Load() == 0 })
}

// A waiting multi-acquire does not pass a single waiter left queued on a
// free name by a leader answered outcome_unknown for the release that
// freed it (it believes nothing was freed): the single waiter's acquire is
// proposed first (refused here: the lost entry had granted its request,
// since ended), then the multi-acquire's.
func TestMultiWaiterQueuesBehindAStrandedWaiter(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	h := mustAcquire(t, s, "x", "h", time.Minute)
	w := enqueue(t, s, "x", "w", time.Minute, 1)
	f.mu.Lock()
	f.hook = func(entry.Command) (bool, error) { return true, cluster.ErrOutcomeUnknown } // committed, answer lost
	f.mu.Unlock()
	if err := s.Release(bg, "x", h.Token, h.Lease); !errors.Is(err, cluster.ErrOutcomeUnknown) {
		t.Fatalf("release: %v", err)
	}
	f.mu.Lock()
	f.hook = nil
	f.mu.Unlock()
	// The release handed x to w in its entry, which the leader did not
	// learn: w is back at the head. That grant ends, leaving x free with w
	// still queued.
	l, _ := f.fsm.Lock("x")
	if _, err := f.Apply(&entry.Release{Lock: "x", Token: l.Token, Lease: l.Lease}); err != nil || isHeld(f, "x") || s.Waiters("x") != 1 {
		t.Fatalf("x not free with w queued: %v", err)
	}
	before := len(f.log())
	m := make(chan multiAcquired, 1)
	go func() {
		res, err := s.MultiAcquire(bg, MultiAcquireRequest{Names: []string{"x", "y"}, Holder: "M", TTL: time.Minute, Wait: time.Minute})
		m <- multiAcquired{res, err}
	}()
	if gw := receive(t, w); !errors.Is(gw.err, refusal.ErrLeaseLost) {
		t.Fatalf("the stranded waiter: %+v %v", gw.res.Grant, gw.err)
	}
	gm := receiveMulti(t, m)
	log := f.log()[before:]
	if a, ok := log[0].(*entry.Acquire); !ok || a.Holder != "w" {
		t.Fatalf("first entry after the stranding %#v, want w's acquire", log[0])
	}
	grantedAt(t, f, gm, before+1, "x", "y")
}
