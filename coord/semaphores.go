package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// Semaphores share what locks have on the leader: each permit's lease is in
// the lease timers (permitKey), waiters queue FIFO in the shared queues
// under the semaphore's own name (semPrefix keeps the namespaces apart), and
// a release or expiry hands its permit to the head waiter in the same
// entry. Under the queue's mutex the leader's view of the semaphore is
// exact, so a full semaphore or a limit mismatch is refused with a quorum
// round and no entry.

// semPrefix starts the queue and timer keys of semaphores; names never hold
// a NUL.
const semPrefix = "\x00sem\x00"

func semQueue(name string) string { return semPrefix + name }

func permitKey(name string, token uint64) string {
	return semPrefix + name + "\x00" + strconv.FormatUint(token, 10)
}

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
		return fsm.PermitResult{}, fmt.Errorf("%w: semaphores need log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatCoord, f)
	}
	if f := s.raft.EntryFormat(); req.LockDelay > 0 && f < entry.LogFormatPermitDelay {
		return fsm.PermitResult{}, fmt.Errorf("%w: a semaphore permit's lock-delay needs log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatPermitDelay, f)
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
		NowMillis: s.cfg.Clock.Now().UnixMilli(),
		Principal: req.Principal,

		LockDelayMillis: req.LockDelay.Milliseconds(),
	}
	qname := semQueue(req.Semaphore)
	q := s.queues.get(qname)
	defer s.queues.put(qname, q)

	q.mu.Lock()
	st := s.fsm.Semaphore(req.Semaphore)
	retry := s.fsm.SemRequestGranted(req.Semaphore, req.Holder, req.RequestID, req.Principal)
	full := st.Limit != 0 && len(st.Permits)+len(st.Delays) >= st.Limit
	var refusal error
	switch {
	case retry:
	case st.Limit != 0 && st.Limit != req.Limit:
		refusal = &fsm.LimitError{Semaphore: req.Semaphore, Limit: st.Limit, Asked: req.Limit, Held: len(st.Permits)}
	case full && req.Wait <= 0 && len(st.Permits) < st.Limit:
		// Free but for slots in their lock-delay: when to retry.
		refusal = s.slotDelayed(st)
	case full && req.Wait <= 0:
		refusal = &fsm.FullError{Semaphore: req.Semaphore, Held: len(st.Permits), Limit: st.Limit}
	}
	if refusal != nil {
		err := s.raft.VerifyLeader()
		q.mu.Unlock()
		if err != nil {
			return fsm.PermitResult{}, err
		}
		return fsm.PermitResult{}, refusal
	}
	if !retry && !full {
		// Permits count against the cluster's limit on held locks: each
		// is a grant the leader tracks.
		if locks, _ := s.fsm.LockCount(req.Holder); locks+s.fsm.PermitCount() >= s.cfg.MaxLocks {
			q.mu.Unlock()
			return fsm.PermitResult{}, fmt.Errorf("%w: %d locks and permits held in all (limit %d)", ErrTooManyLocks, locks+s.fsm.PermitCount(), s.cfg.MaxLocks)
		}
	}
	queueing := req.Wait > 0 && !retry && (full || q.waiters.Len() > 0)
	if queueing && (q.waiters.Len() >= s.cfg.MaxWaitersPerLock || s.queues.queued.Load() >= int64(s.cfg.MaxWaiters)) {
		q.mu.Unlock()
		return fsm.PermitResult{}, fmt.Errorf("%w: semaphore %q has %d waiters, %d in all (limits %d and %d)", ErrTooManyWaiters,
			req.Semaphore, q.waiters.Len(), s.queues.queued.Load(), s.cfg.MaxWaitersPerLock, s.cfg.MaxWaiters)
	}
	if !queueing {
		res, err := s.grantPermit(cmd)
		q.mu.Unlock()
		return res, err
	}
	w := &waiter{sem: cmd, result: make(chan waitResult, 1)}
	q.pushBack(w)
	if !full {
		s.serveSemWaiters(q, req.Semaphore)
	}
	q.mu.Unlock()
	return s.waitPermit(ctx, q, w, req)
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
		s.metrics.grants.Inc()
	}
	return *r, nil
}

func (s *Service) trackPermit(p entry.Permit) {
	s.leases.Track(permitKey(p.Semaphore, p.Token), p.Token, time.Duration(p.TTLMillis)*time.Millisecond)
}

