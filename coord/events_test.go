package coord

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm"
)

// describe renders events one per line, for comparing sequences.
func describe(events []fsm.Event) string {
	var b strings.Builder
	for _, e := range events {
		switch e.Type {
		case fsm.EventHandedOff:
			fmt.Fprintf(&b, "%d %s %s %s:%d->%s:%d (%s)\n", e.Index, e.Type, e.Lock, e.PrevHolder, e.PrevToken, e.Holder, e.Token, e.Reason)
		case fsm.EventPut:
			fmt.Fprintf(&b, "%d %s %s %d %dB\n", e.Index, e.Type, e.Key, e.Token, e.ValueSize)
		default:
			fmt.Fprintf(&b, "%d %s %s %s %d\n", e.Index, e.Type, e.Lock, e.Holder, e.Token)
		}
	}
	return b.String()
}

// drain reads what a watcher has now: its backlog and whatever its channel
// holds.
func drain(w *events.Watcher) []fsm.Event {
	out := w.Backlog()
	for {
		select {
		case evs := <-w.C():
			out = append(out, evs...)
		default:
			return out
		}
	}
}

func TestEventsOfALockCycle(t *testing.T) {
	s, _, clock := newTestService(t, Config{})
	live, err := s.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
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
	defer from.Close()
	if got, want := describe(drain(from)), strings.SplitN(want, "\n", 3)[2]; got != want {
		t.Fatalf("since %d: got\n%swant\n%s", b.Token, got, want)
	}
}

func TestEventsCompactedAndLagged(t *testing.T) {
	f := newFakeRaft()
	ev := events.New(events.Config{History: 5, Buffer: 2})
	f.fsm.Observe(ev)
	s, _, _ := newTestServiceOver(t, f, Config{Events: ev})
	slow, err := s.Watch(-1)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
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
	w.Close()

	select {
	case <-slow.Lagged():
	default:
		t.Fatal("a watcher that read nothing of 20 entries with a buffer of 2 was not cut off")
	}
	if got := drain(slow); len(got) != 2 {
		t.Fatalf("the lagged watcher's buffer held %s", describe(got))
	}
}
