// Package waitq holds, on the leader, the callers queued for a name (a lock,
// a semaphore): per name, a mutex that serializes the proposals changing it
// and the FIFO of its waiters, each answered exactly once.
//
// A primitive's queue is where its handoff guarantee lives: while a queue's
// mutex is held the leader's view of the name is exact, so a proposal that
// frees the name can take the head waiter (Pop, given back by PutBack if
// the entry is not written; HandOver does both for one name) and grant it
// in the same entry, and a waiter whose wait ends either leaves the queue
// or, if a proposal took it first, gets that proposal's answer (Wait). The
// package knows nothing of Raft or of what is granted: C is the command
// proposed for a waiter, R the answer it gets.
package waitq

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
)

// Table is the queues of one primitive, by name. Tables may share one count
// of waiters (the cluster's limit spans them all).
type Table[C, R any] struct {
	mu     sync.Mutex
	byName map[string]*Queue[C, R]
	queued *atomic.Int64 // waiters across the tables that share it
}

// Queue is one name's mutex and FIFO of waiters.
type Queue[C, R any] struct {
	queued  *atomic.Int64 // the table's count of waiters
	mu      sync.Mutex    // serializes proposals for this name
	refs    int           // guarded by Table.mu
	waiters list.List     // of *Waiter, guarded by mu
	// n is waiters.Len(), readable without mu, which is held across
	// proposals: a status read must not wait for one.
	n atomic.Int64
}

// Waiter is a caller queued for a name, with the command to propose for it
// when its turn comes.
type Waiter[C, R any] struct {
	Cmd C
	// Group is set for one name of a caller queued for several names at
	// once (a waiting multi-acquire): proposals never pop it for the name
	// alone, Serve stops at it, and FailAll answers the group.
	Group  Group
	result chan answer[R] // buffered: a grant is never blocked on delivery
	// answered, when set (PushFunc), takes the answer instead of result:
	// a waiter nobody waits for in Wait.
	answered func(R, error)
	elem     *list.Element
	taken    bool // popped by a proposal; the answer will arrive
}

// Group is a caller queued in several queues at once, one Waiter in each,
// all answered by one answer outside this package. Its place in each FIFO
// is the Waiter's; it is granted by whoever holds all its queues, once it
// heads every one with room (Cmd is then what that room is asked about).
type Group interface {
	// Fail answers the group with err, unless it was answered already.
	Fail(err error)
	// Ready says one of its queues has it at the head with room (Serve
	// found it there), so it may be grantable now: called with that
	// queue locked, it must not take the others itself.
	Ready()
}

type answer[R any] struct {
	r   R
	err error
}

// New returns an empty table counting its waiters in queued.
func New[C, R any](queued *atomic.Int64) *Table[C, R] {
	return &Table[C, R]{byName: map[string]*Queue[C, R]{}, queued: queued}
}

// Get returns name's queue, created on first use; every Get is paired with
// a Put, and a queue nobody holds is dropped.
func (t *Table[C, R]) Get(name string) *Queue[C, R] {
	t.mu.Lock()
	defer t.mu.Unlock()
	q, ok := t.byName[name]
	if !ok {
		q = &Queue[C, R]{queued: t.queued}
		t.byName[name] = q
	}
	q.refs++
	return q
}

// Put gives back a queue that Get returned.
func (t *Table[C, R]) Put(name string, q *Queue[C, R]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q.refs--
	if q.refs == 0 {
		delete(t.byName, name)
	}
}

func (t *Table[C, R]) all() []*Queue[C, R] {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Queue[C, R], 0, len(t.byName))
	for _, q := range t.byName {
		out = append(out, q)
	}
	return out
}

// QueuedFor counts the callers queued for name without taking its queue's
// mutex (held across proposals) or creating a queue.
func (t *Table[C, R]) QueuedFor(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q, ok := t.byName[name]; ok {
		return int(q.n.Load())
	}
	return 0
}

// Queued counts the waiters of every table sharing this one's count. It
// reads the count, not the queues: a queue's mutex is held across its
// proposals, and a scrape of /metrics must not wait for a proposal (on a
// leader whose disk stalled, it would wait for good).
func (t *Table[C, R]) Queued() int { return int(t.queued.Load()) }

// FailAll answers every waiter with err; used when leadership is lost.
func (t *Table[C, R]) FailAll(err error) {
	for _, q := range t.all() {
		q.mu.Lock()
		for w := q.Pop(); w != nil; w = q.Pop() {
			if w.Group != nil {
				w.Group.Fail(err) // once, whichever of its queues is first
				continue
			}
			w.Answer(*new(R), err)
		}
		q.mu.Unlock()
	}
}

// Lock takes the queue's mutex, held across a proposal for its name.
func (q *Queue[C, R]) Lock() { q.mu.Lock() }

// Unlock releases the queue's mutex.
func (q *Queue[C, R]) Unlock() { q.mu.Unlock() }

// Len counts the queue's waiters. Called with q locked.
func (q *Queue[C, R]) Len() int { return q.waiters.Len() }

// Push queues a caller that will propose cmd, at the tail. Called with q
// locked.
func (q *Queue[C, R]) Push(cmd C) *Waiter[C, R] {
	w := &Waiter[C, R]{Cmd: cmd, result: make(chan answer[R], 1)}
	w.elem = q.waiters.PushBack(w)
	q.count(1)
	return w
}

