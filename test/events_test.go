package test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm/event"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Every member emits the same events with the same indexes, because events
// come from applied entries only: after a workload across a leader kill and
// the old leader's restart, each member's history over the range all of
// them still keep is identical, and holds every grant the workload got.
func TestEventsIdenticalOnEveryMember(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	var tokens []uint64
	work := func(n *tc.Node, round string) {
		for i := range 4 {
			g := mustAcquire(t, n, fmt.Sprintf("ev-%s-%d", round, i%2), "w"+round)
			tokens = append(tokens, g.Token)
			if status, e := put(t, n, "ev-key-"+round, "v", "Fencing-Token", fmt.Sprint(g.Token)); status != 200 {
				t.Fatalf("put: %d %+v", status, e)
			}
			if status := release(t, n, g); status != 200 {
				t.Fatalf("release: %d", status)
			}
		}
	}
	work(leader, "a")
	c.Stop(leader)
	newLeader := c.WaitNewLeader(leader.ID, 15*time.Second)
	work(newLeader, "b")
	c.Restart(leader)
	work(newLeader, "c")
	idx, _ := newLeader.Inst.Node.Digest()
	tc.Poll(t, 15*time.Second, "every member applied the workload", func() bool {
		for _, n := range c.Running() {
			if i, _ := n.Inst.Node.Digest(); i < idx {
				return false
			}
		}
		return true
	})

	floor, first := sameEvents(t, c, idx)
	acquired := map[uint64]bool{}
	for _, e := range first {
		if e.Type == event.Acquired {
			acquired[e.Token] = true
		}
	}
	for _, tok := range tokens {
		if tok > uint64(floor) && !acquired[tok] {
			t.Fatalf("grant %d of the workload is not among the acquired events since %d", tok, floor)
		}
	}
	if len(first) < 3*len(tokens) && floor == 0 {
		t.Fatalf("only %d events for %d grants", len(first), len(tokens))
	}
}

// sameEvents checks that every running member reports the same events from
// floor, the oldest index all of them keep (a restarted member starts after
// its snapshot), up to idx, and returns floor and those events.
func sameEvents(t *testing.T, c *tc.Cluster, idx uint64) (int64, []event.Event) {
	t.Helper()
	var floor int64
	for _, n := range c.Running() {
		floor = max(floor, oldestEvent(t, n))
	}
	var first []event.Event
	for i, n := range c.Running() {
		w, err := n.Inst.Coord.Watch(floor)
		if err != nil {
			t.Fatalf("%s: watch since %d: %v", n.ID, floor, err)
		}
		got := slices.DeleteFunc(readKept(t, w), func(e event.Event) bool { return e.Index > idx })
		if i == 0 {
			first = got
		} else if !slices.Equal(got, first) {
			t.Fatalf("%s's events since %d differ from %s's:\n%v\n%v", n.ID, floor, c.Running()[0].ID, got, first)
		}
	}
	return floor, first
}

// readKept reads a watcher's events until it has read every one kept.
func readKept(t *testing.T, w *events.Watcher) []event.Event {
	t.Helper()
	var out []event.Event
	for {
		batch, more, err := w.Next(make([]event.Event, 0, 256))
		if err != nil {
			t.Fatal(err)
		}
		if more != nil {
			return out
		}
		out = append(out, batch...)
	}
}

// oldestEvent is the lowest since a member's event history serves.
func oldestEvent(t *testing.T, n *tc.Node) int64 {
	t.Helper()
	for since := int64(0); ; {
		_, err := n.Inst.Coord.Watch(since)
		if err == nil {
			return since
		}
		var compacted *events.CompactedError
		if !errors.As(err, &compacted) || int64(compacted.Oldest) <= since {
			t.Fatalf("%s: %v", n.ID, err)
		}
		since = int64(compacted.Oldest)
	}
}
