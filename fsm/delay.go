package fsm

import (
	"encoding/json"
	"fmt"
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

// Delay is a running lock-delay.
type Delay struct {
	Lock   string `json:"lock"`
	Since  uint64 `json:"since"` // index of the expiry that started it
	Millis int64  `json:"ms"`
}

// EndDelay ends the lock-delay started at index Since, and when Next is set
// grants the lock to it in the same entry, so a waiter that waited through
// the delay gets the lock with no gap in which anybody else could.
type EndDelay struct {
	Lock  string   `json:"lock"`
	Since uint64   `json:"since"`
	Next  *Acquire `json:"next,omitempty"`
}

// EndDelayResult is the Apply result of an effective EndDelay.
type EndDelayResult struct {
	Ended Delay
	// Next is the grant handed to the queued waiter, if any.
	Next *Lock
	// NextErr is why the handoff did not happen (the lock is then free).
	NextErr error
}

func (c *EndDelay) apply(s *state, index uint64) any {
	d, ok := s.delays[c.Lock]
	if !ok || d.Since != c.Since {
		return fmt.Errorf("%w: lock %q has no lock-delay since index %d", ErrLeaseLost, c.Lock, c.Since)
	}
	delete(s.delays, c.Lock)
	res := &EndDelayResult{Ended: d}
	if c.Next == nil {
		return res
	}
	c.Next.Lock = c.Lock
	switch r := c.Next.apply(s, index).(type) {
	case *AcquireResult:
		res.Next = &r.Grant
	case error:
		res.NextErr = r
	}
	return res
}

// Delay returns a lock's running lock-delay, if any.
func (f *FSM) Delay(lock string) (Delay, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d, ok := f.s.delays[lock]
	return d, ok
}

// Delays returns every running lock-delay, sorted by lock.
func (f *FSM) Delays() []Delay {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Delay, 0, len(f.s.delays))
	for _, name := range sortedKeys(f.s.delays) {
		out = append(out, f.s.delays[name])
	}
	return out
}

// acquireFields is Acquire without its methods, for its JSON.
type acquireFields Acquire

// acquireWithPrincipal is the JSON of an acquire with a lock-delay or a
// value (fieldsFormat): only
// members of LogFormatCoord are ever sent one, and they read the principal,
// so unlike older JSON acquires it carries it.
type acquireWithPrincipal struct {
	*acquireFields
	Principal string `json:"principal,omitempty"`
}

// MarshalJSON writes the principal only in an acquire with a lock-delay.
func (c *Acquire) MarshalJSON() ([]byte, error) {
	if fieldsFormat(c) < LogFormatCoord {
		return json.Marshal((*acquireFields)(c))
	}
	return json.Marshal(acquireWithPrincipal{(*acquireFields)(c), c.Principal})
}

// UnmarshalJSON reads the principal only in an acquire with a lock-delay:
// in any other JSON acquire it would be something no build wrote.
func (c *Acquire) UnmarshalJSON(b []byte) error {
	w := acquireWithPrincipal{acquireFields: (*acquireFields)(c)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	c.Principal = ""
	if fieldsFormat(c) >= LogFormatCoord {
		c.Principal = w.Principal
	}
	return nil
}
