package coord

import (
	"testing"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm/entry"
)

// The table's count of waiters (MaxWaiters) follows every way in and out of
// a queue: queued, popped by a proposal, put back after a failed one, given
// up, failed on a leadership loss. It used to miss queueing and giving up,
// so handoffs drove it below zero and the limit never applied.
func TestQueuesCountWaiters(t *testing.T) {
	tab := newQueues()
	q := tab.get("a")
	defer tab.put("a", q)
	ws := make([]*waiter, 4)
	for i := range ws {
		ws[i] = &waiter{cmd: &entry.Acquire{Lock: "a"}, result: make(chan waitResult, 1)}
		q.mu.Lock()
		q.pushBack(ws[i])
		q.mu.Unlock()
	}
	if got := tab.queued.Load(); got != 4 || tab.waiting() != 4 {
		t.Fatalf("queued %d, waiting %d; want 4", got, tab.waiting())
	}
	q.mu.Lock()
	if w := q.pop(); w != ws[0] || !w.taken {
		t.Fatal("pop did not take the head")
	}
	q.pushFront(ws[0]) // the proposal failed
	q.remove(ws[2])    // gave up
	q.mu.Unlock()
	if got := tab.queued.Load(); got != 3 || tab.waiting() != 3 {
		t.Fatalf("queued %d, waiting %d; want 3", got, tab.waiting())
	}
	tab.failAll(cluster.ErrNotLeader)
	if got := tab.queued.Load(); got != 0 || tab.waiting() != 0 {
		t.Fatalf("after failAll: queued %d, waiting %d", got, tab.waiting())
	}
	for _, i := range []int{0, 1, 3} {
		if r := <-ws[i].result; r.err != cluster.ErrNotLeader {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
	}
}
