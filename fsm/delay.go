package fsm

import (
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// A lock-delay (Chubby's, Consul's) protects resources that cannot check a
// token: when a grant that asked for one ends by expiry, the lock cannot be
// granted again for that long, so the holder that lost its lease has time to
// notice and stop. Release and handoff start none: the holder knew it let go.
//
// The FSM cannot time anything, so the state records only that a delay
// started (the index of the expiry and the length asked for) and refuses
// every acquire of the lock until an EndDelay entry, proposed by the leader
// when its own timer fires, ends it. A new leader finds the record and times
// the delay again at full length: a delay may last longer across a
// failover, never shorter.

// EndDelayResult is the Apply result of an effective EndDelay.
type EndDelayResult struct {
	Ended entry.Delay
	// Next is the grant handed to the queued waiter, if any.
	Next *entry.Lock
	// NextPermit is the permit handed to the queued waiter when a
	// semaphore slot's delay ends.
	NextPermit *PermitResult
	// NextErr is why the handoff did not happen (the lock or slot is then
	// free).
	NextErr error
}

func applyEndDelay(s *state, c *entry.EndDelay, index uint64) any {
	if c.Semaphore != "" {
		return s.endSlotDelay(c, index)
	}
	d, ok := s.delays[c.Lock]
	if !ok || d.Since != c.Since {
		return fmt.Errorf("%w: lock %q has no lock-delay since index %d", refusal.ErrLeaseLost, c.Lock, c.Since)
	}
	delete(s.delays, c.Lock)
	res := &EndDelayResult{Ended: d}
	if c.Next == nil {
		return res
	}
	c.Next.Lock = c.Lock
	switch r := applyAcquire(s, c.Next, index).(type) {
	case *AcquireResult:
		res.Next = &r.Grant
	case error:
		res.NextErr = r
	}
	return res
}

// Delay returns a lock's running lock-delay, if any.
func (f *FSM) Delay(lock string) (entry.Delay, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d, ok := f.s.delays[lock]
	return d, ok
}

// Delays returns every running lock-delay, sorted by lock, then every
// semaphore slot's, sorted by semaphore and start.
func (f *FSM) Delays() []entry.Delay {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]entry.Delay, 0, len(f.s.delays))
	for _, name := range sortedKeys(f.s.delays) {
		out = append(out, f.s.delays[name])
	}
	return append(out, f.s.sems.SlotDelays()...)
}
