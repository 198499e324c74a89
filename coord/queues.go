package coord

import (
	"errors"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// What every kind of grant shares on the leader besides the timers and the
// engine: the ways to refuse, to check the limits, to wait, and to finish a
// lease. Each engine's table of wait queues (coord/internal/waitq: per name
// a mutex held across its proposals and a FIFO of waiters) counts into one
// total against Config.MaxWaiters.

// refuse returns why, a refusal read from the leader's state under a
// name's queue without writing the log, once a quorum round proves this
// node still leads (so the state it read is current); the round's error
// otherwise.
func (s *Service) refuse(why error) error {
	if err := s.raft.VerifyLeader(); err != nil {
		return err
	}
	return why
}

// checkWaiters refuses a new waiter beyond the queue limits, of the name
// (queued waiters there already) or of all names together. what and name
// say whose queue it is ("lock", "semaphore").
func (s *Service) checkWaiters(queued int, what, name string) error {
	c := s.cfg
	if all := s.queued.Load(); queued >= c.MaxWaitersPerLock || all >= int64(c.MaxWaiters) {
		return fmt.Errorf("%w: %s %q has %d waiters, %d in all (limits %d and %d)", ErrTooManyWaiters,
			what, name, queued, all, c.MaxWaitersPerLock, c.MaxWaiters)
	}
	return nil
}

// waitFor returns a channel closed when a queued caller's wait of d ends,
// by the service's clock, and the function that stops its timer.
func (s *Service) waitFor(d time.Duration) (<-chan struct{}, func()) {
	ended := make(chan struct{})
	timer := s.cfg.Clock.AfterFunc(d, func() { close(ended) })
	return ended, func() { timer.Stop() }
}

// checkGrants refuses a new grant to holder, a lock or a permit, beyond the
// limits on held grants (--max-locks, --max-locks-per-holder), which count
// locks and semaphore permits together: each is a lease the leader times.
// None when nothing new would be held (the lock is held, the semaphore
// full, or the request was granted before). st is the engine's read of
// the name, with the counts.
func (s *Service) checkGrants(st fsm.NameState, holder string, nothingNew bool) error {
	c := s.cfg
	if nothingNew {
		return nil
	}
	if total, mine := st.Total, st.Mine; total >= c.MaxLocks || mine >= c.MaxLocksPerHolder {
		return fmt.Errorf("%w: %d locks and permits held in all, %d by %q (limits %d and %d)", ErrTooManyLocks,
			total, mine, holder, c.MaxLocks, c.MaxLocksPerHolder)
	}
	return nil
}

// nowMillis is the leader's time for the acquire it proposes (the FSM
// reads no clock).
func (s *Service) nowMillis() int64 { return s.cfg.Clock.Now().UnixMilli() }

// notLeading reports whether a proposal failed because this node cannot
// propose any more: serving more waiters would fail alike.
func notLeading(err error) bool {
	return errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrNoLeader) || errors.Is(err, cluster.ErrOutcomeUnknown)
}

// expired accounts for the proposal that ended a lease (a lock's or a
// permit's, timed under key; what names its kind for the log, "lock" or
// "semaphore"): counted when it was written, nothing when the grant had
// ended already, and retried soon when it failed. It reports whether the
// entry was written.
func (s *Service) expired(err error, key lease.Key, token uint64, what, name string) bool {
	switch {
	case err == nil:
		s.metrics.Expirations.Inc()
		return true
	case errors.Is(err, refusal.ErrLeaseLost):
		// Released or superseded meanwhile: nothing to do.
	default:
		s.log.Warn("expire proposal failed; will retry", what, name, "token", token, "err", err)
		s.timers.Retry(key, token, 100*time.Millisecond)
	}
	return false
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