// PushFunc queues, at the tail, a waiter that nobody awaits in Wait: its
// answer is given to answered, called once by whoever answers it, with
// the queue locked (so answered must not take it). Its holder leaves the
// queue by Leave. Called with q locked.
func (q *Queue[C, R]) PushFunc(cmd C, answered func(R, error)) *Waiter[C, R] {
	w := &Waiter[C, R]{Cmd: cmd, answered: answered}
	w.elem = q.waiters.PushBack(w)
	q.count(1)
	return w
}

// PushGroup queues one name of group g at the tail; cmd is what the
// name's room is asked about, never proposed. Called with q locked.
func (q *Queue[C, R]) PushGroup(cmd C, g Group) *Waiter[C, R] {
	w := q.Push(cmd)
	w.Group = g
	return w
}

// Reserved reports whether the head waiter is one name of a group: the
// name is kept for it, even free, and nobody behind it is served. Called
// with q locked.
func (q *Queue[C, R]) Reserved() bool {
	h := q.Head()
	return h != nil && h.Group != nil
}

// Leave takes w out of the queue unless a proposal popped it, and reports
// whether it did. Called with q locked.
func (q *Queue[C, R]) Leave(w *Waiter[C, R]) bool {
	if w.taken {
		return false
	}
	q.remove(w)
	return true
}

// Head returns the head waiter, left in the queue (nil: nobody waits).
// Called with q locked.
func (q *Queue[C, R]) Head() *Waiter[C, R] {
	if e := q.waiters.Front(); e != nil {
		return e.Value.(*Waiter[C, R])
	}
	return nil
}

// Pop takes the head waiter, marked taken: an answer is owed to it. Called
// with q locked.
func (q *Queue[C, R]) Pop() *Waiter[C, R] {
	e := q.waiters.Front()
	if e == nil {
		return nil
	}
	w := q.waiters.Remove(e).(*Waiter[C, R])
	w.taken = true
	q.count(-1)
	return w
}

// PutBack puts a waiter that Pop took back at the head, no longer taken,
// after the proposal that carried its command failed: its turn is still
// first. With Pop it lets a proposal that frees several names take each
// one's head waiter, holding their queues' mutexes, and give back those
// whose entry was not written. Called with q locked.
func (q *Queue[C, R]) PutBack(w *Waiter[C, R]) { q.pushFront(w) }

// pushFront puts a popped waiter back at the head after a failed proposal.
func (q *Queue[C, R]) pushFront(w *Waiter[C, R]) {
	w.taken = false
	w.elem = q.waiters.PushFront(w)
	q.count(1)
}

// remove takes a waiter that gave up out of the queue.
func (q *Queue[C, R]) remove(w *Waiter[C, R]) {
	q.waiters.Remove(w.elem)
	q.count(-1)
}

func (q *Queue[C, R]) count(d int64) {
	q.queued.Add(d)
	q.n.Add(d)
}

// Answer delivers a popped waiter's grant, or why it got none.
func (w *Waiter[C, R]) Answer(r R, err error) {
	if w.answered != nil {
		w.answered(r, err)
		return
	}
	w.result <- answer[R]{r, err}
}

// HandOver runs propose, the proposal that frees the name, offering it to
// the head waiter in the same entry when offer is set: propose gets the
// head's command (the zero C when nobody waits or offer is unset). A failed
// proposal puts the head back; a successful one returns it, to be answered
// with what the entry handed it. Called with q locked.
func (q *Queue[C, R]) HandOver(offer bool, propose func(next C) error) (*Waiter[C, R], error) {
	var w *Waiter[C, R]
	var next C
	if offer && !q.Reserved() {
		if w = q.Pop(); w != nil {
			next = w.Cmd
		}
	}
	if err := propose(next); err != nil {
		if w != nil {
			q.pushFront(w)
		}
		return nil, err
	}
	return w, nil
}

// Serve grants to queued waiters, head first, while free says the name has
// room for the head's command: each is answered with grant's result. It
// stops at an error for which stop is true (this node can no longer
// propose), and at a group's waiter (Reserved), which only a proposal
// holding all the group's queues grants: it is told it has room there
// (Ready). Called with q locked.
func (q *Queue[C, R]) Serve(free func(head C) bool, grant func(C) (R, error), stop func(error) bool) {
	for {
		head := q.Head()
		if head == nil || !free(head.Cmd) {
			return
		}
		if head.Group != nil {
			head.Group.Ready()
			return
		}
		w := q.Pop()
		r, err := grant(w.Cmd)
		w.Answer(r, err)
		if err != nil && stop(err) {
			return
		}
	}
}

// Wait blocks a queued caller until it is answered, or its wait ends: ended
// is closed, ctx is done, or stop is closed. A waiter a proposal took
// meanwhile is owed that proposal's answer, which Wait then awaits: being a
// grant, it must not be dropped. Otherwise the waiter leaves the queue and
// gaveUp answers, under the queue's mutex, as an acquire without a wait
// would (unless ctx ended: its error).
func (q *Queue[C, R]) Wait(ctx context.Context, w *Waiter[C, R], ended, stop <-chan struct{}, gaveUp func() (R, error)) (R, error) {
	select {
	case a := <-w.result:
		return a.r, a.err
	case <-ended:
	case <-ctx.Done():
	case <-stop:
	}
	q.mu.Lock()
	if w.taken {
		q.mu.Unlock()
		a := <-w.result
		return a.r, a.err
	}
	q.remove(w)
	defer q.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return *new(R), err
	}
	return gaveUp()
}
