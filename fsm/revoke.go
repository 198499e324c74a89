package fsm

import (
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// A revoke is an operator ending a grant, or a session and every grant
// under it, now, as an expiry would (Consul's session destroy, etcd's
// lease revoke): the grant's lock-delay starts, and a name it frees for a
// waiter goes to the waiter in the same entry. Fencing makes it safe: the
// next grant's token is greater, so the revoked holder's late writes are
// refused. The state remembers what it revoked (fsm/internal/revoked,
// bounded and forgotten in log order as ended sessions are), so that the
// holder's next renew is answered "revoked" by every replica alike.

// RevokeResult is the Apply result of an effective Revoke: what it ended,
// one of the three.
type RevokeResult struct {
	Lock    *ReleaseResult    // a lock's grant (Next: handed to a waiter)
	Permit  *SemReleaseResult // a semaphore's permit
	Session *SessionEndResult // a session, and every grant under it
}

func applyRevoke(s *state, c *entry.Revoke, index uint64) any {
	targets := 0
	for _, set := range []bool{c.Lock != "", c.Semaphore != "", c.Session != 0} {
		if set {
			targets++
		}
	}
	if targets != 1 || (c.Session == 0) == (c.Token == 0) || (c.Next != nil && c.NextPermit != nil) {
		return fmt.Errorf("%w: revoke of lock %q, semaphore %q, session %d, token %d: want one target", entry.ErrMalformedCommand, c.Lock, c.Semaphore, c.Session, c.Token)
	}
	switch {
	case c.Lock != "":
		return s.revokeLock(c, index)
	case c.Semaphore != "":
		return s.revokePermit(c, index)
	}
	return s.revokeSession(c, index)
}

// notRevocable is why token, of what (a lock, a semaphore, a session),
// has no live grant to revoke.
func (s *state) notRevocable(what string, token uint64) error {
	if s.revoked.Has(token) {
		return fmt.Errorf("%w: %s's token %d was revoked already", refusal.ErrRevoked, what, token)
	}
	return fmt.Errorf("%w: %s has no live grant with token %d", refusal.ErrLeaseLost, what, token)
}

func (s *state) revokeLock(c *entry.Revoke, index uint64) any {
	cur, held := s.lockGrant(c.Lock, c.Token) // exclusive or shared
	if !held {
		return s.notRevocable(fmt.Sprintf("lock %q", c.Lock), c.Token)
	}
	if cur.LockDelayMillis() > 0 {
		// As an expiry: the delay keeps the lock even from a waiter
		// offered here (the leader offers none).
		s.startDelay(c.Lock, index, cur.LockDelayMillis())
	}
	s.revoked.Add(c.Token)
	res := &RevokeResult{Lock: s.free(cur, c.Next, index, grants.Revoked)}
	if _, live := s.liveMulti(c.Token); !live {
		// The last name of a multi-grant that older builds' leaders
		// revoked one by one (this build's leader revokes it whole, by a
		// MultiRelease): nothing is left of it. Every read already saw
		// it so (liveMulti).
		delete(s.multis, c.Token)
	}
	return res
}

func (s *state) revokePermit(c *entry.Revoke, index uint64) any {
	sem := s.sems.Get(c.Semaphore)
	if sem == nil || sem.Permit(c.Token) == nil {
		return s.notRevocable(fmt.Sprintf("semaphore %q", c.Semaphore), c.Token)
	}
	p, limit := sem.Permit(c.Token), sem.Limit()
	var d *entry.Delay
	if p.LockDelayMillis > 0 {
		d = &entry.Delay{Semaphore: p.Semaphore, Since: index, Millis: p.LockDelayMillis, Limit: limit}
		s.sems.AddSlotDelay(*d)
	}
	s.revoked.Add(c.Token)
	res := s.freePermit(p, c.NextPermit, index, grants.Revoked)
	res.Delay = d
	return &RevokeResult{Permit: res}
}

func (s *state) revokeSession(c *entry.Revoke, index uint64) any {
	sess := s.sessions.Get(c.Session)
	if sess == nil {
		if s.revoked.Has(c.Session) {
			return fmt.Errorf("%w: session %d was revoked already", refusal.ErrRevoked, c.Session)
		}
		if s.sessions.Ended(c.Session) {
			return fmt.Errorf("%w: session %d has already ended", refusal.ErrSessionExpired, c.Session)
		}
		return fmt.Errorf("%w: no session has id %d", refusal.ErrUnknownSession, c.Session)
	}
	// The session and each grant under it: a renewal of either, and the
	// release of a grant, is answered "revoked".
	s.revoked.Add(c.Session)
	for _, g := range sess.Grants() {
		s.revoked.Add(g.Token)
	}
	var next []*entry.Acquire
	if c.Next != nil {
		next = []*entry.Acquire{c.Next}
	}
	var nextPermits []*entry.SemAcquire
	if c.NextPermit != nil {
		nextPermits = []*entry.SemAcquire{c.NextPermit}
	}
	return &RevokeResult{Session: s.endSession(sess, next, nextPermits, grants.Revoked, index)}
}

// handedOff is how a grant that ended the way way and handed its name to
// a waiter in the same entry is recorded: handed off, unless revoked,
// which the history keeps as the reason the holder lost it.
func handedOff(way grants.Way) grants.Way {
	if way == grants.Revoked {
		return way
	}
	return grants.HandedOff
}

// Revoked reports whether token, a grant's or a session's, was revoked
// lately.
func (f *FSM) Revoked(token uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.revoked.Has(token)
}

// checkRevokedLocks refuses a snapshot whose streamed locks (which
// snapshot.Image.Check never sees) hold a revoked token: a revoke ends
// what it names, and a token is never granted twice. A multi-grant's
// token is the exception: a leader of an older build revoked one name of
// it at a time (revokeLock), leaving the others held (restoreMultis).
func checkRevokedLocks(s *state, revoked []uint64, multis []entry.MultiLock) error {
	if len(revoked) == 0 {
		return nil
	}
	gone := make(map[uint64]bool, len(revoked))
	for _, t := range revoked {
		gone[t] = true
	}
	for _, m := range multis {
		delete(gone, m.Token)
	}
	for _, e := range s.locks.Entries() {
		if gone[e.Token()] {
			return fmt.Errorf("snapshot is inconsistent: lock %q holds token %d, which was revoked", e.Name(), e.Token())
		}
	}
	return nil
}
