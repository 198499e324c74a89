package fsm

import (
	"fmt"
	"slices"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
	"github.com/fencer-io/fencer/fsm/internal/permits"
	"github.com/fencer-io/fencer/fsm/internal/sessions"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
)

// A session is one lease for many grants (etcd's lease with keys attached,
// Consul's session, ZooKeeper's session behind its ephemeral nodes). Its
// creation is an entry whose token is its id; the leader times it as it
// times a grant's lease, and its renewals write nothing. A lock or a permit
// acquired under it (Acquire.Session with the session's secret) has its own
// token and secret but no lease of its own: it lives as long as the
// session, whose TTL it records. The session's end, by close or by expiry,
// is one entry that ends every grant under it, sorted by token, as a
// release or an expiry would each (history, events, an expiry's
// lock-delay).
//
// One entry mints one token (a token is the log index of its grant, and
// tokens strictly increase), so a session's end hands at most one freed
// name to a waiter in its own entry: the first, by token, that has one.
// The leader hands the others over in the entries right after, still
// holding every freed name's queue, so that no other acquire can come
// between (coord/DESIGN.md, "Sessions").

// SessionResult is the Apply result of an effective SessionCreate.
type SessionResult struct {
	Session entry.Session
	// Existing: the request id had opened this session before.
	Existing bool
}

// SessionEndResult is the Apply result of an effective SessionEnd: the
// grants it ended, in the order it ended them (by token), each with what
// its freeing did.
type SessionEndResult struct {
	Session entry.Session
	Expired bool
	Revoked bool                // by an operator (revoke.go)
	Locks   []*ReleaseResult    // the locks freed (Next: handed to a waiter)
	Permits []*SemReleaseResult // the permits freed
}

// sessionRequestKey keeps sessions' request ids apart from locks' and
// semaphores' in the one request table (names never hold a NUL).
func sessionRequestKey(holder, id, principal string) string {
	return locktable.RequestKey("\x00session", holder, id, principal)
}

func applySessionCreate(s *state, c *entry.SessionCreate, index uint64) any {
	if c.RequestID != "" {
		if id, ok := s.requests.Token(sessionRequestKey(c.Holder, c.RequestID, c.Principal)); ok {
			if sess := s.sessions.Get(id); sess != nil {
				return &SessionResult{Session: sess.Record(), Existing: true}
			}
			return fmt.Errorf("%w: the session for request %q (id %d) has already ended", refusal.ErrSessionExpired, c.RequestID, id)
		}
	}
	if c.TTLMillis <= 0 || c.LockDelayMillis < 0 {
		return fmt.Errorf("%w: session with ttl %d ms and lock-delay %d ms", entry.ErrMalformedCommand, c.TTLMillis, c.LockDelayMillis)
	}
	id, err := s.mint(index)
	if err != nil {
		return err
	}
	rec := entry.Session{ID: id, Holder: c.Holder, Lease: c.Lease, TTLMillis: c.TTLMillis, LockDelayMillis: c.LockDelayMillis,
		RequestID: c.RequestID, Principal: c.Principal, CreatedAtMillis: c.NowMillis}
	s.sessions.Open(rec)
	if c.RequestID != "" {
		s.requests.Remember(sessionRequestKey(c.Holder, c.RequestID, c.Principal), id)
	}
	return &SessionResult{Session: rec}
}

// underSession returns why an acquire under session id with secret cannot
// be granted, or nil (also for id 0: no session).
func (s *state) underSession(id uint64, secret string) error {
	if id == 0 {
		return nil
	}
	sess := s.sessions.Get(id)
	switch {
	case sess == nil && s.sessions.Ended(id):
		return fmt.Errorf("%w: session %d has ended, and every grant under it", refusal.ErrSessionExpired, id)
	case sess == nil:
		return fmt.Errorf("%w: no session has id %d", refusal.ErrUnknownSession, id)
	case !secrets.Equal(sess.Record().Lease, secret):
		return fmt.Errorf("%w: that is not session %d's lease", refusal.ErrSessionMismatch, id)
	}
	return nil
}

