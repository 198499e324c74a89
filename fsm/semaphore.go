package fsm

import (
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
	"github.com/fencer-io/fencer/fsm/internal/permits"
	"github.com/fencer-io/fencer/fsm/internal/sessions"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
)

// A semaphore is N permits under one name, each granted by its own entry
// with its own token from the one token sequence, so a resource fences a
// permit holder exactly as a lock holder. Semaphore names are a namespace of
// their own. The limit is set by the first acquire of an empty semaphore
// and every acquire while any permit is held must name the same one
// (Consul's and Curator's rule), so two groups of workers that disagree on
// N cannot both believe they are within it.

// MaxSemaphoreLimit bounds a semaphore's limit.
const MaxSemaphoreLimit = 10_000

// PermitResult is the Apply result of a granted SemAcquire.
type PermitResult struct {
	Permit entry.Permit
	// Held counts the permits held once this one is.
	Held int
	// Existing: the request id had been granted and this is that permit.
	Existing bool
}

// SemReleaseResult is the Apply result of an effective SemRelease or
// SemExpire.
type SemReleaseResult struct {
	Freed   entry.Permit
	Next    *PermitResult
	NextErr error
	// Held counts the permits held once the entry is applied (the handoff
	// included).
	Held int
	// Delay is the slot's lock-delay an expiry started.
	Delay *entry.Delay
}

// semRequestKey keeps semaphores' request ids apart from locks' in the one
// request table (names never hold a NUL).
func semRequestKey(name, holder, id, principal string) string {
	return locktable.RequestKey("\x00sem\x00"+name, holder, id, principal)
}

func applySemAcquire(s *state, c *entry.SemAcquire, index uint64) any {
	if c.RequestID != "" {
		if token, ok := s.requests.Token(semRequestKey(c.Semaphore, c.Holder, c.RequestID, c.Principal)); ok {
			if sem := s.sems.Get(c.Semaphore); sem != nil && sem.Permit(token) != nil {
				return &PermitResult{Permit: s.permitOf(sem.Permit(token)), Held: sem.Held(), Existing: true}
			}
			return fmt.Errorf("%w: the permit for request %q (token %d) has already ended", refusal.ErrLeaseLost, c.RequestID, token)
		}
	}
	if err := s.underSession(c.Session, c.SessionLease); err != nil {
		return err
	}
	ttl, delay := c.TTLMillis, c.LockDelayMillis
	if c.Session != 0 {
		ttl, delay = s.sessionTerms(c.Session, delay)
	}
	if c.Semaphore == "" || ttl <= 0 || c.Limit < 1 || c.Limit > MaxSemaphoreLimit {
		return fmt.Errorf("%w: acquire of semaphore %q with ttl %d ms and limit %d", entry.ErrMalformedCommand, c.Semaphore, c.TTLMillis, c.Limit)
	}
	if sem := s.sems.Get(c.Semaphore); sem != nil {
		if c.Limit != sem.Limit() {
			return &refusal.LimitError{Semaphore: c.Semaphore, Limit: sem.Limit(), Asked: c.Limit, Held: sem.Held()}
		}
		if sem.Held() >= sem.Limit() {
			return &refusal.FullError{Semaphore: c.Semaphore, Held: sem.Held(), Limit: sem.Limit()}
		}
		if sem.InUse() >= sem.Limit() {
			return &refusal.SlotDelayError{Semaphore: c.Semaphore, Delayed: sem.Delayed()}
		}
	}
	token, err := s.mint(index)
	if err != nil {
		return err
	}
	p := &entry.Permit{
		Semaphore: c.Semaphore, Holder: c.Holder, Token: token, Lease: c.Lease, TTLMillis: ttl,
		Limit: c.Limit, RequestID: c.RequestID, GrantedAtMillis: c.NowMillis, Principal: c.Principal,
		LockDelayMillis: delay, Session: c.Session,
	}
	s.sems.Add(p)
	if c.Session != 0 {
		s.sessions.Attach(c.Session, sessions.Grant{Kind: sessions.Permit, Name: p.Semaphore, Token: token})
	}
	if h := s.permitHistory(); h != nil {
		h.Granted(grants.Grant{Token: token, Granted: index, Name: p.Semaphore, Holder: p.Holder, Kind: grants.OfPermit})
	}
	if c.RequestID != "" {
		s.requests.Remember(semRequestKey(c.Semaphore, c.Holder, c.RequestID, c.Principal), token)
	}
	s.waiterGranted(KindSemaphore, c.Semaphore, c.Holder, c.RequestID, c.Principal, token)
	return &PermitResult{Permit: s.permitOf(p), Held: s.sems.Get(c.Semaphore).Held()}
}

// permitOf returns a held permit as its record, with the index it was
// enqueued at if a durable waiter got it.
func (s *state) permitOf(p *entry.Permit) entry.Permit {
	r := *p
	r.WaitIndex = s.waited[p.Token]
	return r
}

