package fsm

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// Durable waiters (issue 28, coord/DESIGN.md "Durable waiters"): an
// acquire that waits with "durable" is enqueued by an Enqueue entry, so
// every replica keeps, per name, the FIFO of its durable waiters in log
// order, and a new leader serves them in that order. The FSM times
// nothing: a waiter leaves when it is granted (any grant that answers its
// request id, whichever entry carries it) or by a Dequeue, which the
// leader proposes when the waiter's wait ran out on its clock. A grant
// given to a durable waiter remembers its Enqueue's index (waited) for as
// long as it is held, so every answer of it says where it queued.

// waitKey is a name of one kind: each kind's durable FIFOs are apart.
type waitKey struct {
	kind Kind
	name string
}

// EnqueueResult is the Apply result of an Enqueue: the waiter, and
// whether it was queued before (the same request asked again).
type EnqueueResult struct {
	Waiter   entry.Waiter
	Existing bool
}

// DequeueResult is the Apply result of an effective Dequeue.
type DequeueResult struct{ Waiter entry.Waiter }

func waiterKind(w *entry.Waiter) Kind {
	if w.Acquire != nil {
		return KindLock
	}
	return KindSemaphore
}

func applyEnqueue(s *state, c *entry.Enqueue, index uint64) any {
	if (c.Acquire == nil) == (c.Permit == nil) {
		return fmt.Errorf("%w: enqueue of %d commands, want one", entry.ErrMalformedCommand, countSet(c.Acquire != nil, c.Permit != nil))
	}
	w := &entry.Waiter{Index: index, Acquire: c.Acquire, Permit: c.Permit, WaitMillis: c.WaitMillis}
	if c.Acquire != nil {
		w.Principal = c.Acquire.Principal
	} else {
		w.Principal = c.Permit.Principal
	}
	if c.WaitMillis <= 0 || w.Name() == "" || w.RequestID() == "" {
		return fmt.Errorf("%w: enqueue of %q with wait %d ms and request id %q: want a name, a wait and a request id",
			entry.ErrMalformedCommand, w.Name(), c.WaitMillis, w.RequestID())
	}
	key := waitKey{waiterKind(w), w.Name()}
	if old := s.durableWaiter(key, w.Holder(), w.RequestID(), w.Principal); old != nil {
		return &EnqueueResult{Waiter: *old, Existing: true}
	}
	s.durable[key] = append(s.durable[key], w)
	s.durableCount++
	return &EnqueueResult{Waiter: *w}
}

func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

func applyDequeue(s *state, c *entry.Dequeue, _ uint64) any {
	key := waitKey{KindLock, c.Lock}
	if c.Semaphore != "" {
		key = waitKey{KindSemaphore, c.Semaphore}
	}
	q := s.durable[key]
	i := slices.IndexFunc(q, func(w *entry.Waiter) bool { return w.Index == c.Index })
	if i < 0 {
		return fmt.Errorf("%w: %q has no durable waiter enqueued at %d", refusal.ErrLeaseLost, key.name, c.Index)
	}
	w := q[i]
	s.dropWaiter(key, i)
	return &DequeueResult{Waiter: *w}
}

// durableWaiter returns the durable waiter of key with that request, if
// one is queued.
func (s *state) durableWaiter(key waitKey, holder, requestID, principal string) *entry.Waiter {
	for _, w := range s.durable[key] {
		if w.RequestID() == requestID && w.Holder() == holder && w.Principal == principal {
			return w
		}
	}
	return nil
}

// dropWaiter removes the i-th durable waiter of key.
func (s *state) dropWaiter(key waitKey, i int) {
	q := slices.Delete(s.durable[key], i, i+1)
	if len(q) == 0 {
		delete(s.durable, key)
	} else {
		s.durable[key] = q
	}
	s.durableCount--
}

// waiterGranted is called with every new grant of a request id: a durable
// waiter of that request leaves its FIFO, and the grant remembers where
// it queued. It returns that index (0: the grant was no durable waiter's).
func (s *state) waiterGranted(kind Kind, name, holder, requestID, principal string, token uint64) uint64 {
	key := waitKey{kind, name}
	if requestID == "" || len(s.durable[key]) == 0 {
		return 0
	}
	w := s.durableWaiter(key, holder, requestID, principal)
	if w == nil {
		return 0
	}
	s.dropWaiter(key, slices.Index(s.durable[key], w))
	s.waited[token] = w.Index
	return w.Index
}

// DurableWaiters returns every durable waiter, by kind and name, each
// name's in their FIFO's order (log order), for a new leader to queue
// again.
func (f *FSM) DurableWaiters() []entry.Waiter {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.durableWaiters()
}

func (s *state) durableWaiters() []entry.Waiter {
	keys := make([]waitKey, 0, len(s.durable))
	for k := range s.durable {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b waitKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	out := make([]entry.Waiter, 0, s.durableCount)
	for _, k := range keys {
		for _, w := range s.durable[k] {
			out = append(out, *w)
		}
	}
	return out
}

// DurableCount counts the durable waiters of every name.
func (f *FSM) DurableCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.durableCount
}

// waitedRecords returns the live grants given to durable waiters, by
// token.
func (s *state) waitedRecords() []entry.Waited {
	out := make([]entry.Waited, 0, len(s.waited))
	for t, i := range s.waited {
		out = append(out, entry.Waited{Token: t, WaitIndex: i})
	}
	slices.SortFunc(out, func(a, b entry.Waited) int { return cmp.Compare(a.Token, b.Token) })
	return out
}

// checkWaited refuses a restored state with a waited grant that is not
// held: a grant's end forgets its wait index.
func (s *state) checkWaited() error {
	if len(s.waited) == 0 {
		return nil
	}
	held := map[uint64]bool{}
	for _, e := range append(s.locks.Entries(), s.shared.Entries()...) {
		held[e.Token()] = true
	}
	for _, p := range s.sems.Permits() {
		held[p.Token] = true
	}
	for token := range s.waited {
		if !held[token] {
			return fmt.Errorf("snapshot is inconsistent: waited grant %d is not held", token)
		}
	}
	return nil
}
