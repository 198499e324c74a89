package fsm

import (
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// Shared and exclusive locks (issue 28). A lock is held by one exclusive
// grant (the lock table, as always) or by any number of shared grants
// (state.shared), never both. Each shared grant is minted by its own entry,
// so it has its own token, and an exclusive grant after them has a greater
// one. Release, expiry and a session's end find a grant by its token in
// either table; only the exclusive grant may write under the lock
// (applyPut) or publish a value (applySetValue).

// lockGrant returns lock name's held grant with token, exclusive or
// shared.
func (s *state) lockGrant(name string, token uint64) (*locktable.Entry, bool) {
	if e, ok := s.locks.Get(name); ok {
		return e, e.Token() == token
	}
	return s.shared.Grant(name, token)
}

// isShared reports whether e, a held grant, is one of its lock's shared
// grants.
func (s *state) isShared(e *locktable.Entry) bool {
	cur, ok := s.locks.Get(e.Name())
	return !ok || cur != e
}

// lockOf returns a held grant as its record, with its mode.
func (s *state) lockOf(e *locktable.Entry) entry.Lock {
	l := e.Lock()
	if s.isShared(e) {
		l.Mode = entry.ModeShared
	}
	l.WaitIndex = s.waited[l.Token]
	return l
}

// sharedLock returns a shared grant's entry as its record.
func sharedLock(e *locktable.Entry) entry.Lock {
	l := e.Lock()
	l.Mode = entry.ModeShared
	return l
}

// removeLock ends a held grant in its table.
func (s *state) removeLock(e *locktable.Entry) {
	delete(s.waited, e.Token())
	if s.isShared(e) {
		s.shared.Remove(e)
		return
	}
	s.locks.Remove(e)
}

// heldRefusal is why the holders of c's lock refuse it (nil: they admit
// it): an exclusive grant refuses every acquire, shared grants refuse an
// exclusive one.
func (s *state) heldRefusal(c *entry.Acquire) error {
	if cur, held := s.locks.Get(c.Lock); held {
		return &refusal.HeldError{Lock: c.Lock, Holder: cur.Holder(), Token: cur.Token()}
	}
	if shared := s.shared.Get(c.Lock); len(shared) > 0 && c.Mode != entry.ModeShared {
		newest := shared[len(shared)-1]
		return &refusal.HeldError{Lock: c.Lock, Holder: newest.Holder(), Token: newest.Token(), Shared: len(shared)}
	}
	return nil
}

// checkMode refuses an acquire of a mode no build wrote.
func checkMode(c *entry.Acquire) error {
	if c.Mode != "" && c.Mode != entry.ModeShared {
		return fmt.Errorf("%w: acquire of lock %q in mode %q", entry.ErrMalformedCommand, c.Lock, c.Mode)
	}
	return nil
}

// startDelay records a lock-delay that an expiry at index starts. Shared
// grants can expire one after another while the lock is delayed: the
// delay then restarts at index with the longer of the two lengths, so it
// never ends before the earlier one would have (one delay per lock, timed
// under one key: the newer start replaces the older).
func (s *state) startDelay(lock string, index uint64, millis int64) {
	if d, ok := s.delays[lock]; ok {
		millis = max(millis, d.Millis)
	}
	s.delays[lock] = entry.Delay{Lock: lock, Since: index, Millis: millis}
}

// SharedLocks returns lock name's shared grants, in token order.
func (f *FSM) SharedLocks(name string) []entry.Lock {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []entry.Lock
	for _, e := range f.s.shared.Get(name) {
		out = append(out, sharedLock(e))
	}
	return out
}

// EachSharedLock calls fn with every held shared grant as of one moment,
// by lock name then token (a new leader restarting their leases).
func (f *FSM) EachSharedLock(fn func(entry.Lock)) {
	f.mu.RLock()
	entries := f.s.shared.Entries()
	f.mu.RUnlock()
	for _, e := range entries {
		fn(sharedLock(e))
	}
}
