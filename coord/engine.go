package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/coord/internal/waitq"
	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
)

// The grant engine: one implementation, for every kind of grant, of what a
// primitive does on the leader (DESIGN.md, "The grant engine"). Acquire
// with or without a wait, the name's wait queue, serving waiters, handing
// the name over in the entry that frees it, renewal, expiry, and the end of
// a lock-delay. What differs between a lock and a semaphore is a policy:
// how many may hold at once (read from fsm.NameState), the commands it
// proposes, its refusals and its timer keys. C is the primitive's acquire
// command, R the result a caller gets.

// policy is what a primitive tells the engine. Its methods are pure
// functions of their arguments and of the leader's timers.
type policy[C entry.Command, R any] interface {
	// closed says whether st has no room for cmd (taken: a lock held in
	// another mode or exclusively, a semaphore full with its delayed
	// slots) and whether it is closed for another reason (a lock in its
	// lock-delay). A waiter is served, or offered in a freeing entry, only
	// when neither holds; the limits on held grants are checked unless
	// taken.
	closed(st fsm.NameState, cmd C) (taken, delayed bool)
	// refusal is why an acquire of cmd not granted before is refused at
	// once, without a log write (nil: it is proposed or queued); wait
	// says it may queue, ahead that others are queued before it (FIFO: a
	// shared acquire does not pass a queued exclusive one).
	refusal(st fsm.NameState, cmd C, wait, ahead bool) error
	// lapsed is the answer to a waiter of cmd whose wait ended, as an
	// acquire without a wait would get (nil: propose its acquire); confirm
	// says a quorum round must come first.
	lapsed(st fsm.NameState, cmd C, ahead bool) (confirm bool, why error)

	// granted is what the leader times of a granted acquire.
	granted(r R) timedGrant
	// served is the answer to a waiter served by its own acquire.
	served(r R) R
	// freed reads a release's, an expiry's or a delay's end's result.
	freed(res any) freedName[R]
	// stamp sets the leader's time in a waiter's acquire before it is
	// proposed (next is nil when nobody waits).
	stamp(next C, nowMillis int64)
	// holder is who cmd asks for, whose held grants the limits count.
	holder(cmd C) string
	release(name string, token uint64, secret string, next C) entry.Command
	expire(name string, token uint64, next C) entry.Command
	endDelay(name string, since uint64, next C) entry.Command
	// revoke ends a grant at an operator's word (revoke.go).
	revoke(name string, token uint64, next C) entry.Command
	// enqueue and dequeue are a durable waiter's entries, waitKey the key
	// of its wait, and waiting its command as the FSM keeps it (false: a
	// waiter of another kind) (durable.go).
	enqueue(cmd C, waitMillis int64) entry.Command
	dequeue(name string, index uint64) entry.Command
	waitKey(name string, index uint64) lease.Key
	waiting(w entry.Waiter) (C, bool)

	// grantKey and delayKey are the timer keys of a grant's lease (shared:
	// a lock's shared grant, which has a key of its own) and of a
	// lock-delay that started at since.
	grantKey(name string, token uint64, shared bool) lease.Key
	delayKey(name string, since uint64) lease.Key
	// notHeldError refuses a renewal of a grant the state does not hold
	// with that secret; expiredError one whose lease the timers no longer
	// time (it is expiring).
	notHeldError(st fsm.NameState, token uint64, secret string) error
	expiredError(name string, token uint64) error
}

// timedGrant is a grant as the timers need it.
type timedGrant struct {
	name      string
	token     uint64
	ttlMillis int64
	existing  bool // an earlier answer to the same request: nothing new
	// session is the session the grant lives under: its timer times the
	// grant, which has none of its own.
	session uint64
	shared  bool // a lock's shared grant
}

// track starts timing a new grant's lease, unless its session times it.
func (e *engine[C, R]) track(g timedGrant) {
	if g.session == 0 {
		e.s.timers.Track(e.p.grantKey(g.name, g.token, g.shared), g.token, millis(g.ttlMillis))
	}
}

// freedName is what an entry that freed a name did there: the grant it
// handed the popped waiter or why not, and the lock-delay it started.
type freedName[R any] struct {
	next    *R
	nextErr error
	delay   *entry.Delay
}

// engine is the grant engine of one kind of grant.
type engine[C entry.Command, R any] struct {
	s      *Service
	of     fsm.Kind // the kind of grant it grants
	what   string   // "lock", "semaphore": in refusals and logs
	queues *waitq.Table[C, R]
	p      policy[C, R]
	kept   kept[C, R] // its durable waiters' keepers (durable.go)
}

