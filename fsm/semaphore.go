package fsm

import (
	"errors"
	"fmt"
	"sort"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
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

var (
	// ErrSemaphoreFull: every permit of the semaphore is held.
	ErrSemaphoreFull = errors.New("semaphore is full")
	// ErrLimitMismatch: an acquire named a limit other than the one of the
	// semaphore's held permits.
	ErrLimitMismatch = errors.New("semaphore limit mismatch")
)

// FullError is an acquire of a full semaphore; it matches ErrSemaphoreFull.
type FullError struct {
	Semaphore string
	Held      int
	Limit     int
}

func (e *FullError) Error() string {
	return fmt.Sprintf("semaphore %q is full: %d of %d permits held", e.Semaphore, e.Held, e.Limit)
}

// Is makes errors.Is(err, ErrSemaphoreFull) true.
func (e *FullError) Is(target error) bool { return target == ErrSemaphoreFull }

// LimitError is an acquire whose limit differs from the semaphore's; it
// matches ErrLimitMismatch.
type LimitError struct {
	Semaphore string
	Limit     int // the semaphore's
	Asked     int
	Held      int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("semaphore %q has limit %d while %d permits are held; the acquire asked for %d", e.Semaphore, e.Limit, e.Held, e.Asked)
}

// Is makes errors.Is(err, ErrLimitMismatch) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimitMismatch }

// semaphore is a semaphore with at least one permit held or one slot in
// its lock-delay; an empty one is not kept. Permits are immutable once
// stored.
type semaphore struct {
	limit   int
	permits map[uint64]*entry.Permit
	// delays are the slots whose permit expired with a lock-delay, by the
	// index of the expiry: each counts against the limit until an EndDelay
	// ends it, as a lock's delay keeps the lock (delay.go).
	delays map[uint64]entry.Delay
}

// inUse counts the slots taken: permits held and slots in their delay.
func (sem *semaphore) inUse() int { return len(sem.permits) + len(sem.delays) }

// SlotDelayError is an acquire refused because every slot not held is in
// its lock-delay; it matches ErrLockDelay.
type SlotDelayError struct {
	Semaphore string
	Delayed   int
}

func (e *SlotDelayError) Error() string {
	return fmt.Sprintf("semaphore %q has %d permit slots in their lock-delay and none free", e.Semaphore, e.Delayed)
}

// Is makes errors.Is(err, ErrLockDelay) true.
func (e *SlotDelayError) Is(target error) bool { return target == ErrLockDelay }

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
		if token, ok := s.requests[semRequestKey(c.Semaphore, c.Holder, c.RequestID, c.Principal)]; ok {
			if sem := s.sems[c.Semaphore]; sem != nil && sem.permits[token] != nil {
				return &PermitResult{Permit: *sem.permits[token], Held: len(sem.permits), Existing: true}
			}
			return fmt.Errorf("%w: the permit for request %q (token %d) has already ended", ErrLeaseLost, c.RequestID, token)
		}
	}
	if c.Semaphore == "" || c.TTLMillis <= 0 || c.Limit < 1 || c.Limit > MaxSemaphoreLimit {
		return fmt.Errorf("%w: acquire of semaphore %q with ttl %d ms and limit %d", entry.ErrMalformedCommand, c.Semaphore, c.TTLMillis, c.Limit)
	}
	sem := s.sems[c.Semaphore]
	if sem != nil {
		if c.Limit != sem.limit {
			return &LimitError{Semaphore: c.Semaphore, Limit: sem.limit, Asked: c.Limit, Held: len(sem.permits)}
		}
		if len(sem.permits) >= sem.limit {
			return &FullError{Semaphore: c.Semaphore, Held: len(sem.permits), Limit: sem.limit}
		}
		if sem.inUse() >= sem.limit {
			return &SlotDelayError{Semaphore: c.Semaphore, Delayed: len(sem.delays)}
		}
	}
	if index > entry.MaxIndex || s.epoch >= entry.MaxEpoch {
		return ErrTokenSpaceExhausted
	}
	token := entry.MakeToken(s.epoch, index)
	if token <= s.lastToken {
		return fmt.Errorf("%w: token %d would not exceed %d", ErrTokenSpaceExhausted, token, s.lastToken)
	}
	s.lastToken = token
	p := &entry.Permit{
		Semaphore: c.Semaphore, Holder: c.Holder, Token: token, Lease: c.Lease, TTLMillis: c.TTLMillis,
		Limit: c.Limit, RequestID: c.RequestID, GrantedAtMillis: c.NowMillis, Principal: c.Principal,
		LockDelayMillis: c.LockDelayMillis,
	}
	s.addPermit(p)
	if c.RequestID != "" {
		s.remember(semRequestKey(c.Semaphore, c.Holder, c.RequestID, c.Principal), token)
	}
	return &PermitResult{Permit: *p, Held: len(s.sems[c.Semaphore].permits)}
}

func (s *state) addPermit(p *entry.Permit) {
	sem := s.sems[p.Semaphore]
	if sem == nil {
		sem = newSemaphore(p.Limit)
		s.sems[p.Semaphore] = sem
	}
	sem.permits[p.Token] = p
	s.permits++
}