// sessionTerms returns the TTL and lock-delay of a grant under live
// session id that asked for lock-delay delay: the session's TTL, and the
// grant's own delay or else the session's.
func (s *state) sessionTerms(id uint64, delay int64) (ttl, lockDelay int64) {
	sess := s.sessions.Get(id)
	if sess == nil {
		return 0, delay
	}
	rec := sess.Record()
	if delay == 0 {
		delay = rec.LockDelayMillis
	}
	return rec.TTLMillis, delay
}

func applySessionEnd(s *state, c *entry.SessionEnd, index uint64) any {
	sess := s.sessions.Get(c.Session)
	if sess == nil {
		if s.sessions.Ended(c.Session) {
			return fmt.Errorf("%w: session %d has already ended", refusal.ErrSessionExpired, c.Session)
		}
		return fmt.Errorf("%w: no session has id %d", refusal.ErrUnknownSession, c.Session)
	}
	if len(c.Next)+len(c.NextPermits) > 1 {
		return fmt.Errorf("%w: session end with %d hand-offs: one entry mints one token", entry.ErrMalformedCommand, len(c.Next)+len(c.NextPermits))
	}
	if !c.Expired && !secrets.Equal(sess.Record().Lease, c.Lease) {
		return fmt.Errorf("%w: that is not session %d's lease", refusal.ErrSessionMismatch, c.Session)
	}
	way := grants.Released
	if c.Expired {
		way = grants.Expired
	}
	return s.endSession(sess, c.Next, c.NextPermits, way, index)
}

// endSession ends sess and every grant under it at index, as a close
// (released), an expiry or a revoke (which start each grant's lock-delay)
// would each, handing a freed lock to the acquire in next that names it
// and a freed slot to the one in nextPermits that names its semaphore.
func (s *state) endSession(sess *sessions.Session, next []*entry.Acquire, nextPermits []*entry.SemAcquire, way grants.Way, index uint64) *SessionEndResult {
	nextLock := map[string]*entry.Acquire{}
	for _, n := range next {
		if n != nil {
			nextLock[n.Lock] = n
		}
	}
	nextPermit := map[string]*entry.SemAcquire{}
	for _, n := range nextPermits {
		if n != nil {
			nextPermit[n.Semaphore] = n
		}
	}
	res := &SessionEndResult{Session: sess.Record(), Expired: way == grants.Expired, Revoked: way == grants.Revoked}
	// Ended first, freed after: a waiter handed a name in this entry may
	// not be under the ending session (refused as expired), and the grant
	// list no longer moves while the names are freed.
	list := s.sessionGrants(sess)
	for _, g := range list {
		delete(s.multis, g.Token) // a multi-grant's names all end here
	}
	s.sessions.End(sess.Record().ID)
	// A lock's hand-off goes with the last of its grants the session held
	// (several when shared), once the lock has room for it.
	lastOf := map[string]uint64{}
	for _, g := range list {
		if g.Kind == sessions.Lock {
			lastOf[g.Name] = g.Token
		}
	}
	for _, g := range list {
		switch g.Kind {
		case sessions.Lock:
			var next *entry.Acquire
			if lastOf[g.Name] == g.Token {
				next = nextLock[g.Name]
			}
			if r := s.endSessionLock(g, next, way, index); r != nil {
				res.Locks = append(res.Locks, r)
			}
		case sessions.Permit:
			// The hand-off is the first freed permit's of its semaphore
			// alone: a second would offer the same acquire again.
			next := nextPermit[g.Name]
			delete(nextPermit, g.Name)
			if r := s.endSessionPermit(g, next, way, index); r != nil {
				res.Permits = append(res.Permits, r)
			}
		}
	}
	return res
}

// sessionGrants are the grants under sess, sorted by token, a
// multi-grant's (one grant of the session's, by its token) as each of its
// names held, in its order.
func (s *state) sessionGrants(sess *sessions.Session) []sessions.Grant {
	list := sess.Grants()
	var out []sessions.Grant
	for i, g := range list {
		names, multi := s.liveMulti(g.Token)
		if !multi || g.Kind != sessions.Lock {
			if out != nil {
				out = append(out, g)
			}
			continue
		}
		if out == nil {
			out = slices.Clone(list[:i])
		}
		for _, n := range names {
			out = append(out, sessions.Grant{Kind: sessions.Lock, Name: n, Token: g.Token})
		}
	}
	if out == nil {
		return list
	}
	return out
}