func newEngine[C entry.Command, R any](s *Service, kind fsm.Kind, what string, p policy[C, R]) *engine[C, R] {
	return &engine[C, R]{s: s, of: kind, what: what, queues: waitq.New[C, R](&s.queued), p: p}
}

// grantKind is an engine as the service drives it, whatever its C and R:
// the service registers each (Service.register) and finds it by its kind
// or by the kinds of its timer keys.
type grantKind interface {
	kind() fsm.Kind
	// timerKinds are the kinds of the timer keys of its grants' leases
	// (a lock's exclusive and shared grants: two), of its lock-delays and
	// of its durable waiters' waits.
	timerKinds() (grants []lease.Kind, delay, wait lease.Kind)
	expire(name string, token uint64)
	endDelay(name string, since uint64)
	// expireWait ends a durable waiter's wait; requeue queues durable
	// waiters again on a new leader (durable.go).
	expireWait(name string, index uint64)
	requeue(waiters []entry.Waiter)
	holdName(name string, set *holdSet) Freeing
	failWaiters(err error)
}

func (e *engine[C, R]) kind() fsm.Kind { return e.of }

func (e *engine[C, R]) timerKinds() (grants []lease.Kind, delay, wait lease.Kind) {
	return []lease.Kind{e.p.grantKey("", 0, false).Kind, e.p.grantKey("", 0, true).Kind}, e.p.delayKey("", 0).Kind, e.p.waitKey("", 0).Kind
}

func (e *engine[C, R]) holdName(name string, set *holdSet) Freeing {
	h := e.hold(name)
	h.set = set
	return h
}

func (e *engine[C, R]) failWaiters(err error) { e.queues.FailAll(err) }

// ask is one acquire as the engine decides it; durable: its waiter's
// place is kept in the log (durable.go).
type ask[C any] struct {
	name, holder, requestID, principal string
	wait                               time.Duration
	durable                            bool
	cmd                                C
}

// state is the engine's one read of a name.
func (e *engine[C, R]) state(name, holder, requestID, principal string) fsm.NameState {
	return e.s.fsm.NameState(e.of, name, holder, requestID, principal)
}

// acquire grants a.cmd, queueing for up to a.wait while the name has no
// room. A retry of a granted request is proposed again, to get its grant
// back (Existing).
//
// It is long because the order of its steps under the name's queue is the
// handoff guarantee (DESIGN.md, "One proposal at a time per name"); it reads
// best in one piece.
func (e *engine[C, R]) acquire(ctx context.Context, a ask[C]) (R, error) {
	var zero R
	q := e.queues.Get(a.name)
	defer e.queues.Put(a.name, q)

	q.Lock()
	st := e.state(a.name, a.holder, a.requestID, a.principal)
	if kp := e.kept.get(a.name, st.Waiting); a.durable && kp != nil && !st.Granted {
		// Asked again: the waiter keeps its place, its wait restarted.
		e.s.timers.Renew(e.p.waitKey(a.name, kp.index), kp.index)
		q.Unlock()
		return e.attached(ctx, q, kp, a)
	}
	retry := st.Granted
	var taken, delayed bool
	if !retry {
		taken, delayed = e.p.closed(st, a.cmd)
		why := e.p.refusal(st, a.cmd, a.wait > 0, q.Len() > 0)
		if q.Reserved() {
			// Kept for a multi-acquire queued first, even free.
			taken = true
			if why == nil && a.wait == 0 {
				why = reservedError(e.what, a.name)
			}
		}
		if why != nil {
			// Refused without writing the log. Under the queue's mutex,
			// this leader's view of the name is exact; a quorum round
			// proves it still leads.
			err := e.s.refuse(why)
			q.Unlock()
			return zero, err
		}
	}
	queueing := a.wait > 0 && !retry && (taken || delayed || q.Len() > 0)
	err := e.s.checkGrants(st, a.holder, retry || taken)
	if err == nil && queueing {
		err = e.s.checkWaiters(q.Len(), e.what, a.name)
	}
	if err != nil {
		err = e.s.refuse(err)
		q.Unlock()
		return zero, err
	}
	if !queueing {
		res, err := e.grant(a.cmd)
		q.Unlock()
		return res, err
	}
	if a.durable {
		kp, err := e.enqueue(q, a)
		if err == nil && !taken {
			e.serve(q, a.name)
		}
		q.Unlock()
		e.s.ready.try(e.s) // a multi-waiter its serving reached
		if err != nil {
			return zero, err
		}
		return e.attached(ctx, q, kp, a)
	}
	w := q.Push(a.cmd)
	if !taken {
		e.serve(q, a.name)
	}
	q.Unlock()
	e.s.ready.try(e.s) // a multi-waiter its serving reached
	ended, stop := e.s.waitFor(a.wait)
	defer stop()
	defer e.s.ready.try(e.s) // a multi-waiter the serving below reached
	return q.Wait(ctx, w, ended, e.s.stop, func() (R, error) {
		// Waiters left ahead of it on a free name (by a leader that did
		// not know an entry freed it: a release whose outcome was
		// unknown) are served first, as they would have been; serving
		// stops at a multi-acquire's waiter, which keeps the name. Else
		// a waiter behind them took the name as its wait ended, passing
		// them (the simulation's multi-acquire FIFO check caught it
		// passing a multi-waiter, seed 4215309506448845301).
		e.serve(q, a.name)
		// Answer as an acquire without a wait would, under the queue's
		// mutex: refused (held or full, proven by a quorum round: a leader
		// paused past its term still sees the grant its successor
		// released), or granted. A free lock once answered lock_held
		// naming nobody with token 0, a grant that never existed (the
		// chaos suite's lock checker caught it on a leader resumed after
		// a SIGSTOP): the lock had been released, by its successor, as the
		// wait ended.
		confirm, why := e.p.lapsed(e.state(a.name, "", "", ""), a.cmd, q.Len() > 0)
		if why == nil && q.Reserved() {
			confirm, why = true, reservedError(e.what, a.name)
		}
		switch {
		case why != nil && confirm:
			return zero, e.s.refuse(why)
		case why != nil:
			return zero, why
		}
		return e.grantWaiter(a.name, a.cmd)
	})
}

