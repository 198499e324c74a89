package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/coord/internal/waitq"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// A lock-delay is timed like a lease, by the shared lease timers on the
// leader: the FSM records that it started (entry.Delay: the expiry's index and
// the length) and refuses acquires until an EndDelay entry, which the leader
// proposes when the delay's timer fires, handing the lock to the head waiter
// in the same entry. Waiters keep waiting through the delay. A new leader
// finds the record and restarts the delay at full length (timed.All).

// DelayedError is an acquire refused during a lock-delay, with the leader's
// view of the time left; it matches refusal.ErrLockDelay. Semaphore is set
// instead of Lock when a semaphore's free slots are all in their delay, and
// Remaining is then the time until the first of them ends.
type DelayedError struct {
	Lock      string
	Semaphore string
	Remaining time.Duration
}

func (e *DelayedError) Error() string {
	if e.Semaphore != "" {
		return fmt.Sprintf("semaphore %q has no permit free outside a lock-delay for %d ms more: permits expired", e.Semaphore, e.Remaining.Milliseconds())
	}
	return fmt.Sprintf("lock %q is in its lock-delay for %d ms more: its last grant expired", e.Lock, e.Remaining.Milliseconds())
}

// Is makes errors.Is(err, refusal.ErrLockDelay) true.
func (e *DelayedError) Is(target error) bool { return target == refusal.ErrLockDelay }

// delayed returns the refusal of an acquire of a lock in its delay, or nil.
func (s *Service) delayed(lock string) error {
	d, ok := s.fsm.Delay(lock)
	if !ok {
		return nil
	}
	left, known := s.leases.Remaining(timed.DelayKey(lock), d.Since)
	if !known {
		left = time.Duration(d.Millis) * time.Millisecond
	}
	return &DelayedError{Lock: lock, Remaining: left}
}

// DelayRemaining returns the time left of a lock's running delay, as the
// leader times it (the full length when this node does not time it: on a
// follower, before promotion).
func (s *Service) DelayRemaining(lock string) (time.Duration, bool) {
	var de *DelayedError
	if errors.As(s.delayed(lock), &de) {
		return de.Remaining, true
	}
	return 0, false
}

// slotDelayed returns the refusal of a permit acquire when the semaphore's
// only free slots are in their delay: the time until the first one ends.
func (s *Service) slotDelayed(st fsm.SemaphoreState) *DelayedError {
	var first time.Duration
	for i, d := range st.Delays {
		left, known := s.leases.Remaining(timed.SlotDelayKey(st.Name, d.Since), d.Since)
		if !known {
			left = time.Duration(d.Millis) * time.Millisecond
		}
		if i == 0 || left < first {
			first = left
		}
	}
	return &DelayedError{Semaphore: st.Name, Remaining: first}
}

// expireTimer is called by the lease timers when a deadline passes: a
// lease's or a lock-delay's.
func (s *Service) expireTimer(key string, token uint64) {
	switch kind, name := timed.Parse(key); kind {
	case timed.LockDelay:
		s.endDelay(name, token)
	case timed.SlotDelay:
		s.endSlotDelay(name, token)
	case timed.PermitLease:
		s.expirePermit(name, token)
	default:
		s.expire(name, token)
	}
}

// endDelay proposes the end of the delay that started at index since,
// handing the lock to the head waiter in the same entry.
func (s *Service) endDelay(lock string, since uint64) {
	if s.awaitLeader(context.Background()) != nil {
		return
	}
	q := s.lockQueues.Get(lock)
	defer s.lockQueues.Put(lock, q)
	err := finishDelay(s, q, timed.DelayKey(lock), since,
		func(next *entry.Acquire) *entry.EndDelay {
			if next != nil {
				next.NowMillis = s.nowMillis()
			}
			return &entry.EndDelay{Lock: lock, Since: since, Next: next}
		},
		func(w *lockWaiter, r *fsm.EndDelayResult) {
			if w != nil {
				s.handoff(lock, w, r.Next, r.NextErr)
			}
			s.serveWaiters(q, lock)
		})
	if err != nil {
		s.log.Warn("end of lock-delay failed; will retry", "lock", lock, "since", since, "err", err)
	}
}

// endSlotDelay proposes the end of a semaphore permit slot's delay that
// started at index since, handing the slot to the head waiter in the same
// entry, as endDelay does a lock.
func (s *Service) endSlotDelay(name string, since uint64) {
	if s.awaitLeader(context.Background()) != nil {
		return
	}
	q := s.permitQueues.Get(name)
	defer s.permitQueues.Put(name, q)
	err := finishDelay(s, q, timed.SlotDelayKey(name, since), since,
		func(next *entry.SemAcquire) *entry.EndDelay {
			if next != nil {
				next.NowMillis = s.nowMillis()
			}
			return &entry.EndDelay{Semaphore: name, Since: since, NextPermit: next}
		},
		func(w *permitWaiter, r *fsm.EndDelayResult) {
			if w != nil {
				s.deliverPermit(w, r.NextPermit, r.NextErr)
			}
			s.serveSemWaiters(q, name)
		})
	if err != nil {
		s.log.Warn("end of a permit slot's lock-delay failed; will retry", "semaphore", name, "since", since, "err", err)
	}
}

// finishDelay is the end of a lock's or a permit slot's delay, timed under
// key, in queue q: it proposes end(next), next being the head waiter's
// acquire (nil when nobody waits), and on success
// hands over with done while the queue is still locked. A failed proposal
// puts the waiter back and is retried soon (its error returned for the
// log), unless the delay had ended already.
func finishDelay[C, R any](s *Service, q *waitq.Queue[C, R], key string, since uint64,
	end func(next C) *entry.EndDelay, done func(*waitq.Waiter[C, R], *fsm.EndDelayResult)) error {
	q.Lock()
	defer q.Unlock()
	var r *fsm.EndDelayResult
	w, err := q.HandOver(true, func(next C) error {
		res, err := s.raft.Apply(end(next))
		if err == nil {
			r = res.(*fsm.EndDelayResult)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, refusal.ErrLeaseLost) {
			s.leases.Forget(key, since) // ended already
			return nil
		}
		s.leases.Retry(key, since, 100*time.Millisecond)
		return err
	}
	s.leases.Forget(key, since)
	done(w, r)
	return nil
}
