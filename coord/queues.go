package coord

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// queues holds, on the leader, a queue per name: a mutex that serializes the
// proposals that change the name's state, and the FIFO of callers waiting
// for it. While a queue's mutex is held, the leader's FSM view of that name
// is exact. Locks use it today; a semaphore or an election would queue its
// waiters the same way.
type queues struct {
	mu     sync.Mutex
	byName map[string]*queue
	queued atomic.Int64 // waiters across all queues
}

type queue struct {
	queued  *atomic.Int64 // the table's count of waiters
	mu      sync.Mutex    // serializes proposals for this name
	refs    int           // guarded by queues.mu
	waiters list.List     // of *waiter, guarded by mu
	// n is waiters.Len(), readable without mu, which is held across
	// proposals: a status read must not wait for one.
	n atomic.Int64
}

// waiter is a caller queued for a lock, with the acquire to propose for it
// when its turn comes.
type waiter struct {
	cmd    *entry.Acquire
	sem    *entry.SemAcquire // instead of cmd, for a semaphore's permit
	result chan waitResult   // buffered: a grant is never blocked on delivery
	elem   *list.Element
	taken  bool // popped by a proposal; the result will arrive
}

type waitResult struct {
	grant  entry.Lock
	permit fsm.PermitResult // a semaphore waiter's
	err    error
}

func newQueues() *queues { return &queues{byName: map[string]*queue{}} }

// get returns name's queue, created on first use; every get is paired with
// a put, and a queue nobody holds is dropped.
func (t *queues) get(name string) *queue {
	t.mu.Lock()
	defer t.mu.Unlock()
	q, ok := t.byName[name]
	if !ok {
		q = &queue{queued: &t.queued}
		t.byName[name] = q
	}
	q.refs++
	return q
}

func (t *queues) put(name string, q *queue) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q.refs--
	if q.refs == 0 {
		delete(t.byName, name)
	}
}

func (t *queues) all() []*queue {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*queue, 0, len(t.byName))
	for _, q := range t.byName {
		out = append(out, q)
	}
	return out
}

// queuedFor counts the callers queued for name without taking its queue's
// mutex (held across proposals) or creating a queue.
func (t *queues) queuedFor(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q, ok := t.byName[name]; ok {
		return int(q.n.Load())
	}
	return 0
}

// waiting counts queued callers across all names. It reads the count, not
// the queues: a queue's mutex is held across its proposals, and a scrape of
// /metrics must not wait for a proposal (on a leader whose disk stalled, it
// would wait for good).
func (t *queues) waiting() int { return int(t.queued.Load()) }

// failAll answers every waiter with err; used when leadership is lost.
func (t *queues) failAll(err error) {
	for _, q := range t.all() {
		q.mu.Lock()
		for w := q.pop(); w != nil; w = q.pop() {
			w.result <- waitResult{err: err}
		}
		q.mu.Unlock()
	}
}

// pop takes the head waiter, marked taken: a result is owed to it.
func (q *queue) pop() *waiter {
	e := q.waiters.Front()
	if e == nil {
		return nil
	}
	w := q.waiters.Remove(e).(*waiter)
	w.taken = true
	q.queued.Add(-1)
	q.n.Add(-1)
	return w
}

// pushFront puts a popped waiter back at the head after a failed proposal.
func (q *queue) pushFront(w *waiter) {
	w.taken = false
	w.elem = q.waiters.PushFront(w)
	q.queued.Add(1)
	q.n.Add(1)
}

func (q *queue) pushBack(w *waiter) {
	w.elem = q.waiters.PushBack(w)
	q.queued.Add(1)
	q.n.Add(1)
}

// remove takes a waiter that gave up out of the queue.
func (q *queue) remove(w *waiter) {
	q.waiters.Remove(w.elem)
	q.queued.Add(-1)
	q.n.Add(-1)
}
