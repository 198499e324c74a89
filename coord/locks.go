package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// AcquireRequest asks for a lock.
type AcquireRequest struct {
	Lock      string
	Holder    string
	TTL       time.Duration
	Wait      time.Duration // how long to queue if the lock is held
	RequestID string        // makes retries idempotent; generated when empty
	// Principal is the authenticated caller ("" without an ACL). Its
	// request ids are its own: another principal's replay is a new request.
	Principal string
	// LockDelay, when set, keeps the lock from anybody for that long after
	// this grant ends by expiry (delay.go). At most MaxLockDelay.
	LockDelay time.Duration
	// Value, when set, is published with the grant (elections).
	Value string
}

// newRequestID draws a request id for an acquire that came without one:
// wire.LeaseSecretLen random hex characters.
func newRequestID() string {
	var b [wire.LeaseSecretLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// newLeaseSecret returns the secret of a new grant of lock name,
// wire.LeaseSecretLen hex characters (fsm/secret.go; tested).
func newLeaseSecret(name string) string {
	var random [12]byte
	if _, err := rand.Read(random[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return fsm.NewSecret(name, random)
}

// Acquire grants the lock, queueing for up to req.Wait if it is held. The
// token is the log index of the entry that granted it. A retry with the
// request id of an earlier grant gets that grant back (Existing).
//
// It is long because the order of its steps under the name's queue is the
// handoff guarantee (DESIGN.md, "One proposal at a time per name"); it reads
// best in one piece.
func (s *Service) Acquire(ctx context.Context, req AcquireRequest) (fsm.AcquireResult, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return fsm.AcquireResult{}, err
	}
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	if s.raft.EntryFormat() < entry.LogFormatPrincipal {
		// The entry will carry no principal, so the request is remembered
		// without one, as by the members' older builds.
		req.Principal = ""
	}
	if f := s.raft.EntryFormat(); (req.LockDelay > 0 || req.Value != "") && f < entry.LogFormatCoord {
		// Refused before it could queue: no entry could carry it.
		return fsm.AcquireResult{}, fmt.Errorf("%w: a lock-delay or a value needs log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatCoord, f)
	}
	cmd := &entry.Acquire{
		Lock:      req.Lock,
		Holder:    req.Holder,
		Lease:     newLeaseSecret(req.Lock),
		TTLMillis: req.TTL.Milliseconds(),
		RequestID: req.RequestID,
		NowMillis: s.cfg.Clock.Now().UnixMilli(),
		Principal: req.Principal,

		LockDelayMillis: req.LockDelay.Milliseconds(),
		Value:           req.Value,
	}
	q := s.queues.get(req.Lock)
	defer s.queues.put(req.Lock, q)

	q.mu.Lock()
	cur, held := s.fsm.Lock(req.Lock)
	retry := s.fsm.RequestGranted(req.Lock, req.Holder, req.RequestID, req.Principal)
	var delayErr error
	if !held && !retry {
		delayErr = s.delayed(req.Lock)
	}
	queueing := req.Wait > 0 && !retry && (held || delayErr != nil || q.waiters.Len() > 0)
	if delayErr != nil && req.Wait <= 0 {
		err := s.raft.VerifyLeader()
		q.mu.Unlock()
		if err != nil {
			return fsm.AcquireResult{}, err
		}
		return fsm.AcquireResult{}, delayErr
	}
	if held && !retry && req.Wait <= 0 {
		// Refuse without writing the log. Under the queue's mutex, this
		// leader's view of the lock is exact; a quorum round proves it
		// still leads.
		err := s.raft.VerifyLeader()
		q.mu.Unlock()
		if err != nil {
			return fsm.AcquireResult{}, err
		}
		return fsm.AcquireResult{}, &fsm.HeldError{Lock: req.Lock, Holder: cur.Holder, Token: cur.Token}
	}
	if err := s.checkLimits(q, req, held, retry, queueing); err != nil {
		q.mu.Unlock()
		return fsm.AcquireResult{}, err
	}
	if !queueing {
		res, err := s.grant(cmd)
		q.mu.Unlock()
		return res, err
	}
	w := &waiter{cmd: cmd, result: make(chan waitResult, 1)}
	q.pushBack(w)
	if !held {
		s.serveWaiters(q, req.Lock)
	}
	q.mu.Unlock()
	return s.wait(ctx, q, w, req)
}

// checkLimits refuses a new grant beyond the lock limits and a new waiter
// beyond the queue limits. Called with q.mu held.
func (s *Service) checkLimits(q *queue, req AcquireRequest, held, retry, queueing bool) error {
	c := s.cfg
	if !retry && !held {
		if total, mine := s.fsm.LockCount(req.Holder); total >= c.MaxLocks || mine >= c.MaxLocksPerHolder {
			return fmt.Errorf("%w: %d held in all, %d by %q (limits %d and %d)", ErrTooManyLocks,
				total, mine, req.Holder, c.MaxLocks, c.MaxLocksPerHolder)
		}
	}
	if queueing && (q.waiters.Len() >= c.MaxWaitersPerLock || s.queues.queued.Load() >= int64(c.MaxWaiters)) {
		return fmt.Errorf("%w: lock %q has %d waiters, %d in all (limits %d and %d)", ErrTooManyWaiters,
			req.Lock, q.waiters.Len(), s.queues.queued.Load(), c.MaxWaitersPerLock, c.MaxWaiters)
	}
	return nil
}

// grant proposes an acquire and starts the new grant's lease.
func (s *Service) grant(cmd *entry.Acquire) (fsm.AcquireResult, error) {
	res, err := s.raft.Apply(cmd)
	if err != nil {
		return fsm.AcquireResult{}, err
	}
	r := res.(*fsm.AcquireResult)
	s.leases.Track(r.Grant.Name, r.Grant.Token, time.Duration(r.Grant.TTLMillis)*time.Millisecond)
	if !r.Existing {
		s.metrics.grants.Inc()
	}
	return *r, nil
}

// wait blocks a queued caller until its grant arrives, its wait ends, or
// the service stops.
func (s *Service) wait(ctx context.Context, q *queue, w *waiter, req AcquireRequest) (fsm.AcquireResult, error) {
	waited := make(chan struct{})
	timer := s.cfg.Clock.AfterFunc(req.Wait, func() { close(waited) })
	defer timer.Stop()
	select {
	case r := <-w.result:
		return fsm.AcquireResult{Grant: r.grant}, r.err
	case <-waited:
	case <-ctx.Done():
	case <-s.stop:
	}
	q.mu.Lock()
	if w.taken {
		// A proposal popped this waiter; its result is on the way and,
		// being a grant, must not be dropped.
		q.mu.Unlock()
		r := <-w.result
		return fsm.AcquireResult{Grant: r.grant}, r.err
	}
	q.remove(w)
	defer q.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fsm.AcquireResult{}, err
	}
	// Answer as an acquire without a wait would, under the queue's mutex:
	// held, proven by a quorum round (a leader paused past its term still
	// sees the grant its successor released); in its lock-delay; or free,
	// then granted. A free lock once answered lock_held naming nobody with
	// token 0, a grant that never existed (the chaos suite's lock checker
	// caught it on a leader resumed after a SIGSTOP): the lock had been
	// released, by its successor, as the wait ended.
	cur, held := s.fsm.Lock(req.Lock)
	if held {
		if err := s.raft.VerifyLeader(); err != nil {
			return fsm.AcquireResult{}, err
		}
		return fsm.AcquireResult{}, &fsm.HeldError{Lock: req.Lock, Holder: cur.Holder, Token: cur.Token}
	}
	if err := s.delayed(req.Lock); err != nil {
		return fsm.AcquireResult{}, err
	}
	return s.grant(w.cmd)
}

// serveWaiters grants a free lock to queued waiters, head first, until one of
// them gets it. A lock in its lock-delay is not free: its waiters wait on.
// Called with q.mu held.
func (s *Service) serveWaiters(q *queue, name string) {
	for {
		if _, held := s.fsm.Lock(name); held {
			return
		}
		if _, delayed := s.fsm.Delay(name); delayed {
			return
		}
		w := q.pop()
		if w == nil {
			return
		}
		res, err := s.grant(w.cmd)
		w.result <- waitResult{grant: res.Grant, err: err}
		if err == nil || errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrNoLeader) || errors.Is(err, cluster.ErrOutcomeUnknown) {
			return
		}
	}
}

// Renew confirms leadership with a quorum round and extends the lease's
// deadline on the leader. It writes nothing to the log.
func (s *Service) Renew(ctx context.Context, name string, token uint64, secret string) (entry.Lock, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return entry.Lock{}, err
	}
	if err := s.raft.VerifyLeader(); err != nil {
		return entry.Lock{}, err
	}
	cur, held := s.fsm.Lock(name)
	if !held || cur.Token != token || !fsm.LeaseEqual(cur.Lease, secret) {
		return entry.Lock{}, fsm.LeaseRefused(name, cur.Token, token, secret)
	}
	if !s.leases.Renew(name, token) {
		return entry.Lock{}, fmt.Errorf("%w: lock %q's grant with token %d: its lease expired", fsm.ErrLeaseLost, name, token)
	}
	s.metrics.renewals.Inc()
	return cur, nil
}

// Release frees the lock and hands it to the head waiter in the same entry.
func (s *Service) Release(ctx context.Context, name string, token uint64, secret string) error {
	if err := s.awaitLeader(ctx); err != nil {
		return err
	}
	err := s.free(name, token, true, func(next *entry.Acquire) entry.Command {
		return &entry.Release{Lock: name, Token: token, Lease: secret, Next: next}
	})
	if err == nil {
		s.metrics.releases.Inc()
	}
	return err
}

// expire is called by the lease timers when a deadline passes.
func (s *Service) expire(name string, token uint64) {
	if s.awaitLeader(context.Background()) != nil {
		return
	}
	// A grant that asked for a lock-delay hands off to nobody when it
	// expires: its delay runs first (delay.go).
	cur, held := s.fsm.Lock(name)
	handoff := !held || cur.Token != token || cur.LockDelayMillis == 0
	err := s.free(name, token, handoff, func(next *entry.Acquire) entry.Command {
		return &entry.Expire{Lock: name, Token: token, Next: next}
	})
	switch {
	case err == nil:
		s.metrics.expirations.Inc()
		s.log.Debug("lease expired", "lock", name, "token", token)
	case errors.Is(err, fsm.ErrLeaseLost):
		// Released or superseded meanwhile: nothing to do.
	default:
		s.log.Warn("expire proposal failed; will retry", "lock", name, "token", token, "err", err)
		s.leases.Retry(name, token, 100*time.Millisecond)
	}
}

// free proposes the command built by mk (a Release or Expire), offering the
// lock to the head waiter in the same entry when handoff is set.
func (s *Service) free(name string, token uint64, handoff bool, mk func(next *entry.Acquire) entry.Command) error {
	q := s.queues.get(name)
	defer s.queues.put(name, q)
	q.mu.Lock()
	defer q.mu.Unlock()
	var w *waiter
	if handoff {
		w = q.pop()
	}
	var next *entry.Acquire
	if w != nil {
		next = w.cmd
		next.NowMillis = s.cfg.Clock.Now().UnixMilli()
	}
	res, err := s.raft.Apply(mk(next))
	if err != nil {
		if w != nil {
			q.pushFront(w)
		}
		return err
	}
	r := res.(*fsm.ReleaseResult)
	s.leases.Forget(name, token)
	if r.Delay != nil {
		s.leases.Track(delayKey(name), r.Delay.Since, time.Duration(r.Delay.Millis)*time.Millisecond)
	}
	if w != nil {
		s.handoff(name, w, r.Next, r.NextErr)
	}
	s.serveWaiters(q, name)
	return nil
}

// handoff answers a popped waiter with the grant an entry handed it (and
// starts its lease), or with why it did not get one.
func (s *Service) handoff(name string, w *waiter, next *entry.Lock, nextErr error) {
	if next == nil {
		w.result <- waitResult{err: nextErr}
		return
	}
	s.leases.Track(name, next.Token, time.Duration(next.TTLMillis)*time.Millisecond)
	s.metrics.grants.Inc()
	w.result <- waitResult{grant: *next}
}

// LockStatus is a lock as reported to clients (never the grant's secret).
type LockStatus struct {
	entry.Lock
	Held bool
	// Remaining is the leader's view of the lease's time left; Known is
	// false on a stale read from a follower.
	Remaining time.Duration
	Known     bool
	// DelayRemaining is the time left of the lock's running lock-delay
	// (Delayed), as the leader times it.
	Delayed        bool
	DelayRemaining time.Duration
	// Waiters counts the acquires queued for the lock on this node (the
	// leader queues them).
	Waiters int
}

// Lock returns a lock's state; linearizable unless stale.
func (s *Service) Lock(ctx context.Context, name string, stale bool) (LockStatus, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return LockStatus{}, err
		}
	}
	cur, held := s.fsm.Lock(name)
	st := LockStatus{Lock: cur, Held: held, Waiters: s.queues.queuedFor(name)}
	st.Name = name
	if held {
		st.Remaining, st.Known = s.leases.Remaining(name, cur.Token)
	} else {
		st.DelayRemaining, st.Delayed = s.DelayRemaining(name)
	}
	return st, nil
}