// endSessionLock ends a session's lock grant as an Expire (expired,
// revoked) or a Release would, handing it to next.
func (s *state) endSessionLock(g sessions.Grant, next *entry.Acquire, way grants.Way, index uint64) *ReleaseResult {
	cur, held := s.lockGrant(g.Name, g.Token)
	if !held {
		return nil // cannot happen: a grant's end detaches it
	}
	if way != grants.Released {
		if cur.LockDelayMillis() > 0 {
			s.startDelay(g.Name, index, cur.LockDelayMillis())
		}
	}
	return s.free(cur, next, index, way)
}

// endSessionPermit ends a session's permit as a SemExpire (expired,
// revoked) or a SemRelease would, handing its slot to next.
func (s *state) endSessionPermit(g sessions.Grant, next *entry.SemAcquire, way grants.Way, index uint64) *SemReleaseResult {
	sem := s.sems.Get(g.Name)
	if sem == nil || sem.Permit(g.Token) == nil {
		return nil
	}
	p, limit := sem.Permit(g.Token), sem.Limit()
	if way == grants.Released || p.LockDelayMillis == 0 {
		return s.freePermit(p, next, index, way)
	}
	d := entry.Delay{Semaphore: p.Semaphore, Since: slotDelaySince(sem, index, p.Token), Millis: p.LockDelayMillis, Limit: limit}
	s.sems.AddSlotDelay(d)
	res := s.freePermit(p, next, index, way)
	res.Delay = &d
	return res
}

// slotDelaySince is the key of a slot delay that a session's end at index
// starts for permit token of sem. A slot's delay is known by its start
// (EndDelay.Since), and one end may start several of one semaphore's: the
// first is known by the end's index, as an expiry's; another, by its
// permit's token, or failing that (a delay known by it runs already) the
// nearest number below that none is known by. All by index, the second
// once overwrote the first, and its slot was free at once.
func slotDelaySince(sem *permits.Semaphore, index, token uint64) uint64 {
	if !sem.DelayedSince(index) {
		return index
	}
	since := token
	for since > 1 && sem.DelayedSince(since) {
		since--
	}
	return since
}

// SessionState is a live session and the grants under it, sorted by token.
type SessionState struct {
	entry.Session
	Grants []SessionGrant
}

// SessionGrant is one grant under a session.
type SessionGrant struct {
	Semaphore bool // a permit of the semaphore Name; else a lock's grant
	Name      string
	Token     uint64
}

// Session returns a live session.
func (f *FSM) Session(id uint64) (SessionState, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	sess := f.s.sessions.Get(id)
	if sess == nil {
		return SessionState{}, false
	}
	return f.s.sessionState(sess), true
}

// SessionRecord returns a live session's record, without its grants.
func (f *FSM) SessionRecord(id uint64) (entry.Session, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	sess := f.s.sessions.Get(id)
	if sess == nil {
		return entry.Session{}, false
	}
	return sess.Record(), true
}

// SessionEnded reports whether id is a session that ended lately.
func (f *FSM) SessionEnded(id uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.sessions.Ended(id)
}

// sessionState is sess and its grants, a multi-grant's as each name.
func (s *state) sessionState(sess *sessions.Session) SessionState {
	st := SessionState{Session: sess.Record()}
	for _, g := range s.sessionGrants(sess) {
		st.Grants = append(st.Grants, SessionGrant{Semaphore: g.Kind == sessions.Permit, Name: g.Name, Token: g.Token})
	}
	return st
}

// Sessions returns every live session, sorted by id.
func (f *FSM) Sessions() []SessionState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]SessionState, 0, f.s.sessions.Len())
	for _, rec := range f.s.sessions.Records() {
		out = append(out, f.s.sessionState(f.s.sessions.Get(rec.ID)))
	}
	return out
}

// SessionRecords returns every live session's record, sorted by id,
// without their grants (a new leader timing them).
func (f *FSM) SessionRecords() []entry.Session {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.sessions.Records()
}

// SessionCount returns how many sessions are live.
func (f *FSM) SessionCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.sessions.Len()
}

// SessionRequestGranted reports whether principal's session request id
// already opened a session (which may have ended since).
func (f *FSM) SessionRequestGranted(holder, requestID, principal string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.s.requests.Token(sessionRequestKey(holder, requestID, principal))
	return ok
}
