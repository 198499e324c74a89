package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/coord/internal/waitq"
	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// Durable waiters (DESIGN.md, "Durable waiters"): an acquire with Durable
// that must wait is an Enqueue entry, proposed under the name's queue, and
// then an ordinary waiter of the leader's FIFO, held by a keeper instead of
// by the caller: the caller's own wait may end, and the caller go, while
// the waiter keeps its place until its wait (restarted by each ask with
// its request id) runs out on the lease timers, when the leader proposes a
// Dequeue. A new leader queues every durable waiter again from the FSM,
// in log order, before it serves anybody, and serves the names they wait
// for; an ask with the request id attaches to its waiter.

// errDequeued is a keeper's answer once its waiter's wait ran out.
var errDequeued = errors.New("durable waiter dequeued")

// keeper holds one durable waiter in the leader's FIFO of its name. Its
// waiter is answered once (a grant, a refusal, or the leader's end), and
// every caller attached to it reads that answer.
type keeper[C entry.Command, R any] struct {
	name, holder string
	index        uint64 // its Enqueue's
	cmd          C
	q            *waitq.Queue[C, R] // its name's, held in the table until it ends
	w            *waitq.Waiter[C, R]
	done         chan struct{} // closed once r and err are set
	r            R
	err          error
}

// kept are an engine's keepers, by name and Enqueue index.
type kept[C entry.Command, R any] struct {
	mu sync.Mutex
	by map[keptKey]*keeper[C, R]
}

type keptKey struct {
	name  string
	index uint64
}

func (k *kept[C, R]) get(name string, index uint64) *keeper[C, R] {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.by[keptKey{name, index}]
}

func (k *kept[C, R]) put(kp *keeper[C, R]) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.by == nil {
		k.by = map[keptKey]*keeper[C, R]{}
	}
	k.by[keptKey{kp.name, kp.index}] = kp
}

func (k *kept[C, R]) drop(kp *keeper[C, R]) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.by[keptKey{kp.name, kp.index}] == kp {
		delete(k.by, keptKey{kp.name, kp.index})
	}
}

// enqueue proposes a's Enqueue and keeps the waiter at the tail of the
// name's FIFO (q, locked), timing its wait. A request queued before (its
// keeper gone: its grant was refused) keeps its first place in the log
// and the command it was enqueued with.
func (e *engine[C, R]) enqueue(q *waitq.Queue[C, R], a ask[C]) (*keeper[C, R], error) {
	res, err := e.s.raft.Apply(e.p.enqueue(a.cmd, a.wait.Milliseconds()))
	if err != nil {
		return nil, err
	}
	w := res.(*fsm.EnqueueResult).Waiter
	cmd, _ := e.p.waiting(w)
	e.s.timers.Track(e.p.waitKey(a.name, w.Index), w.Index, millis(w.WaitMillis))
	return e.keep(q, a.name, a.holder, w.Index, cmd), nil
}

// keep pushes a durable waiter's cmd onto q (locked; its caller holds it
// in the table) with its keeper, which holds q in the table too until its
// waiter is answered. A keeper is no goroutine: its waiter's answer, from
// whoever gives it (a grant, a refusal, the leader's end), is recorded by
// end, and its wait's end is handled by expireWait.
func (e *engine[C, R]) keep(q *waitq.Queue[C, R], name, holder string, index uint64, cmd C) *keeper[C, R] {
	kp := &keeper[C, R]{name: name, holder: holder, index: index, cmd: cmd, q: q, done: make(chan struct{})}
	kp.w = q.PushFunc(cmd, func(r R, err error) { e.end(kp, r, err) })
	e.kept.put(kp)
	e.queues.Get(name) // the same q: its caller holds it
	return kp
}

// end records a keeper's answer, once, for every caller attached to it
// (called with its queue locked, by whoever answered its waiter).
func (e *engine[C, R]) end(kp *keeper[C, R], r R, err error) {
	if err == nil || errors.Is(err, errDequeued) {
		e.s.timers.Forget(e.p.waitKey(kp.name, kp.index), kp.index)
	}
	kp.r, kp.err = r, err
	e.kept.drop(kp)
	close(kp.done)
	e.queues.Put(kp.name, kp.q)
}

// dequeue is a keeper's waiter's wait running out (q locked): unless a
// proposal took it meanwhile (its answer on its way), it leaves the queue
// by a Dequeue.
func (e *engine[C, R]) dequeue(q *waitq.Queue[C, R], kp *keeper[C, R]) {
	if !q.Leave(kp.w) {
		return
	}
	if _, err := e.s.raft.Apply(e.p.dequeue(kp.name, kp.index)); err != nil && !errors.Is(err, refusal.ErrLeaseLost) {
		e.end(kp, *new(R), err) // its timer stays, and fires again
		return
	}
	e.s.log.Debug("durable waiter dequeued", e.what, kp.name, "holder", kp.holder, "wait_index", kp.index)
	e.end(kp, *new(R), errDequeued)
}

// attached waits, for up to a.wait, for the answer to the durable waiter
// kp that a's caller asked for again (its wait restarted), or, when the
// caller's wait ends first, answers as an acquire without a wait would,
// the waiter staying queued.
func (e *engine[C, R]) attached(ctx context.Context, q *waitq.Queue[C, R], kp *keeper[C, R], a ask[C]) (R, error) {
	var zero R
	ended, stop := e.s.waitFor(a.wait)
	defer stop()
	select {
	case <-kp.done:
		if !errors.Is(kp.err, errDequeued) {
			return kp.r, kp.err
		}
	case <-ended:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-e.s.stop:
		return zero, cluster.ErrNoLeader
	}
	return e.lapsedKept(q, kp, a)
}