// endSlotDelay ends the slot delay of sem since index since, handing the
// slot to next in the same entry, as a lock's EndDelay does the lock.
func (s *state) endSlotDelay(c *entry.EndDelay, index uint64) any {
	d, ok := s.sems.EndSlotDelay(c.Semaphore, c.Since)
	if !ok {
		return fmt.Errorf("%w: semaphore %q has no slot delay since index %d", refusal.ErrLeaseLost, c.Semaphore, c.Since)
	}
	res := &EndDelayResult{Ended: d}
	if c.NextPermit != nil {
		c.NextPermit.Semaphore = c.Semaphore
		switch r := applySemAcquire(s, c.NextPermit, index).(type) {
		case *PermitResult:
			res.NextPermit = r
		case error:
			res.NextErr = r
		}
	}
	return res
}

func applySemRelease(s *state, c *entry.SemRelease, index uint64) any {
	var p *entry.Permit
	if sem := s.sems.Get(c.Semaphore); sem != nil {
		p = sem.Permit(c.Token)
	}
	if p == nil || !secrets.Equal(p.Lease, c.Lease) {
		return fmt.Errorf("%w: semaphore %q has no permit with token %d and that lease", refusal.ErrLeaseLost, c.Semaphore, c.Token)
	}
	return s.freePermit(p, c.Next, index, grants.Released)
}

func applySemExpire(s *state, c *entry.SemExpire, index uint64) any {
	sem := s.sems.Get(c.Semaphore)
	if sem == nil || sem.Permit(c.Token) == nil {
		return fmt.Errorf("%w: semaphore %q permit %d already ended", refusal.ErrLeaseLost, c.Semaphore, c.Token)
	}
	p, limit := sem.Permit(c.Token), sem.Limit()
	if p.LockDelayMillis > 0 {
		// The slot is delayed before it is freed, so that nobody, not
		// even a waiter offered in this entry, gets it until an EndDelay.
		s.sems.AddSlotDelay(entry.Delay{Semaphore: p.Semaphore, Since: index, Millis: p.LockDelayMillis, Limit: limit})
	}
	res := s.freePermit(p, c.Next, index, grants.Expired)
	if p.LockDelayMillis > 0 {
		res.Delay = &entry.Delay{Semaphore: p.Semaphore, Since: index, Millis: p.LockDelayMillis, Limit: limit}
	}
	return res
}

// freePermit ends p at index, the way says how (released or expired), and
// grants a permit to next in the same entry, if any (a hand-off).
func (s *state) freePermit(p *entry.Permit, next *entry.SemAcquire, index uint64, way grants.Way) *SemReleaseResult {
	s.sems.Remove(p)
	delete(s.waited, p.Token)
	if p.Session != 0 {
		s.sessions.Detach(p.Session, p.Token)
	}
	res := &SemReleaseResult{Freed: *p}
	if next != nil {
		next.Semaphore = p.Semaphore
		switch r := applySemAcquire(s, next, index).(type) {
		case *PermitResult:
			res.Next = r
			way = handedOff(way)
		case error:
			res.NextErr = r
		}
	}
	if h := s.permitHistory(); h != nil {
		h.Ended(grants.OfPermit, p.Semaphore, p.Token, index, way)
	}
	if sem := s.sems.Get(p.Semaphore); sem != nil {
		res.Held = sem.Held()
	}
	return res
}

// SemaphoreState is a semaphore's held permits, sorted by token, and its
// slots in their lock-delay, sorted by start; Limit is 0 when none is held
// or delayed.
type SemaphoreState struct {
	Name    string
	Limit   int
	Permits []entry.Permit
	Delays  []entry.Delay
}

// Semaphore returns a semaphore's permits.
func (f *FSM) Semaphore(name string) SemaphoreState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return semState(name, f.s.sems.Get(name))
}

func semState(name string, sem *permits.Semaphore) SemaphoreState {
	st := SemaphoreState{Name: name}
	if sem != nil {
		st.Limit, st.Permits, st.Delays = sem.Limit(), sem.Permits(), sem.Delays()
	}
	return st
}

// Semaphores returns every semaphore with a permit held, sorted by name.
func (f *FSM) Semaphores() []SemaphoreState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]SemaphoreState, 0, f.s.sems.Len())
	for _, name := range f.s.sems.Names() {
		out = append(out, semState(name, f.s.sems.Get(name)))
	}
	return out
}

// SemRequestGranted reports whether a semaphore acquire request id already
// produced a permit (which may have ended since).
func (f *FSM) SemRequestGranted(name, holder, requestID, principal string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.s.requests.Token(semRequestKey(name, holder, requestID, principal))
	return ok
}

// PermitCount returns how many permits are held across all semaphores.
func (f *FSM) PermitCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.sems.Held()
}
