package coord

import (
	"context"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// A semaphore is a policy of the grant engine (engine.go): up to its limit
// of holders at once, each permit timed under timed.PermitKey and each
// slot's lock-delay under timed.SlotDelayKey. Under the queue's mutex the
// leader's view of the semaphore is exact, so a full semaphore or a limit
// mismatch is refused with a quorum round and no entry.

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
	// Session and SessionLease, when set, acquire the permit under a live
	// session (sessions.go) instead of with a TTL of its own.
	Session      uint64
	SessionLease string
	// Durable keeps the waiter's place in the log, as a lock's.
	Durable bool
}

// AcquirePermit grants a permit, queueing for up to req.Wait while the
// semaphore is full. A limit other than the held permits' is refused at
// once.
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
	if err := s.durableFormat(req.Durable); err != nil {
		return fsm.PermitResult{}, err
	}
	if err := s.checkUnderSession(req.Session, req.SessionLease); err != nil {
		return fsm.PermitResult{}, err
	}
	return s.sems.acquire(ctx, ask[*entry.SemAcquire]{
		name: req.Semaphore, holder: req.Holder, requestID: req.RequestID, principal: req.Principal, wait: req.Wait, durable: req.Durable,
		cmd: &entry.SemAcquire{
			Semaphore: req.Semaphore,
			Holder:    req.Holder,
			Lease:     newSecret(req.Semaphore),
			TTLMillis: req.TTL.Milliseconds(),
			Limit:     req.Limit,
			RequestID: req.RequestID,
			NowMillis: s.nowMillis(),
			Principal: req.Principal,

			LockDelayMillis: req.LockDelay.Milliseconds(),
			Session:         req.Session,
			SessionLease:    req.SessionLease,
		},
	})
}

// semPolicy is a semaphore to the engine: up to its limit of holders at
// once, its slots in their lock-delay counting against the limit.
type semPolicy struct{ s *Service }

func (semPolicy) closed(st fsm.NameState, _ *entry.SemAcquire) (taken, delayed bool) {
	return st.Limit != 0 && st.InUse() >= st.Limit, false
}

func (p semPolicy) refusal(st fsm.NameState, cmd *entry.SemAcquire, wait, _ bool) error {
	taken, _ := p.closed(st, cmd)
	switch {
	case st.Limit != 0 && st.Limit != cmd.Limit:
		return &refusal.LimitError{Semaphore: st.Name, Limit: st.Limit, Asked: cmd.Limit, Held: len(st.Holders)}
	case taken && !wait && len(st.Holders) < st.Limit:
		// Free but for slots in their lock-delay: when to retry.
		return p.s.slotDelayed(st.Name, st.Delays)
	case taken && !wait:
		return &refusal.FullError{Semaphore: st.Name, Held: len(st.Holders), Limit: st.Limit}
	}
	return nil
}

// lapsed refuses a semaphore whose permits fill it, after a quorum round,
// rather than "full" with a permit free.
func (semPolicy) lapsed(st fsm.NameState, _ *entry.SemAcquire, _ bool) (bool, error) {
	if st.Limit != 0 && len(st.Holders) >= st.Limit {
		return true, &refusal.FullError{Semaphore: st.Name, Held: len(st.Holders), Limit: st.Limit}
	}
	return false, nil
}

func (semPolicy) granted(r fsm.PermitResult) timedGrant {
	return timedGrant{name: r.Permit.Semaphore, token: r.Permit.Token, ttlMillis: r.Permit.TTLMillis, existing: r.Existing, session: r.Permit.Session}
}

func (semPolicy) served(r fsm.PermitResult) fsm.PermitResult { return r }

func (semPolicy) freed(res any) freedName[fsm.PermitResult] {
	switch r := res.(type) {
	case *fsm.SemReleaseResult:
		return freedName[fsm.PermitResult]{next: r.Next, nextErr: r.NextErr, delay: r.Delay}
	case *fsm.EndDelayResult:
		return freedName[fsm.PermitResult]{next: r.NextPermit, nextErr: r.NextErr}
	}
	return freedName[fsm.PermitResult]{}
}

func (semPolicy) holder(cmd *entry.SemAcquire) string { return cmd.Holder }

func (semPolicy) stamp(next *entry.SemAcquire, now int64) {
	if next != nil {
		next.NowMillis = now
	}
}

func (semPolicy) release(name string, token uint64, secret string, next *entry.SemAcquire) entry.Command {
	return &entry.SemRelease{Semaphore: name, Token: token, Lease: secret, Next: next}
}

func (semPolicy) expire(name string, token uint64, next *entry.SemAcquire) entry.Command {
	return &entry.SemExpire{Semaphore: name, Token: token, Next: next}
}

func (semPolicy) endDelay(name string, since uint64, next *entry.SemAcquire) entry.Command {
	return &entry.EndDelay{Semaphore: name, Since: since, NextPermit: next}
}

func (semPolicy) grantKey(name string, token uint64, _ bool) lease.Key {
	return timed.PermitKey(name, token)
}
func (semPolicy) delayKey(name string, since uint64) lease.Key {
	return timed.SlotDelayKey(name, since)
}

func (semPolicy) notHeldError(st fsm.NameState, token uint64, _ string) error {
	return fmt.Errorf("%w: semaphore %q has no permit with token %d and that lease", refusal.ErrLeaseLost, st.Name, token)
}

func (semPolicy) expiredError(name string, token uint64) error {
	return fmt.Errorf("%w: semaphore %q's permit %d: its lease expired", refusal.ErrLeaseLost, name, token)
}

// RenewPermit extends a permit's lease on the leader, as Renew a lock's.
func (s *Service) RenewPermit(ctx context.Context, name string, token uint64, secret string) (entry.Permit, error) {
	st, err := s.sems.renew(ctx, name, token, secret)
	if err != nil {
		return entry.Permit{}, err
	}
	p, _ := heldPermit(st.Semaphore, token)
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
	return s.sems.release(ctx, name, token, secret)
}

// permitWaiters counts the callers queued for a semaphore on this node,
// without the name's queue mutex: it is held across proposals, and a
// status read must not wait for one (on a leader whose disk stalled, it
// would wait for good).
func (s *Service) permitWaiters(name string) int { return s.sems.queues.QueuedFor(name) }

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
		left, known := s.timers.Remaining(timed.SlotDelayKey(st.Name, d.Since), d.Since)
		if !known {
			left = millis(d.Millis)
		}
		out.Delays = append(out.Delays, SlotDelayStatus{Since: d.Since, Remaining: left})
	}
	for _, p := range st.Permits {
		ps := PermitStatus{Permit: p}
		ps.Remaining, ps.Known = s.remaining(timed.PermitKey(p.Semaphore, p.Token), p.Token, p.Session)
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
