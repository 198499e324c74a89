package fsm

import (
	"fmt"
	"slices"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
	"github.com/fencer-io/fencer/fsm/internal/sessions"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
)

// A multi-grant is one grant over several lock names: one MultiAcquire
// entry grants every name or none, and every name then holds a lock grant
// of the lock table like any other (so reads, /check and fenced writes
// with Fencing-Lock see each name held), all with the entry's one token
// and one secret. The state remembers which tokens are multi-grants and
// their names (state.multis): a single-name release or expiry of one of
// them is refused (it would end one name and not the others), and one
// MultiRelease entry ends every name. The grant history records it once,
// under its first name with its names (a token is one grant), and every
// name's history shows it.

// MultiGrant is a live multi-grant as reads return it.
type MultiGrant struct {
	Token uint64
	// Names are its locks, in the order asked.
	Names     []string
	Holder    string
	Lease     string // its secret
	TTLMillis int64
	// Mode is entry.ModeShared for a multi-grant in shared mode.
	Mode string
	// Session is the session it lives under (0: its own lease, TTLMillis).
	Session         uint64
	RequestID       string
	Principal       string
	GrantedAtMillis int64
}

// MultiResult is the Apply result of an effective MultiAcquire.
type MultiResult struct {
	Grant MultiGrant
	// Existing: the request id had been granted this multi-grant before.
	Existing bool
}

// MultiReleaseResult is the Apply result of an effective MultiRelease:
// each name it freed, in the grant's order.
type MultiReleaseResult struct {
	Grant   MultiGrant
	Expired bool
	Revoked bool
	Locks   []*ReleaseResult
}

// multiRequestKey keeps multi-acquires' request ids apart from locks'
// (names never hold a NUL).
func multiRequestKey(holder, id, principal string) string {
	return locktable.RequestKey("\x00multi", holder, id, principal)
}

// checkMultiNames returns why names cannot be one multi-grant's: none,
// more than entry.MaxMultiNames, an empty one or one twice.
func checkMultiNames(names []string) error {
	if len(names) == 0 || len(names) > entry.MaxMultiNames {
		return fmt.Errorf("%w: a multi-lock of %d names (1 to %d)", entry.ErrMalformedCommand, len(names), entry.MaxMultiNames)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if n == "" || seen[n] {
			return fmt.Errorf("%w: multi-lock name %q empty or given twice", entry.ErrMalformedCommand, n)
		}
		seen[n] = true
	}
	return nil
}

func applyMultiAcquire(s *state, c *entry.MultiAcquire, index uint64) any {
	if c.RequestID != "" {
		if token, ok := s.requests.Token(multiRequestKey(c.Holder, c.RequestID, c.Principal)); ok {
			if _, live := s.liveMulti(token); live {
				return &MultiResult{Grant: s.multiGrant(token), Existing: true}
			}
			return fmt.Errorf("%w: the multi-grant for request %q (token %d) has already ended", refusal.ErrLeaseLost, c.RequestID, token)
		}
	}
	if err := checkMultiNames(c.Names); err != nil {
		return err
	}
	if err := s.underSession(c.Session, c.SessionLease); err != nil {
		return err
	}
	// Under a session, the session's TTL and lock-delay (it lives as long
	// as the session); else its own TTL and no lock-delay.
	ttl, delay := c.TTLMillis, int64(0)
	if c.Session != 0 {
		ttl, delay = s.sessionTerms(c.Session, 0)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: multi-acquire with ttl %d ms", entry.ErrMalformedCommand, c.TTLMillis)
	}
	if c.Mode != "" && c.Mode != entry.ModeShared {
		return fmt.Errorf("%w: multi-acquire in mode %q", entry.ErrMalformedCommand, c.Mode)
	}
	// Every name or none: the first that is held or delayed refuses all,
	// each name admitting it as it would a single acquire of its mode.
	for _, n := range c.Names {
		if err := s.heldRefusal(&entry.Acquire{Lock: n, Mode: c.Mode}); err != nil {
			return err
		}
		if d, delayed := s.delays[n]; delayed {
			return &refusal.DelayError{Lock: n, Since: d.Since, Millis: d.Millis}
		}
	}
	token, err := s.mint(index)
	if err != nil {
		return err
	}
	shared := c.Mode == entry.ModeShared
	for _, n := range c.Names {
		e := locktable.NewEntry(&entry.Lock{Name: n, Holder: c.Holder, Token: token, Lease: c.Lease, TTLMillis: ttl,
			RequestID: c.RequestID, GrantedAtMillis: c.NowMillis, Principal: c.Principal, LockDelayMillis: delay, Session: c.Session})
		if shared {
			s.shared.Add(e)
		} else {
			s.locks.Add(e)
		}
	}
	s.multis[token] = slices.Clone(c.Names)
	if c.Session != 0 {
		// One grant of the session's, by its token, whatever its names:
		// the session's end ends them all (endSession).
		s.sessions.Attach(c.Session, sessions.Grant{Kind: sessions.Lock, Name: c.Names[0], Token: token})
	}
	if s.history != nil {
		s.history.GrantedMulti(grants.Grant{Token: token, Granted: index, Name: c.Names[0], Holder: c.Holder, Shared: shared}, c.Names)
	}
	if c.RequestID != "" {
		s.requests.Remember(multiRequestKey(c.Holder, c.RequestID, c.Principal), token)
	}
	return &MultiResult{Grant: s.multiGrant(token)}
}

