package coord

import (
	"errors"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/coord/internal/timed"
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
	if d, ok := s.fsm.Delay(lock); ok {
		return s.delayedFor(d)
	}
	return nil
}

// delayedFor is the refusal of an acquire during lock-delay d.
func (s *Service) delayedFor(d entry.Delay) *DelayedError {
	left, known := s.timers.Remaining(timed.DelayKey(d.Lock), d.Since)
	if !known {
		left = millis(d.Millis)
	}
	return &DelayedError{Lock: d.Lock, Remaining: left}
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
func (s *Service) slotDelayed(name string, delays []entry.Delay) *DelayedError {
	var first time.Duration
	for i, d := range delays {
		left, known := s.timers.Remaining(timed.SlotDelayKey(name, d.Since), d.Since)
		if !known {
			left = millis(d.Millis)
		}
		if i == 0 || left < first {
			first = left
		}
	}
	return &DelayedError{Semaphore: name, Remaining: first}
}