// Locks returns the log index of one moment (a watch from it continues the
// list with no gap) and every lock held then, sorted by name, as a sequence
// that builds each lock's status as it is read, so that a million locks can
// be streamed without a copy of the list; linearizable unless stale.
func (s *Service) Locks(ctx context.Context, stale bool) (iter.Seq[LockStatus], uint64, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return nil, 0, err
		}
	}
	index, locks := s.fsm.LocksAt()
	return func(yield func(LockStatus) bool) {
		for l := range locks {
			st := LockStatus{Lock: l, Held: true, Waiters: s.queues.queuedFor(l.Name)}
			st.Remaining, st.Known = s.leases.Remaining(l.Name, l.Token)
			if !yield(st) {
				return
			}
		}
	}, index, nil
}

// Check reports whether token is the lock's live grant, and the current
// token (0 when the lock is free).
func (s *Service) Check(ctx context.Context, name string, token uint64, stale bool) (bool, uint64, error) {
	st, err := s.Lock(ctx, name, stale)
	if err != nil {
		return false, 0, err
	}
	if !st.Held {
		return false, 0, nil
	}
	return st.Token == token, st.Token, nil
}

// Waiters returns how many callers are queued for a lock on this node.
func (s *Service) Waiters(name string) int {
	q := s.queues.get(name)
	defer s.queues.put(name, q)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiters.Len()
}

// Proclaim changes the value a held lock publishes (an election leader's
// address, say): a log write under the lock's queue; the token is
// unchanged. A grant that is not current is fsm.ErrLeaseLost.
func (s *Service) Proclaim(ctx context.Context, name string, token uint64, secret, value string) (entry.Lock, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return entry.Lock{}, err
	}
	q := s.queues.get(name)
	defer s.queues.put(name, q)
	q.mu.Lock()
	defer q.mu.Unlock()
	res, err := s.raft.Apply(&entry.SetValue{Lock: name, Token: token, Lease: secret, Value: value})
	if err != nil {
		return entry.Lock{}, err
	}
	return res.(*fsm.SetValueResult).Grant, nil
}