// reservedError refuses an acquire without a wait of a name that is free
// but kept for a multi-acquire queued before it (its waiter heads the
// name's FIFO until all its names are free).
func reservedError(what, name string) error {
	return fmt.Errorf("%w: %s %q is kept for a multi-acquire queued before this one", refusal.ErrLockHeld, what, name)
}

// grant proposes an acquire and starts timing the new grant's lease.
func (e *engine[C, R]) grant(cmd C) (R, error) {
	res, err := e.s.raft.Apply(cmd)
	if err != nil {
		var zero R
		return zero, err
	}
	r := *res.(*R)
	g := e.p.granted(r)
	e.track(g)
	if !g.existing {
		e.s.metrics.Grants.Inc()
	}
	return r, nil
}

// serve grants the name to queued waiters, head first, while it has room
// (a lock in its lock-delay has none: its waiters wait on). Called with q
// locked.
func (e *engine[C, R]) serve(q *waitq.Queue[C, R], name string) {
	free := func(head C) bool {
		taken, delayed := e.p.closed(e.state(name, "", "", ""), head)
		return !taken && !delayed
	}
	q.Serve(free, func(cmd C) (R, error) {
		r, err := e.grantWaiter(name, cmd)
		return e.p.served(r), err
	}, notLeading)
}

// grantWaiter grants a waiter's cmd by its own entry, unless its holder
// has reached the limits on held grants meanwhile: they were not checked
// when it queued behind a held name (nothing new was held then), so it is
// refused here, after a quorum round, as an acquire without a wait would
// be. A freeing entry does not hand the name to such a waiter (overLimit),
// so this is where it is answered.
func (e *engine[C, R]) grantWaiter(name string, cmd C) (R, error) {
	holder := e.p.holder(cmd)
	if err := e.s.checkGrants(e.state(name, holder, "", ""), holder, false); err != nil {
		var zero R
		return zero, e.s.refuse(err)
	}
	return e.grant(cmd)
}

// deliver answers a waiter that a proposal popped: with the grant the entry
// handed it, timed from now, or why the entry did not.
func (e *engine[C, R]) deliver(w *waitq.Waiter[C, R], next *R, err error) {
	if next == nil {
		var zero R
		w.Answer(zero, err)
		return
	}
	e.track(e.p.granted(*next))
	e.s.metrics.Grants.Inc()
	w.Answer(*next, nil)
}