// waitPermit blocks a queued caller until its permit arrives, its wait
// ends, or the service stops.
func (s *Service) waitPermit(ctx context.Context, q *queue, w *waiter, req PermitRequest) (fsm.PermitResult, error) {
	waited := make(chan struct{})
	timer := s.cfg.Clock.AfterFunc(req.Wait, func() { close(waited) })
	defer timer.Stop()
	select {
	case r := <-w.result:
		return r.permit, r.err
	case <-waited:
	case <-ctx.Done():
	case <-s.stop:
	}
	q.mu.Lock()
	if w.taken {
		q.mu.Unlock()
		r := <-w.result
		return r.permit, r.err
	}
	q.remove(w)
	defer q.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fsm.PermitResult{}, err
	}
	// As an acquire without a wait would (see Service.wait): full, proven
	// by a quorum round, or a permit, rather than "full" with a permit free.
	if st := s.fsm.Semaphore(req.Semaphore); st.Limit != 0 && len(st.Permits) >= st.Limit {
		if err := s.raft.VerifyLeader(); err != nil {
			return fsm.PermitResult{}, err
		}
		return fsm.PermitResult{}, &fsm.FullError{Semaphore: req.Semaphore, Held: len(st.Permits), Limit: st.Limit}
	}
	return s.grantPermit(w.sem)
}

// serveSemWaiters grants free permits to queued waiters, head first.
// Called with q.mu held.
func (s *Service) serveSemWaiters(q *queue, name string) {
	for {
		if st := s.fsm.Semaphore(name); st.Limit != 0 && len(st.Permits)+len(st.Delays) >= st.Limit {
			return
		}
		w := q.pop()
		if w == nil {
			return
		}
		res, err := s.grantPermit(w.sem)
		w.result <- waitResult{permit: res, err: err}
		if errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrNoLeader) || errors.Is(err, cluster.ErrOutcomeUnknown) {
			return
		}
	}
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
	if !ok || !fsm.LeaseEqual(p.Lease, secret) {
		return entry.Permit{}, fmt.Errorf("%w: semaphore %q has no permit with token %d and that lease", fsm.ErrLeaseLost, name, token)
	}
	if !s.leases.Renew(permitKey(name, token), token) {
		return entry.Permit{}, fmt.Errorf("%w: semaphore %q's permit %d: its lease expired", fsm.ErrLeaseLost, name, token)
	}
	s.metrics.renewals.Inc()
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
		s.metrics.releases.Inc()
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
	switch {
	case err == nil:
		s.metrics.expirations.Inc()
	case errors.Is(err, fsm.ErrLeaseLost):
	default:
		s.log.Warn("permit expire proposal failed; will retry", "semaphore", name, "token", token, "err", err)
		s.leases.Retry(permitKey(name, token), token, 100*time.Millisecond)
	}
}

func (s *Service) freePermit(name string, token uint64, offer bool, mk func(next *entry.SemAcquire) entry.Command) error {
	qname := semQueue(name)
	q := s.queues.get(qname)
	defer s.queues.put(qname, q)
	q.mu.Lock()
	defer q.mu.Unlock()
	var w *waiter
	if offer {
		w = q.pop()
	}
	var next *entry.SemAcquire
	if w != nil {
		next = w.sem
		next.NowMillis = s.cfg.Clock.Now().UnixMilli()
	}
	res, err := s.raft.Apply(mk(next))
	if err != nil {
		if w != nil {
			q.pushFront(w)
		}
		return err
	}
	r := res.(*fsm.SemReleaseResult)
	s.leases.Forget(permitKey(name, token), token)
	if r.Delay != nil {
		s.leases.Track(slotDelayKey(name, r.Delay.Since), r.Delay.Since, time.Duration(r.Delay.Millis)*time.Millisecond)
	}
	if w != nil {
		s.deliverPermit(w, r.Next, r.NextErr)
	}
	s.serveSemWaiters(q, name)
	return nil
}

// deliverPermit answers a waiter that a proposal popped: with the permit
// handed to it, tracked from now, or why the handoff failed.
func (s *Service) deliverPermit(w *waiter, next *fsm.PermitResult, err error) {
	if next == nil {
		w.result <- waitResult{err: err}
		return
	}
	s.trackPermit(next.Permit)
	s.metrics.grants.Inc()
	w.result <- waitResult{permit: *next}
}

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
	out := SemaphoreStatus{Name: st.Name, Limit: st.Limit, Waiters: s.Waiters(semQueue(st.Name))}
	for _, d := range st.Delays {
		left, known := s.leases.Remaining(slotDelayKey(st.Name, d.Since), d.Since)
		if !known {
			left = time.Duration(d.Millis) * time.Millisecond
		}
		out.Delays = append(out.Delays, SlotDelayStatus{Since: d.Since, Remaining: left})
	}
	for _, p := range st.Permits {
		ps := PermitStatus{Permit: p}
		ps.Remaining, ps.Known = s.leases.Remaining(permitKey(p.Semaphore, p.Token), p.Token)
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
