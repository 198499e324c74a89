package fsm

import (
	"fmt"
	"slices"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
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
	Mode            string
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
			if _, live := s.multis[token]; live {
				return &MultiResult{Grant: s.multiGrant(token), Existing: true}
			}
			return fmt.Errorf("%w: the multi-grant for request %q (token %d) has already ended", refusal.ErrLeaseLost, c.RequestID, token)
		}
	}
	if err := checkMultiNames(c.Names); err != nil {
		return err
	}
	if c.TTLMillis <= 0 {
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
		e := locktable.NewEntry(&entry.Lock{Name: n, Holder: c.Holder, Token: token, Lease: c.Lease, TTLMillis: c.TTLMillis,
			RequestID: c.RequestID, GrantedAtMillis: c.NowMillis, Principal: c.Principal})
		if shared {
			s.shared.Add(e)
		} else {
			s.locks.Add(e)
		}
	}
	s.multis[token] = slices.Clone(c.Names)
	if s.history != nil {
		s.history.GrantedMulti(grants.Grant{Token: token, Granted: index, Name: c.Names[0], Holder: c.Holder, Shared: shared}, c.Names)
	}
	if c.RequestID != "" {
		s.requests.Remember(multiRequestKey(c.Holder, c.RequestID, c.Principal), token)
	}
	return &MultiResult{Grant: s.multiGrant(token)}
}

func applyMultiRelease(s *state, c *entry.MultiRelease, index uint64) any {
	names, live := s.multis[c.Token]
	if !live {
		return fmt.Errorf("%w: multi-grant %d has already ended", refusal.ErrLeaseLost, c.Token)
	}
	g := s.multiGrant(c.Token)
	if !c.Expired && !secrets.Equal(g.Lease, c.Lease) {
		return fmt.Errorf("%w: that is not multi-grant %d's lease", refusal.ErrLeaseLost, c.Token)
	}
	way := grants.Released
	if c.Expired {
		way = grants.Expired
	}
	res := &MultiReleaseResult{Grant: g, Expired: c.Expired}
	delete(s.multis, c.Token)
	for _, n := range names {
		if cur, held := s.lockGrant(n, c.Token); held {
			res.Locks = append(res.Locks, s.free(cur, nil, index, way))
		}
	}
	return res
}

// multiGrant reads live multi-grant token from its first name's lock.
func (s *state) multiGrant(token uint64) MultiGrant {
	names := s.multis[token]
	g := MultiGrant{Token: token, Names: slices.Clone(names)}
	if e, ok := s.lockGrant(names[0], token); ok {
		l := s.lockOf(e)
		g.Holder, g.Lease, g.TTLMillis, g.RequestID, g.Principal, g.GrantedAtMillis = l.Holder, l.Lease, l.TTLMillis, l.RequestID, l.Principal, l.GrantedAtMillis
		g.Mode = l.Mode
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
	if _, live := f.s.multis[token]; !live {
		return MultiGrant{}, false
	}
	return f.s.multiGrant(token), true
}

// IsMulti reports whether token is a live multi-grant's.
func (f *FSM) IsMulti(token uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, live := f.s.multis[token]
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
		tokens = append(tokens, t)
	}
	slices.Sort(tokens)
	return tokens
}

// multiRecords are the live multi-grants as a snapshot holds them.
func (s *state) multiRecords() []entry.MultiLock {
	out := make([]entry.MultiLock, 0, len(s.multis))
	for _, t := range s.multiTokens() {
		out = append(out, entry.MultiLock{Token: t, Names: slices.Clone(s.multis[t])})
	}
	return out
}

// restoreMultis adds a snapshot's multi-grants to s, whose locks are
// read: each name must be held with the grant's token (exclusively, or
// in shared mode: a shared multi-grant's names are shared grants), and
// with the same holder, secret and mode as its first.
func (s *state) restoreMultis(recs []entry.MultiLock) error {
	for _, m := range recs {
		first, ok := s.lockGrant(m.Names[0], m.Token)
		for _, n := range m.Names {
			e, held := s.lockGrant(n, m.Token)
			if !ok || !held || e.Holder() != first.Holder() || e.Secret() != first.Secret() || s.isShared(e) != s.isShared(first) || e.Session() != 0 {
				return fmt.Errorf("snapshot is inconsistent: multi-grant %d names lock %q, not held by it", m.Token, n)
			}
		}
		s.multis[m.Token] = slices.Clone(m.Names)
	}
	return nil
}
