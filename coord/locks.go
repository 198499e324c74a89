package coord

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"iter"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
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

// principalRequestID is the request id an entry without a principal carries
// for principal's request id: a hash of both, in the form of a request id
// (wire.LeaseSecretLen hex characters).
func principalRequestID(principal, requestID string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + requestID))
	return hex.EncodeToString(sum[:wire.LeaseSecretLen/2])
}

// newLeaseSecret returns the secret of a new grant of lock name,
// wire.LeaseSecretLen hex characters (fsm/secrets; tested).
func newLeaseSecret(name string) string {
	var random [secrets.RandomLen]byte
	if _, err := rand.Read(random[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return secrets.New(name, random)
}

// Acquire grants the lock, queueing for up to req.Wait if it is held. The
// token is the log index of the entry that granted it. A retry with the
// request id of an earlier grant gets that grant back (Existing); a request
// id is its principal's.
func (s *Service) Acquire(ctx context.Context, req AcquireRequest) (fsm.AcquireResult, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return fsm.AcquireResult{}, err
	}
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	if s.raft.EntryFormat() < entry.LogFormatPrincipal {
		// The entry will carry no principal (a member runs a build from
		// before it), yet a request id stays its principal's: the entry
		// carries one derived from both, so that another principal's
		// replay is a new request whatever the format, and the caller is
		// answered with its own.
		asked, principal := req.RequestID, req.Principal
		req.Principal = ""
		if principal != "" {
			req.RequestID = principalRequestID(principal, asked)
			res, err := s.acquire(ctx, req)
			if res.Grant.RequestID == req.RequestID {
				res.Grant.RequestID = asked
			}
			return res, err
		}
	}
	return s.acquire(ctx, req)
}

// acquire is Acquire once the request id is settled.
//
// It is long because the order of its steps under the name's queue is the
// handoff guarantee (DESIGN.md, "One proposal at a time per name"); it reads
// best in one piece.
func (s *Service) acquire(ctx context.Context, req AcquireRequest) (fsm.AcquireResult, error) {
	if f := s.raft.EntryFormat(); (req.LockDelay > 0 || req.Value != "") && f < entry.LogFormatCoord {
		// Refused before it could queue: no entry could carry it.
		return fsm.AcquireResult{}, s.refuse(fmt.Errorf("%w: a lock-delay or a value needs log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatCoord, f))
	}
	cmd := &entry.Acquire{
		Lock:      req.Lock,
		Holder:    req.Holder,
		Lease:     newLeaseSecret(req.Lock),
		TTLMillis: req.TTL.Milliseconds(),
		RequestID: req.RequestID,
		NowMillis: s.nowMillis(),
		Principal: req.Principal,

		LockDelayMillis: req.LockDelay.Milliseconds(),
		Value:           req.Value,
	}
	q := s.lockQueues.Get(req.Lock)
	defer s.lockQueues.Put(req.Lock, q)

	q.Lock()
	cur, held := s.fsm.Lock(req.Lock)
	retry := s.fsm.RequestGranted(req.Lock, req.Holder, req.RequestID, req.Principal)
	var delayErr error
	if !held && !retry {
		delayErr = s.delayed(req.Lock)
	}
	queueing := req.Wait > 0 && !retry && (held || delayErr != nil || q.Len() > 0)
	if delayErr != nil && req.Wait <= 0 {
		err := s.refuse(delayErr)
		q.Unlock()
		return fsm.AcquireResult{}, err
	}
	if held && !retry && req.Wait <= 0 {
		// Refuse without writing the log. Under the queue's mutex, this
		// leader's view of the lock is exact; a quorum round proves it
		// still leads.
		err := s.refuse(&refusal.HeldError{Lock: req.Lock, Holder: cur.Holder, Token: cur.Token})
		q.Unlock()
		return fsm.AcquireResult{}, err
	}
	err := s.checkGrants(req.Holder, held || retry)
	if err == nil && queueing {
		err = s.checkWaiters(q.Len(), "lock", req.Lock)
	}
	if err != nil {
		err = s.refuse(err)
		q.Unlock()
		return fsm.AcquireResult{}, err
	}
	if !queueing {
		res, err := s.grant(cmd)
		q.Unlock()
		return res, err
	}
	w := q.Push(cmd)
	if !held {
		s.serveWaiters(q, req.Lock)
	}
	q.Unlock()
	ended, stop := s.waitFor(req.Wait)
	defer stop()
	return q.Wait(ctx, w, ended, s.stop, func() (fsm.AcquireResult, error) {
		// Answer as an acquire without a wait would, under the queue's
		// mutex: held, proven by a quorum round (a leader paused past its
		// term still sees the grant its successor released); in its
		// lock-delay; or free, then granted. A free lock once answered
		// lock_held naming nobody with token 0, a grant that never existed
		// (the chaos suite's lock checker caught it on a leader resumed
		// after a SIGSTOP): the lock had been released, by its successor,
		// as the wait ended.
		if cur, held := s.fsm.Lock(req.Lock); held {
			return fsm.AcquireResult{}, s.refuse(&refusal.HeldError{Lock: req.Lock, Holder: cur.Holder, Token: cur.Token})
		}
		if err := s.delayed(req.Lock); err != nil {
			return fsm.AcquireResult{}, err
		}
		return s.grant(cmd)
	})
}

// checkGrants refuses a new grant to holder, a lock or a permit, beyond the
// limits on held grants (--max-locks, --max-locks-per-holder), which count
// locks and semaphore permits together: each is a lease the leader times.
// None when nothing new would be held (the lock is held, the semaphore
// full, or the request was granted before).
func (s *Service) checkGrants(holder string, nothingNew bool) error {
	c := s.cfg
	if nothingNew {
		return nil
	}
	if total, mine := s.fsm.GrantCount(holder); total >= c.MaxLocks || mine >= c.MaxLocksPerHolder {
		return fmt.Errorf("%w: %d locks and permits held in all, %d by %q (limits %d and %d)", ErrTooManyLocks,
			total, mine, holder, c.MaxLocks, c.MaxLocksPerHolder)
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
	s.leases.Track(r.Grant.Name, r.Grant.Token, millis(r.Grant.TTLMillis))
	if !r.Existing {
		s.metrics.Grants.Inc()
	}
	return *r, nil
}

// serveWaiters grants a free lock to queued waiters, head first, until one
// of them gets it. A lock in its lock-delay is not free: its waiters wait
// on. Called with q locked.
func (s *Service) serveWaiters(q *lockQueue, name string) {
	free := func() bool {
		_, held := s.fsm.Lock(name)
		_, delayed := s.fsm.Delay(name)
		return !held && !delayed
	}
	q.Serve(free, func(cmd *entry.Acquire) (fsm.AcquireResult, error) {
		res, err := s.grant(cmd)
		return fsm.AcquireResult{Grant: res.Grant}, err
	}, notLeading)
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
	if !held || cur.Token != token || !secrets.Equal(cur.Lease, secret) {
		return entry.Lock{}, refusal.LeaseRefused(name, cur.Token, token, secret)
	}
	if !s.leases.Renew(name, token) {
		return entry.Lock{}, fmt.Errorf("%w: lock %q's grant with token %d: its lease expired", refusal.ErrLeaseLost, name, token)
	}
	s.metrics.Renewals.Inc()
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
		s.metrics.Releases.Inc()
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
	if s.expired(err, name, token, "lock", name) {
		s.log.Debug("lease expired", "lock", name, "token", token)
	}
}

// free proposes the command built by mk (a Release or Expire), offering the
// lock to the head waiter in the same entry when handoff is set.
func (s *Service) free(name string, token uint64, handoff bool, mk func(next *entry.Acquire) entry.Command) error {
	q := s.lockQueues.Get(name)
	defer s.lockQueues.Put(name, q)
	q.Lock()
	defer q.Unlock()
	var r *fsm.ReleaseResult
	w, err := q.HandOver(handoff, func(next *entry.Acquire) error {
		if next != nil {
			next.NowMillis = s.nowMillis()
		}
		res, err := s.raft.Apply(mk(next))
		if err == nil {
			r = res.(*fsm.ReleaseResult)
		}
		return err
	})
	if err != nil {
		return err
	}
	s.leases.Forget(name, token)
	if r.Delay != nil {
		s.leases.Track(timed.DelayKey(name), r.Delay.Since, millis(r.Delay.Millis))
	}
	if w != nil {
		s.handoff(name, w, r.Next, r.NextErr)
	}
	s.serveWaiters(q, name)
	return nil
}

// handoff answers a popped waiter with the grant an entry handed it (and
// starts its lease), or with why it did not get one.
func (s *Service) handoff(name string, w *lockWaiter, next *entry.Lock, nextErr error) {
	if next == nil {
		w.Answer(fsm.AcquireResult{}, nextErr)
		return
	}
	s.leases.Track(name, next.Token, millis(next.TTLMillis))
	s.metrics.Grants.Inc()
	w.Answer(fsm.AcquireResult{Grant: *next}, nil)
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
	st := LockStatus{Lock: cur, Held: held, Waiters: s.lockQueues.QueuedFor(name)}
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
			st := LockStatus{Lock: l, Held: true, Waiters: s.lockQueues.QueuedFor(l.Name)}
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
	q := s.lockQueues.Get(name)
	defer s.lockQueues.Put(name, q)
	q.Lock()
	defer q.Unlock()
	return q.Len()
}

// Proclaim changes the value a held lock publishes (an election leader's
// address, say): a log write under the lock's queue; the token is
// unchanged. A grant that is not current is refusal.ErrLeaseLost.
func (s *Service) Proclaim(ctx context.Context, name string, token uint64, secret, value string) (entry.Lock, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return entry.Lock{}, err
	}
	q := s.lockQueues.Get(name)
	defer s.lockQueues.Put(name, q)
	q.Lock()
	defer q.Unlock()
	res, err := s.raft.Apply(&entry.SetValue{Lock: name, Token: token, Lease: secret, Value: value})
	if err != nil {
		return entry.Lock{}, err
	}
	return res.(*fsm.SetValueResult).Grant, nil
}
