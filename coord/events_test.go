package coord

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm/event"
)

// describe renders events one per line, for comparing sequences.
func describe(events []event.Event) string {
	var b strings.Builder
	for _, e := range events {
		switch e.Type {
		case event.HandedOff:
			fmt.Fprintf(&b, "%d %s %s %s:%d->%s:%d (%s)\n", e.Index, e.Type, e.Lock, e.PrevHolder, e.PrevToken, e.Holder, e.Token, e.Reason)
		case event.PermitHandedOff:
			fmt.Fprintf(&b, "%d %s %s %s:%d->%s:%d (%s) %d/%d\n", e.Index, e.Type, e.Semaphore, e.PrevHolder, e.PrevToken, e.Holder, e.Token, e.Reason, e.Held, e.Limit)
		case event.PermitAcquired, event.PermitReleased, event.PermitExpired:
			fmt.Fprintf(&b, "%d %s %s %s %d %d/%d\n", e.Index, e.Type, e.Semaphore, e.Holder, e.Token, e.Held, e.Limit)
		case event.Put:
			fmt.Fprintf(&b, "%d %s %s %d %dB\n", e.Index, e.Type, e.Key, e.Token, e.ValueSize)
		default:
			fmt.Fprintf(&b, "%d %s %s %s %d\n", e.Index, e.Type, e.Lock, e.Holder, e.Token)
		}
	}
	return b.String()
}

// drain reads what a watcher has to read now.
func drain(w *events.Watcher) []event.Event {
	var out []event.Event
	for {
		batch, more, err := w.Next(make([]event.Event, 0, 8))
		if err != nil || more != nil {
			return out
		}
		out = append(out, batch...)
	}
}

func TestEventsOfALockCycle(t *testing.T) {
	s, _, clock := newTestService(t, Config{})
	live, err := s.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	a := mustAcquire(t, s, "a", "h1", 10*time.Second)
	waiter := enqueue(t, s, "a", "h2", time.Minute, 1)
	if err := s.Release(bg, "a", a.Token, a.Lease); err != nil {
		t.Fatal(err)
	}
	b := receive(t, waiter).res.Grant
	if _, err := s.Put(bg, PutRequest{Key: "k", Value: []byte("xyz"), Token: b.Token, Lock: "a"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(11 * time.Second) // b expires
	poll(t, "expiry", func() bool { _, held := s.fsm.Lock("a"); return !held })
	c := mustAcquire(t, s, "a", "h3", 10*time.Second)
	if err := s.Release(bg, "a", c.Token, c.Lease); err != nil {
		t.Fatal(err)
	}

	want := fmt.Sprintf("%[1]d acquired a h1 %[1]d\n%[2]d handed_off a h1:%[1]d->h2:%[2]d (released)\n%[3]d put k %[2]d 3B\n%[4]d expired a h2 %[2]d\n%[5]d acquired a h3 %[5]d\n%[6]d released a h3 %[5]d\n",
		a.Token, b.Token, b.Token+1, b.Token+2, c.Token, c.Token+1)
	got := describe(drain(live))
	if got != want {
		t.Fatalf("live watcher saw\n%swant\n%s", got, want)
	}
	// A watch from any index delivers exactly what came after it.
	from, err := s.Watch(int64(b.Token))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describe(drain(from)), strings.SplitN(want, "\n", 3)[2]; got != want {
		t.Fatalf("since %d: got\n%swant\n%s", b.Token, got, want)
	}
}

// Every permit's grant, release, expiry and handoff is an event naming the
// semaphore, with its limit and the permits held after the entry.
func TestEventsOfPermits(t *testing.T) {
	s, _, clock := newTestService(t, Config{})
	live, err := s.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	a := mustPermit(t, s, "a", 2)
	b := mustPermit(t, s, "b", 2)
	queued := make(chan permitted, 1)
	go func() {
		r, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: "c", Limit: 2, TTL: 10 * time.Second, Wait: time.Minute})
		queued <- permitted{permit: r, err: err}
	}()
	poll(t, "c queued", func() bool { return s.permitWaiters("s") == 1 })
	clock.Advance(time.Second) // a and b expire: c gets a's permit in its expiry
	c := <-queued
	if c.err != nil {
		t.Fatal(c.err)
	}
	poll(t, "both expiries", func() bool { return len(s.fsm.Semaphore("s").Permits) == 1 })
	if err := s.ReleasePermit(bg, "s", c.permit.Permit.Token, c.permit.Permit.Lease); err != nil {
		t.Fatal(err)
	}
	got := describe(drain(live))
	// The expiries' order is the timers'; c follows the first.
	first, second := a.Permit, b.Permit
	if !strings.Contains(got, fmt.Sprintf("handed_off s a:%d", a.Permit.Token)) {
		first, second = b.Permit, a.Permit
	}
	want := fmt.Sprintf("%d permit_acquired s a %d 1/2\n%d permit_acquired s b %d 2/2\n"+
		"%d permit_handed_off s %s:%d->c:%d (expired) 2/2\n%d permit_expired s %s %d 1/2\n%d permit_released s c %d 0/2\n",
		a.Permit.Token, a.Permit.Token, b.Permit.Token, b.Permit.Token,
		c.permit.Permit.Token, first.Holder, first.Token, c.permit.Permit.Token,
		c.permit.Permit.Token+1, second.Holder, second.Token,
		c.permit.Permit.Token+2, c.permit.Permit.Token)
	if got != want {
		t.Fatalf("live watcher saw\n%swant\n%s", got, want)
	}
}

func TestEventsCompactedAndLagged(t *testing.T) {
	f := newFakeRaft()
	ev := events.New(events.Config{History: 5, Lag: 2})
	f.fsm.Observe(ev)
	s, _, _ := newTestServiceOver(t, f, Config{Events: ev})
	slow, err := s.Watch(-1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		g := mustAcquire(t, s, fmt.Sprintf("l%d", i), "h", time.Minute)
		if err := s.Release(bg, g.Name, g.Token, g.Lease); err != nil {
			t.Fatal(err)
		}
	}
	last := s.fsm.AppliedIndex()
	_, err = s.Watch(int64(last - 6))
	var compacted *events.CompactedError
	if !errors.As(err, &compacted) || !errors.Is(err, events.ErrCompacted) || compacted.Oldest != last-5 || compacted.Index != last {
		t.Fatalf("watch since %d with 5 entries kept up to %d: %v", last-6, last, err)
	}
	w, err := s.Watch(int64(last - 5))
	if err != nil {
		t.Fatalf("watch at the oldest kept index: %v", err)
	}
	if got := drain(w); len(got) != 5 || got[0].Index != last-4 {
		t.Fatalf("since %d: %s", last-5, describe(got))
	}

	start := slow.Resume()
	if _, _, err := slow.Next(make([]event.Event, 0, 8)); !errors.Is(err, events.ErrLagged) || slow.Resume() != start {
		t.Fatalf("a watcher that read nothing of 20 entries, 5 kept and a lag of 2: %v, resume from %d (it began at %d)", err, slow.Resume(), start)
	}
}
