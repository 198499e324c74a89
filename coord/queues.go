package coord

import (
	"errors"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/internal/waitq"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// What the primitives share on the leader besides the lease timers: each
// has a table of wait queues (coord/internal/waitq: per name a mutex held
// across its proposals and a FIFO of waiters), all counted together against
// Config.MaxWaiters, and the same ways to refuse, wait, and finish a lease.
type (
	lockQueue    = waitq.Queue[*entry.Acquire, fsm.AcquireResult]
	lockWaiter   = waitq.Waiter[*entry.Acquire, fsm.AcquireResult]
	permitQueue  = waitq.Queue[*entry.SemAcquire, fsm.PermitResult]
	permitWaiter = waitq.Waiter[*entry.SemAcquire, fsm.PermitResult]
)

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
func (s *Service) expired(err error, key string, token uint64, what, name string) bool {
	switch {
	case err == nil:
		s.metrics.Expirations.Inc()
		return true
	case errors.Is(err, refusal.ErrLeaseLost):
		// Released or superseded meanwhile: nothing to do.
	default:
		s.log.Warn("expire proposal failed; will retry", what, name, "token", token, "err", err)
		s.leases.Retry(key, token, 100*time.Millisecond)
	}
	return false
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
