package coord

import (
	"context"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
)

// Semaphores share what locks have on the leader: each permit's lease is in
// the lease timers (timed.PermitKey), waiters queue FIFO in a table of queues of
// their own (permitQueues), and a release or expiry hands its permit to the
// head waiter in the same entry. Under the queue's mutex the leader's view
// of the semaphore is exact, so a full semaphore or a limit mismatch is
// refused with a quorum round and no entry.

// PermitRequest asks for one permit of a semaphore.
type PermitRequest struct {
	Semaphore string
	Holder    string
	Limit     int
	TTL       time.Duration
	Wait      time.Duration
	RequestID string
	Principal string
	// LockDelay, when set, keeps the permit's slot from anybody for that
	// long after this permit ends by expiry, as a lock's (delay.go). At
	// most MaxLockDelay.
	LockDelay time.Duration
}

// AcquirePermit grants a permit, queueing for up to req.Wait while the
// semaphore is full. A limit other than the held permits' is refused at
// once.
//
// It is long for the reason Acquire is: its steps under the name's queue are
// the guarantee, in order.
func (s *Service) AcquirePermit(ctx context.Context, req PermitRequest) (fsm.PermitResult, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return fsm.PermitResult{}, err
	}
	if f := s.raft.EntryFormat(); f < entry.LogFormatCoord {
		return fsm.PermitResult{}, s.refuse(fmt.Errorf("%w: semaphores need log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatCoord, f))
	}
	if f := s.raft.EntryFormat(); req.LockDelay > 0 && f < entry.LogFormatPermitDelay {
		return fsm.PermitResult{}, s.refuse(fmt.Errorf("%w: a semaphore permit's lock-delay needs log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatPermitDelay, f))
	}
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	cmd := &entry.SemAcquire{
		Semaphore: req.Semaphore,
		Holder:    req.Holder,
		Lease:     newLeaseSecret(req.Semaphore),
		TTLMillis: req.TTL.Milliseconds(),
		Limit:     req.Limit,
		RequestID: req.RequestID,
		NowMillis: s.nowMillis(),
		Principal: req.Principal,

		LockDelayMillis: req.LockDelay.Milliseconds(),
	}
	q := s.permitQueues.Get(req.Semaphore)
	defer s.permitQueues.Put(req.Semaphore, q)

	q.Lock()
	st := s.fsm.Semaphore(req.Semaphore)
	retry := s.fsm.SemRequestGranted(req.Semaphore, req.Holder, req.RequestID, req.Principal)
	full := st.Limit != 0 && len(st.Permits)+len(st.Delays) >= st.Limit
	var refused error
	switch {
	case retry:
	case st.Limit != 0 && st.Limit != req.Limit:
		refused = &refusal.LimitError{Semaphore: req.Semaphore, Limit: st.Limit, Asked: req.Limit, Held: len(st.Permits)}
	case full && req.Wait <= 0 && len(st.Permits) < st.Limit:
		// Free but for slots in their lock-delay: when to retry.
		refused = s.slotDelayed(st)
	case full && req.Wait <= 0:
		refused = &refusal.FullError{Semaphore: req.Semaphore, Held: len(st.Permits), Limit: st.Limit}
	}
	if refused != nil {
		err := s.refuse(refused)
		q.Unlock()
		return fsm.PermitResult{}, err
	}
	queueing := req.Wait > 0 && !retry && (full || q.Len() > 0)
	err := s.checkGrants(req.Holder, retry || full)
	if err == nil && queueing {
		err = s.checkWaiters(q.Len(), "semaphore", req.Semaphore)
	}
	if err != nil {
		err = s.refuse(err)
		q.Unlock()
		return fsm.PermitResult{}, err
	}
	if !queueing {
		res, err := s.grantPermit(cmd)
		q.Unlock()
		return res, err
	}
	w := q.Push(cmd)
	if !full {
		s.serveSemWaiters(q, req.Semaphore)
	}
	q.Unlock()
	ended, stop := s.waitFor(req.Wait)
	defer stop()
	return q.Wait(ctx, w, ended, s.stop, func() (fsm.PermitResult, error) {
		// As an acquire without a wait would (see Acquire): full, proven
		// by a quorum round, or a permit, rather than "full" with a permit
		// free.
		if st := s.fsm.Semaphore(req.Semaphore); st.Limit != 0 && len(st.Permits) >= st.Limit {
			return fsm.PermitResult{}, s.refuse(&refusal.FullError{Semaphore: req.Semaphore, Held: len(st.Permits), Limit: st.Limit})
		}
		return s.grantPermit(cmd)
	})
}

// grantPermit proposes a permit and starts its lease.
func (s *Service) grantPermit(cmd *entry.SemAcquire) (fsm.PermitResult, error) {
	res, err := s.raft.Apply(cmd)
	if err != nil {
		return fsm.PermitResult{}, err
	}
	r := res.(*fsm.PermitResult)
	s.trackPermit(r.Permit)
	if !r.Existing {
		s.metrics.Grants.Inc()
	}
	return *r, nil
}

func (s *Service) trackPermit(p entry.Permit) {
	s.leases.Track(timed.PermitKey(p.Semaphore, p.Token), p.Token, millis(p.TTLMillis))
}

// serveSemWaiters grants free permits to queued waiters, head first.
// Called with q locked.
func (s *Service) serveSemWaiters(q *permitQueue, name string) {
	free := func() bool {
		st := s.fsm.Semaphore(name)
		return st.Limit == 0 || len(st.Permits)+len(st.Delays) < st.Limit
	}
	q.Serve(free, s.grantPermit, notLeading)
}

// RenewPermit extends a permit's lease on the leader, as Renew a lock's.
func (s *Service) RenewPermit(ctx context.Context, name string, token uint64, secret string) (entry.Permit, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return entry.Permit{}, err
	}
	if err := s.raft.VerifyLeader(); err != nil {
		return entry.Permit{}, err
	}
	p, ok := heldPermit(s.fsm.Semaphore(name), token)
	if !ok || !secrets.Equal(p.Lease, secret) {
		return entry.Permit{}, fmt.Errorf("%w: semaphore %q has no permit with token %d and that lease", refusal.ErrLeaseLost, name, token)
	}
	if !s.leases.Renew(timed.PermitKey(name, token), token) {
		return entry.Permit{}, fmt.Errorf("%w: semaphore %q's permit %d: its lease expired", refusal.ErrLeaseLost, name, token)
	}
	s.metrics.Renewals.Inc()
	return p, nil
}

func heldPermit(st fsm.SemaphoreState, token uint64) (entry.Permit, bool) {
	for _, p := range st.Permits {
		if p.Token == token {
			return p, true
		}
	}
	return entry.Permit{}, false
}

// ReleasePermit ends a permit and hands it to the head waiter in the same
// entry.
func (s *Service) ReleasePermit(ctx context.Context, name string, token uint64, secret string) error {
	if err := s.awaitLeader(ctx); err != nil {
		return err
	}
	err := s.freePermit(name, token, true, func(next *entry.SemAcquire) entry.Command {
		return &entry.SemRelease{Semaphore: name, Token: token, Lease: secret, Next: next}
	})
	if err == nil {
		s.metrics.Releases.Inc()
	}
	return err
}

// expirePermit is called by the lease timers when a permit's deadline
// passes.
func (s *Service) expirePermit(name string, token uint64) {
	if s.awaitLeader(context.Background()) != nil {
		return
	}
	// A permit with a lock-delay hands its slot to nobody: the delay
	// starts in the expiry and keeps the slot until its EndDelay.
	p, held := heldPermit(s.fsm.Semaphore(name), token)
	offer := !held || p.LockDelayMillis == 0
	err := s.freePermit(name, token, offer, func(next *entry.SemAcquire) entry.Command {
		return &entry.SemExpire{Semaphore: name, Token: token, Next: next}
	})
	s.expired(err, timed.PermitKey(name, token), token, "semaphore", name)
}

func (s *Service) freePermit(name string, token uint64, offer bool, mk func(next *entry.SemAcquire) entry.Command) error {
	q := s.permitQueues.Get(name)
	defer s.permitQueues.Put(name, q)
	q.Lock()
	defer q.Unlock()
	var r *fsm.SemReleaseResult
	w, err := q.HandOver(offer, func(next *entry.SemAcquire) error {
		if next != nil {
			next.NowMillis = s.nowMillis()
		}
		res, err := s.raft.Apply(mk(next))
		if err == nil {
			r = res.(*fsm.SemReleaseResult)
		}
		return err
	})
	if err != nil {
		return err
	}
	s.leases.Forget(timed.PermitKey(name, token), token)
	if r.Delay != nil {
		s.leases.Track(timed.SlotDelayKey(name, r.Delay.Since), r.Delay.Since, millis(r.Delay.Millis))
	}
	if w != nil {
		s.deliverPermit(w, r.Next, r.NextErr)
	}
	s.serveSemWaiters(q, name)
	return nil
}

// deliverPermit answers a waiter that a proposal popped: with the permit
// handed to it, tracked from now, or why the handoff failed.
func (s *Service) deliverPermit(w *permitWaiter, next *fsm.PermitResult, err error) {
	if next == nil {
		w.Answer(fsm.PermitResult{}, err)
		return
	}
	s.trackPermit(next.Permit)
	s.metrics.Grants.Inc()
	w.Answer(*next, nil)
}

// permitWaiters counts the callers queued for a semaphore on this node,
// without the name's queue mutex: it is held across proposals, and a
// status read must not wait for one (on a leader whose disk stalled, it
// would wait for good).
func (s *Service) permitWaiters(name string) int { return s.permitQueues.QueuedFor(name) }

// PermitStatus is a held permit as reported to clients (never its secret).
type PermitStatus struct {
	entry.Permit
	Remaining time.Duration
	Known     bool // false on a stale read from a follower
}

// SemaphoreStatus is a semaphore as reported to clients.
type SemaphoreStatus struct {
	Name    string
	Limit   int // 0 when no permit is held or delayed
	Holders []PermitStatus
	// Delays are the permit slots in their lock-delay, with the time left
	// as the leader times it (the full length on a node that does not).
	Delays  []SlotDelayStatus
	Waiters int // queued on this node (the leader)
}

// SlotDelayStatus is one semaphore permit slot in its lock-delay.
type SlotDelayStatus struct {
	Since     uint64 // index of the expiry that started it
	Remaining time.Duration
}

func (s *Service) semStatus(st fsm.SemaphoreState) SemaphoreStatus {
	out := SemaphoreStatus{Name: st.Name, Limit: st.Limit, Waiters: s.permitWaiters(st.Name)}
	for _, d := range st.Delays {
		left, known := s.leases.Remaining(timed.SlotDelayKey(st.Name, d.Since), d.Since)
		if !known {
			left = millis(d.Millis)
		}
		out.Delays = append(out.Delays, SlotDelayStatus{Since: d.Since, Remaining: left})
	}
	for _, p := range st.Permits {
		ps := PermitStatus{Permit: p}
		ps.Remaining, ps.Known = s.leases.Remaining(timed.PermitKey(p.Semaphore, p.Token), p.Token)
		out.Holders = append(out.Holders, ps)
	}
	return out
}

// Semaphore returns a semaphore's permits; linearizable unless stale.
func (s *Service) Semaphore(ctx context.Context, name string, stale bool) (SemaphoreStatus, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return SemaphoreStatus{}, err
		}
	}
	return s.semStatus(s.fsm.Semaphore(name)), nil
}

// Semaphores returns every semaphore with a permit held; linearizable
// unless stale.
func (s *Service) Semaphores(ctx context.Context, stale bool) ([]SemaphoreStatus, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return nil, err
		}
	}
	var out []SemaphoreStatus
	for _, st := range s.fsm.Semaphores() {
		out = append(out, s.semStatus(st))
	}
	return out, nil
}

// CheckPermit reports whether permit token of the semaphore is held.
func (s *Service) CheckPermit(ctx context.Context, name string, token uint64, stale bool) (bool, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return false, err
		}
	}
	_, ok := heldPermit(s.fsm.Semaphore(name), token)
	return ok, nil
}