func newSemaphore(limit int) *semaphore {
	return &semaphore{limit: limit, permits: map[uint64]*entry.Permit{}, delays: map[uint64]entry.Delay{}}
}

// addSlotDelay records a slot's lock-delay (an expiry, or a restore).
func (s *state) addSlotDelay(d entry.Delay) {
	sem := s.sems[d.Semaphore]
	if sem == nil {
		sem = newSemaphore(d.Limit)
		s.sems[d.Semaphore] = sem
	}
	sem.delays[d.Since] = d
}

// endSlotDelay ends the slot delay of sem since index since, handing the
// slot to next in the same entry, as a lock's EndDelay does the lock.
func (s *state) endSlotDelay(c *entry.EndDelay, index uint64) any {
	sem := s.sems[c.Semaphore]
	if sem == nil {
		return fmt.Errorf("%w: semaphore %q has no slot delay since index %d", ErrLeaseLost, c.Semaphore, c.Since)
	}
	d, ok := sem.delays[c.Since]
	if !ok {
		return fmt.Errorf("%w: semaphore %q has no slot delay since index %d", ErrLeaseLost, c.Semaphore, c.Since)
	}
	delete(sem.delays, c.Since)
	if sem.inUse() == 0 {
		delete(s.sems, c.Semaphore)
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
	sem := s.sems[c.Semaphore]
	var p *entry.Permit
	if sem != nil {
		p = sem.permits[c.Token]
	}
	if p == nil || !LeaseEqual(p.Lease, c.Lease) {
		return fmt.Errorf("%w: semaphore %q has no permit with token %d and that lease", ErrLeaseLost, c.Semaphore, c.Token)
	}
	return s.freePermit(p, c.Next, index)
}

func applySemExpire(s *state, c *entry.SemExpire, index uint64) any {
	sem := s.sems[c.Semaphore]
	if sem == nil || sem.permits[c.Token] == nil {
		return fmt.Errorf("%w: semaphore %q permit %d already ended", ErrLeaseLost, c.Semaphore, c.Token)
	}
	p := sem.permits[c.Token]
	if p.LockDelayMillis > 0 {
		// The slot is delayed before it is freed, so that nobody, not
		// even a waiter offered in this entry, gets it until an EndDelay.
		s.addSlotDelay(entry.Delay{Semaphore: p.Semaphore, Since: index, Millis: p.LockDelayMillis, Limit: sem.limit})
	}
	res := s.freePermit(p, c.Next, index)
	if p.LockDelayMillis > 0 {
		res.Delay = &entry.Delay{Semaphore: p.Semaphore, Since: index, Millis: p.LockDelayMillis, Limit: sem.limit}
	}
	return res
}

func (s *state) freePermit(p *entry.Permit, next *entry.SemAcquire, index uint64) *SemReleaseResult {
	sem := s.sems[p.Semaphore]
	delete(sem.permits, p.Token)
	s.permits--
	if sem.inUse() == 0 {
		delete(s.sems, p.Semaphore)
	}
	res := &SemReleaseResult{Freed: *p}
	if next != nil {
		next.Semaphore = p.Semaphore
		switch r := applySemAcquire(s, next, index).(type) {
		case *PermitResult:
			res.Next = r
		case error:
			res.NextErr = r
		}
	}
	if sem := s.sems[p.Semaphore]; sem != nil {
		res.Held = len(sem.permits)
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
	return semState(name, f.s.sems[name])
}

func semState(name string, sem *semaphore) SemaphoreState {
	st := SemaphoreState{Name: name}
	if sem == nil {
		return st
	}
	st.Limit = sem.limit
	for _, p := range sem.permits {
		st.Permits = append(st.Permits, *p)
	}
	sort.Slice(st.Permits, func(i, j int) bool { return st.Permits[i].Token < st.Permits[j].Token })
	for _, d := range sem.delays {
		st.Delays = append(st.Delays, d)
	}
	sort.Slice(st.Delays, func(i, j int) bool { return st.Delays[i].Since < st.Delays[j].Since })
	return st
}

// Semaphores returns every semaphore with a permit held, sorted by name.
func (f *FSM) Semaphores() []SemaphoreState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]SemaphoreState, 0, len(f.s.sems))
	for _, name := range sortedKeys(f.s.sems) {
		out = append(out, semState(name, f.s.sems[name]))
	}
	return out
}

// SemRequestGranted reports whether a semaphore acquire request id already
// produced a permit (which may have ended since).
func (f *FSM) SemRequestGranted(name, holder, requestID, principal string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.s.requests[semRequestKey(name, holder, requestID, principal)]
	return ok
}

// permitList returns every held permit, sorted by semaphore and token.
func (s *state) permitList() []entry.Permit {
	var out []entry.Permit
	for _, name := range sortedKeys(s.sems) {
		out = append(out, semState(name, s.sems[name]).Permits...)
	}
	return out
}

// PermitCount returns how many permits are held across all semaphores.
func (f *FSM) PermitCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.permits
}