func applyMultiRelease(s *state, c *entry.MultiRelease, index uint64) any {
	names, live := s.liveMulti(c.Token)
	if !live {
		return fmt.Errorf("%w: multi-grant %d has already ended", refusal.ErrLeaseLost, c.Token)
	}
	g := s.multiGrant(c.Token)
	if c.Expired && c.Revoked {
		return fmt.Errorf("%w: multi-release of %d both expired and revoked", entry.ErrMalformedCommand, c.Token)
	}
	if !c.Expired && !c.Revoked && !secrets.Equal(g.Lease, c.Lease) {
		return fmt.Errorf("%w: that is not multi-grant %d's lease", refusal.ErrLeaseLost, c.Token)
	}
	way := grants.Released
	switch {
	case c.Expired:
		way = grants.Expired
	case c.Revoked:
		way = grants.Revoked
		s.revoked.Add(c.Token)
	}
	res := &MultiReleaseResult{Grant: g, Expired: c.Expired, Revoked: c.Revoked}
	res.Locks = s.endMulti(c.Token, names, way, index)
	return res
}

// endMulti ends every name of the multi-grant token at index, the way
// says how; an expiry or a revoke starts each name's lock-delay (a
// multi-grant has one only under a session, the session's). It hands no
// name over: one entry mints one token.
func (s *state) endMulti(token uint64, names []string, way grants.Way, index uint64) []*ReleaseResult {
	delete(s.multis, token)
	var out []*ReleaseResult
	for _, n := range names {
		cur, held := s.lockGrant(n, token)
		if !held {
			continue // freed alone by a revoke of an older build (revokeLock)
		}
		if way != grants.Released && cur.LockDelayMillis() > 0 {
			s.startDelay(n, index, cur.LockDelayMillis())
		}
		out = append(out, s.free(cur, nil, index, way))
	}
	return out
}

// liveMulti returns the names still held by multi-grant token, in the
// order asked, and whether it is live (holds any). A name is not held by
// it only when a revoke of an older build freed it alone (revokeLock):
// every read then sees the grant as a snapshot restores it
// (restoreMultis), so replicas that restored and replicas that did not
// answer alike.
func (s *state) liveMulti(token uint64) ([]string, bool) {
	names, ok := s.multis[token]
	if !ok {
		return nil, false
	}
	held := names
	for i, n := range names {
		if _, ok := s.lockGrant(n, token); !ok {
			held = slices.Clone(names[:i])
			for _, m := range names[i+1:] {
				if _, ok := s.lockGrant(m, token); ok {
					held = append(held, m)
				}
			}
			break
		}
	}
	return held, len(held) > 0
}

