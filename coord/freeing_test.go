package coord

import (
	"slices"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// holdNamesWithin runs holdNames, failing the test if it does not return:
// a name listed twice must be held once, not wait for itself.
func holdNamesWithin(t *testing.T, s *Service, names []GrantName) ([]GrantName, []Freeing) {
	t.Helper()
	type held struct {
		names []GrantName
		holds []Freeing
	}
	done := make(chan held, 1)
	go func() {
		n, h := s.holdNames(names)
		done <- held{n, h}
	}()
	select {
	case h := <-done:
		return h.names, h.holds
	case <-time.After(5 * time.Second):
		t.Fatal("holdNames did not return: a queue waits for its own holder")
		return nil, nil
	}
}

// What a session's end will do: hold every name it frees, in one order
// (kind, then name; a semaphore with two of its permits held once), pop
// each freed grant's head waiter, propose, and hand each waiter the grant
// the freeing entry gave it, then serve the rest. (Each grant is freed in
// an entry of its own here, as no command frees several yet; the steps
// under the queues are the same.)
func TestHoldNamesHandsEachFreedNameOver(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	a := mustAcquire(t, s, "a", "h", time.Minute)
	b := mustAcquire(t, s, "b", "h", time.Minute)
	p1, p2 := mustPermit(t, s, "h", 2), mustPermit(t, s, "h", 2)
	wa := enqueue(t, s, "a", "wa", time.Minute, 1)
	wb := enqueue(t, s, "b", "wb", time.Minute, 1)
	permits := make(chan permitted, 2)
	for i, h := range []string{"c", "d"} {
		go func() {
			r, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: h, Limit: 2, TTL: time.Minute, Wait: time.Minute})
			permits <- permitted{r, err}
		}()
		poll(t, h+" queued", func() bool { return s.permitWaiters("s") == i+1 })
	}

	names, holds := holdNamesWithin(t, s, []GrantName{{fsm.KindSemaphore, "s"}, {fsm.KindLock, "b"}, {fsm.KindSemaphore, "s"}, {fsm.KindLock, "a"}})
	want := []GrantName{{fsm.KindLock, "a"}, {fsm.KindLock, "b"}, {fsm.KindSemaphore, "s"}}
	if !slices.Equal(names, want) {
		t.Fatalf("held %v, want %v", names, want)
	}
	apply := func(h Freeing, token uint64, cmd entry.Command) {
		res, err := s.raft.Apply(cmd)
		if err != nil {
			t.Fatal(err)
		}
		h.Done(res, token)
	}
	for i, lk := range []entry.Lock{a, b} {
		holds[i].Frees(lk.Token)
		next, _ := holds[i].Next(true).(*entry.Acquire)
		apply(holds[i], lk.Token, &entry.Release{Lock: lk.Name, Token: lk.Token, Lease: lk.Lease, Next: next})
	}
	nexts := []*entry.SemAcquire{}
	holds[2].Frees(p1.Permit.Token)
	holds[2].Frees(p2.Permit.Token)
	for range 2 {
		next, _ := holds[2].Next(true).(*entry.SemAcquire)
		nexts = append(nexts, next)
	}
	for i, p := range []fsm.PermitResult{p1, p2} {
		apply(holds[2], p.Permit.Token, &entry.SemRelease{Semaphore: "s", Token: p.Permit.Token, Lease: p.Permit.Lease, Next: nexts[i]})
	}
	for _, h := range holds {
		h.Release()
	}

	log := f.log()
	first := len(log) - 3 // index of a's release (indexes start at 1)
	for i, w := range []<-chan acquired{wa, wb} {
		got := receive(t, w)
		if got.err != nil || got.res.Grant.Token != uint64(first+i) {
			t.Fatalf("lock waiter %d got %+v, %v: want the grant of entry %d, the release", i, got.res.Grant, got.err, first+i)
		}
	}
	for i := range 2 {
		var got permitted
		select {
		case got = <-permits:
		case <-time.After(5 * time.Second):
			t.Fatalf("permit waiter %d not answered", i)
		}
		at := map[string]uint64{"c": uint64(first + 2), "d": uint64(first + 3)}[got.permit.Permit.Holder]
		if got.err != nil || got.permit.Permit.Token != at {
			t.Fatalf("permit waiter got %+v, %v: want the grant of entry %d, the release of its turn", got.permit, got.err, at)
		}
	}
	for _, cmd := range f.log()[first-1:] {
		if _, ok := cmd.(*entry.Acquire); ok {
			t.Fatalf("an acquire entry followed the freeing entries: %#v", cmd)
		}
	}
	if s.timers.Len() != 4 || s.Waiters("a") != 0 || s.permitWaiters("s") != 0 {
		t.Fatalf("%d timed (want the 4 new grants), %d and %d waiting", s.timers.Len(), s.Waiters("a"), s.permitWaiters("s"))
	}
}

// A freeing entry that was not written puts each popped waiter back at the
// head of its queue: it keeps its turn and is served by the next release.
func TestHoldNamesPutsWaitersBackOnFailure(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	a := mustAcquire(t, s, "a", "h", time.Minute)
	first := enqueue(t, s, "a", "first", time.Minute, 1)
	enqueue(t, s, "a", "second", time.Minute, 2)
	_, holds := holdNamesWithin(t, s, []GrantName{{fsm.KindLock, "a"}})
	holds[0].Frees(a.Token)
	if next, _ := holds[0].Next(true).(*entry.Acquire); next == nil || next.Holder != "first" {
		t.Fatalf("popped %+v, want first's acquire", next)
	}
	entries := len(f.log())
	holds[0].Failed()
	holds[0].Release()
	if n := s.Waiters("a"); n != 2 || len(f.log()) != entries {
		t.Fatalf("%d waiting and %d entries after a failed entry, want 2 and %d", n, len(f.log()), entries)
	}
	if err := s.Release(bg, "a", a.Token, a.Lease); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, first); got.err != nil || got.res.Grant.Holder != "first" {
		t.Fatalf("after the put back, the release gave %+v, %v: want first's grant", got.res.Grant, got.err)
	}
}