// renew proves with a quorum round that this node leads and extends the
// grant's deadline on the leader. It writes nothing to the log.
func (e *engine[C, R]) renew(ctx context.Context, name string, token uint64, secret string) (fsm.NameState, error) {
	if err := e.s.awaitLeader(ctx); err != nil {
		return fsm.NameState{}, err
	}
	if err := e.s.raft.VerifyLeader(); err != nil {
		return fsm.NameState{}, err
	}
	st := e.state(name, "", "", "")
	g, ok := st.Grant(token)
	if !ok && e.s.fsm.Revoked(token) {
		return st, e.revokedError(name, token)
	}
	if !ok || !secrets.Equal(g.Secret, secret) {
		return st, e.p.notHeldError(st, token, secret)
	}
	if g.Session != 0 {
		return st, fmt.Errorf("%w: %s %q's grant %d lives as long as session %d: renew the session", refusal.ErrSessionGrant, e.what, name, token, g.Session)
	}
	key := e.p.grantKey(name, token, g.Shared)
	if g.Multi {
		// One name of a multi-grant: its one lease is renewed, for all.
		key = timed.MultiKey(token)
	}
	if !e.s.timers.Renew(key, token) {
		return st, e.p.expiredError(name, token)
	}
	e.s.metrics.Renewals.Inc()
	return st, nil
}

// release ends a grant and hands the name to the head waiter in the same
// entry.
func (e *engine[C, R]) release(ctx context.Context, name string, token uint64, secret string) error {
	if err := e.s.awaitLeader(ctx); err != nil {
		return err
	}
	if e.s.fsm.Revoked(token) {
		// Never current again: no entry could release it.
		return e.s.refuse(e.revokedError(name, token))
	}
	err := e.free(name, token, true, func(next C) entry.Command { return e.p.release(name, token, secret, next) })
	if err == nil {
		e.s.metrics.Releases.Inc()
	}
	return err
}

// expire is called by the timers when a grant's deadline passes.
func (e *engine[C, R]) expire(name string, token uint64) {
	if e.s.awaitLeader(context.Background()) != nil {
		return
	}
	// A grant that asked for a lock-delay hands off to nobody when it
	// expires: its delay runs first, keeping the name (or the semaphore's
	// slot) until its EndDelay.
	g, held := e.state(name, "", "", "").Grant(token)
	handoff := !held || g.LockDelayMillis == 0
	key := e.p.grantKey(name, token, g.Shared)
	err := e.freeIf(name, token, handoff, func() bool { return e.s.timers.Due(key, token) },
		func(next C) entry.Command { return e.p.expire(name, token, next) })
	if e.s.expired(err, key, token, e.what, name) {
		e.s.log.Debug("lease expired", e.what, name, "token", token)
	}
}

// errRestarted: an expiry found its lease restarted after it fired (a
// grant's answer tracked it again, a new leader restarted it): nothing to
// do, as for a grant that ended meanwhile.
var errRestarted = fmt.Errorf("%w: the lease was restarted after its timer fired", refusal.ErrLeaseLost)

// free proposes the command built by mk (a release or an expiry), offering
// the name to the head waiter in the same entry when handoff is set.
func (e *engine[C, R]) free(name string, token uint64, handoff bool, mk func(next C) entry.Command) error {
	return e.freeIf(name, token, handoff, nil, mk)
}

// freeIf is free when due, asked under the name's queue, still holds (an
// expiry's lease not restarted since it fired; nil: always).
func (e *engine[C, R]) freeIf(name string, token uint64, handoff bool, due func() bool, mk func(next C) entry.Command) error {
	h := e.hold(name)
	defer h.Release()
	if due != nil && !due() {
		return errRestarted
	}
	h.Frees(token)
	next := h.Pop(handoff)
	res, err := e.s.raft.Apply(mk(next))
	if err != nil {
		h.Failed()
		return err
	}
	h.Done(res, token)
	return nil
}

// endDelay proposes the end of the lock-delay that started at index since,
// handing the name (the semaphore's slot) to the head waiter in that entry.
// A failed proposal puts the waiter back and is retried soon, unless the
// delay had ended already.
func (e *engine[C, R]) endDelay(name string, since uint64) {
	if e.s.awaitLeader(context.Background()) != nil {
		return
	}
	key := e.p.delayKey(name, since)
	h := e.hold(name)
	defer h.Release()
	if !e.s.timers.Due(key, since) {
		return // restarted at full length by a new leader since it fired
	}
	h.ending = since
	next := h.Pop(true)
	res, err := e.s.raft.Apply(e.p.endDelay(name, since, next))
	switch {
	case errors.Is(err, refusal.ErrLeaseLost):
		h.Failed()
		e.s.timers.Forget(key, since) // ended already
	case err != nil:
		h.Failed()
		e.s.timers.Retry(key, since, 100*time.Millisecond)
		e.s.log.Warn("end of lock-delay failed; will retry", e.what, name, "since", since, "err", err)
	default:
		e.s.timers.Forget(key, since)
		h.Ended(res)
	}
}