// multiGrant reads live multi-grant token from its first held name's
// lock.
func (s *state) multiGrant(token uint64) MultiGrant {
	names, _ := s.liveMulti(token)
	g := MultiGrant{Token: token, Names: slices.Clone(names)}
	if len(names) == 0 {
		return g
	}
	if e, ok := s.lockGrant(names[0], token); ok {
		l := s.lockOf(e)
		g.Holder, g.Lease, g.TTLMillis, g.RequestID, g.Principal, g.GrantedAtMillis = l.Holder, l.Lease, l.TTLMillis, l.RequestID, l.Principal, l.GrantedAtMillis
		g.Mode, g.Session = l.Mode, l.Session
	}
	return g
}

// multiOf refuses a single-name release or expiry of cur when it is one
// name of a multi-grant: its names end together, in one entry.
func (s *state) multiOf(cur *locktable.Entry) error {
	if _, multi := s.multis[cur.Token()]; multi {
		return fmt.Errorf("%w: lock %q is one name of multi-grant %d: release it with POST /v1/locks/release", refusal.ErrMultiGrant, cur.Name(), cur.Token())
	}
	return nil
}

// MultiGrant returns the live multi-grant with token.
func (f *FSM) MultiGrant(token uint64) (MultiGrant, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if _, live := f.s.liveMulti(token); !live {
		return MultiGrant{}, false
	}
	return f.s.multiGrant(token), true
}

// IsMulti reports whether token is a live multi-grant's.
func (f *FSM) IsMulti(token uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, live := f.s.liveMulti(token)
	return live
}

// MultiGrants returns every live multi-grant, sorted by token.
func (f *FSM) MultiGrants() []MultiGrant {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]MultiGrant, 0, len(f.s.multis))
	for _, t := range f.s.multiTokens() {
		out = append(out, f.s.multiGrant(t))
	}
	return out
}

// MultiRequestGranted reports whether principal's multi-acquire request id
// was granted already (that grant may have ended since).
func (f *FSM) MultiRequestGranted(holder, requestID, principal string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.s.requests.Token(multiRequestKey(holder, requestID, principal))
	return ok
}

func (s *state) multiTokens() []uint64 {
	tokens := make([]uint64, 0, len(s.multis))
	for t := range s.multis {
		if _, live := s.liveMulti(t); live {
			tokens = append(tokens, t)
		}
	}
	slices.Sort(tokens)
	return tokens
}

// multiRecords are the live multi-grants as a snapshot holds them.
func (s *state) multiRecords() []entry.MultiLock {
	out := make([]entry.MultiLock, 0, len(s.multis))
	for _, t := range s.multiTokens() {
		names, _ := s.liveMulti(t)
		out = append(out, entry.MultiLock{Token: t, Names: slices.Clone(names)})
	}
	return out
}

// restoreMultis adds a snapshot's multi-grants to s, whose locks are
// read: each name held with the grant's token (exclusively, or in shared
// mode: a shared multi-grant's names are shared grants) must be so with
// the same holder, secret, mode and session as the others. A name no
// longer held with it is refused, but for a revoked multi-grant's: a
// leader of an older build revoked one name at a time (revokeLock; the
// snapshot of an older build still names it), and the record keeps the
// names still held, as every read of the state that wrote it does
// (liveMulti); one with none is dropped. (After 65,536 later revokes the
// token would be forgotten, and such a snapshot refused.)
func (s *state) restoreMultis(recs []entry.MultiLock) error {
	for _, m := range recs {
		var first *locktable.Entry
		var names []string
		for _, n := range m.Names {
			e, held := s.lockGrant(n, m.Token)
			switch {
			case !held && s.revoked.Has(m.Token):
				continue
			case !held:
				return fmt.Errorf("snapshot is inconsistent: multi-grant %d names lock %q, not held by it", m.Token, n)
			case first == nil:
				first = e
			case e.Holder() != first.Holder() || e.Secret() != first.Secret() || s.isShared(e) != s.isShared(first) || e.Session() != first.Session():
				return fmt.Errorf("snapshot is inconsistent: multi-grant %d names lock %q, held with its token by another grant", m.Token, n)
			}
			names = append(names, n)
		}
		if len(names) > 0 {
			s.multis[m.Token] = names
		}
	}
	return nil
}