// lapsedKept answers a caller of kp whose wait ended (or whose waiter's
// wait ran out just as it asked again), under the name's queue: with the
// waiter's answer if it came meanwhile, else as an acquire without a wait
// would be (held, in lock-delay), never with a grant of its own, as its
// waiter is still queued.
func (e *engine[C, R]) lapsedKept(q *waitq.Queue[C, R], kp *keeper[C, R], a ask[C]) (R, error) {
	var zero R
	name := a.name
	defer e.s.ready.try(e.s) // after the unlock: a multi-waiter its serving reached
	q.Lock()
	defer q.Unlock()
	answered := func() bool {
		if e.state(name, a.holder, a.requestID, a.principal).Granted {
			// Its grant is on its way to the keeper, which needs no lock
			// to take it.
			<-kp.done
			return true
		}
		select {
		case <-kp.done:
			return !errors.Is(kp.err, errDequeued)
		default:
			return false
		}
	}
	if answered() {
		return kp.r, kp.err
	}
	confirm, why := e.p.lapsed(e.state(name, "", "", ""), kp.cmd, true)
	if why == nil {
		// Free, yet the waiter is queued: serve the queue (a leader paused
		// past its term resumes with a successor's release applied).
		e.serve(q, name)
		if answered() {
			return kp.r, kp.err
		}
		confirm, why = true, e.p.refusal(e.state(name, "", "", ""), kp.cmd, false, true)
		if why == nil {
			why = fmt.Errorf("%w: %s %q: queued behind other waiters", refusal.ErrLockHeld, e.what, name)
		}
	}
	if confirm {
		return zero, e.s.refuse(why)
	}
	return zero, why
}

// expireWait is called by the timers when a durable waiter's wait runs
// out: its keeper proposes its Dequeue, or, with no keeper (its grant was
// refused), the Dequeue is proposed here, under the name's queue.
func (e *engine[C, R]) expireWait(name string, index uint64) {
	if e.s.awaitLeader(context.Background()) != nil {
		return
	}
	key := e.p.waitKey(name, index)
	q := e.queues.Get(name)
	defer e.queues.Put(name, q)
	q.Lock()
	defer q.Unlock()
	if !e.s.timers.Due(key, index) {
		return // asked again since it fired
	}
	if kp := e.kept.get(name, index); kp != nil {
		e.dequeue(q, kp)
		return
	}
	_, err := e.s.raft.Apply(e.p.dequeue(name, index))
	switch {
	case err == nil, errors.Is(err, refusal.ErrLeaseLost):
		e.s.timers.Forget(key, index)
	default:
		e.s.timers.Retry(key, index, 100*time.Millisecond)
	}
}

// requeue queues the durable waiters of this engine's kind again, from
// the FSM's FIFOs in log order, on a new leader before it serves anybody
// (their waits are timed by Promote), and then serves the names they wait
// for: a free name's head is granted, its grant collected by request id.
func (e *engine[C, R]) requeue(waiters []entry.Waiter) {
	var names []string
	for _, w := range waiters {
		cmd, ok := e.p.waiting(w)
		if !ok {
			continue // another kind's
		}
		q := e.queues.Get(w.Name())
		q.Lock()
		// A keeper of the last view may not have ended yet: it answers
		// its callers, and this one replaces it.
		e.keep(q, w.Name(), w.Holder(), w.Index, cmd)
		if len(names) == 0 || names[len(names)-1] != w.Name() {
			names = append(names, w.Name())
		}
		q.Unlock()
		e.queues.Put(w.Name(), q)
	}
	for _, name := range names {
		q := e.queues.Get(name)
		q.Lock()
		e.serve(q, name)
		q.Unlock()
		e.queues.Put(name, q)
	}
	e.s.ready.try(e.s) // a multi-waiter the serving reached
}

// The policies' durable waiters: a lock's (an election's campaign too)
// and a semaphore's, one line each.

func (lockPolicy) enqueue(cmd *entry.Acquire, waitMillis int64) entry.Command {
	return &entry.Enqueue{Acquire: cmd, WaitMillis: waitMillis}
}

func (lockPolicy) dequeue(name string, index uint64) entry.Command {
	return &entry.Dequeue{Lock: name, Index: index}
}

func (lockPolicy) waitKey(name string, index uint64) lease.Key { return timed.LockWaitKey(name, index) }

func (lockPolicy) waiting(w entry.Waiter) (*entry.Acquire, bool) { return w.Acquire, w.Acquire != nil }

func (semPolicy) enqueue(cmd *entry.SemAcquire, waitMillis int64) entry.Command {
	return &entry.Enqueue{Permit: cmd, WaitMillis: waitMillis}
}

func (semPolicy) dequeue(name string, index uint64) entry.Command {
	return &entry.Dequeue{Semaphore: name, Index: index}
}

func (semPolicy) waitKey(name string, index uint64) lease.Key {
	return timed.PermitWaitKey(name, index)
}

func (semPolicy) waiting(w entry.Waiter) (*entry.SemAcquire, bool) { return w.Permit, w.Permit != nil }

// durableFormat refuses a durable acquire while a member reads log
// formats before durable waiters, after a quorum round.
func (s *Service) durableFormat(durable bool) error {
	if f := s.raft.EntryFormat(); durable && f < entry.LogFormatDurableWaits {
		return s.refuse(fmt.Errorf("%w: a durable wait needs log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatDurableWaits, f))
	}
	return nil
}
