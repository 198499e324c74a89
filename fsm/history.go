package fsm

import (
	"fmt"
	"sort"

	"github.com/fencer-io/fencer/fsm/entry"
)

// The grant history answers, after the fact, "whose write was token T?" and
// "who held lock L lately?". It is replicated state like the locks: built
// from applied entries only, carried in snapshots, so that every member
// answers the same (see DESIGN.md, "The grant history").
//
// It keeps two overlapping sets of grants, both bounded:
//   - the ring: the cluster's last Global grants, in token order; a token
//     lookup answers from it;
//   - per lock, its last PerLock grants, for at most Global locks (those
//     granted most recently), even when the ring has moved past them; a
//     lock's history answers from it.
//
// A grant in both is stored twice (as values, 64 bytes each, its strings
// shared), which costs less than a pointer per grant would in allocations.

// grantRec is an entry.GrantRecord in 64 bytes: the way is a byte, and the strings
// are those of the grant's lockEntry (no allocation per grant).
type grantRec struct {
	token, granted, ended uint64
	lock, holder          string
	way                   uint8
}

// The ways as grantRec keeps them: indexes into endWays.
const (
	wayHeld uint8 = iota
	wayReleased
	wayExpired
	wayHandedOff
	wayVoided
)

var endWays = [...]string{wayHeld: "", wayReleased: entry.EndReleased, wayExpired: entry.EndExpired, wayHandedOff: entry.EndHandedOff, wayVoided: entry.EndVoided}

func wayOf(s string) (uint8, bool) {
	for i, w := range endWays {
		if w == s {
			return uint8(i), true
		}
	}
	return 0, false
}

func (r *grantRec) record() entry.GrantRecord {
	return entry.GrantRecord{Token: r.token, Lock: r.lock, Holder: r.holder, GrantedIndex: r.granted,
		Ended: endWays[r.way], EndedIndex: r.ended}
}

// grantHistory is the state's grant history; nil until the cluster's
// settings are applied (SetGrantHistory), and then nothing before that
// entry is in it.
type grantHistory struct {
	cfg entry.GrantHistorySettings
	// from is the lowest token the ring accounts for: every grant with a
	// token at or above it is in the ring. It starts at the token the
	// SetGrantHistory entry would have had, and moves past each grant the
	// ring forgets.
	from uint64
	ring []grantRec // circular once len == cfg.Global; ring[head] is the oldest
	head int
	// locks are the per-lock histories, in the order of their last grant
	// (oldest first), so that the lock forgotten past cfg.Global locks is
	// the one granted longest ago.
	locks         map[string]*lockGrants
	oldest, newer *lockGrants // the order's ends: oldest and newest
}

// lockGrants is one lock's last grants, oldest first, circular once full.
type lockGrants struct {
	recs       []grantRec
	head       int
	prev, next *lockGrants // toward older and newer last grants
	name       string
}

func newGrantHistory(cfg entry.GrantHistorySettings, from uint64) *grantHistory {
	return &grantHistory{cfg: cfg, from: from, locks: map[string]*lockGrants{}}
}

// ringAt is the i-th oldest grant of the ring.
func (h *grantHistory) ringAt(i int) *grantRec {
	return &h.ring[(h.head+i)%len(h.ring)]
}

// granted records a new grant, the newest of all.
func (h *grantHistory) granted(r grantRec) {
	if h.cfg.Global == 0 {
		h.from = r.token + 1
		return
	}
	if len(h.ring) < h.cfg.Global {
		h.ring = append(h.ring, r)
	} else {
		h.from = h.ring[h.head].token + 1
		h.ring[h.head] = r
		h.head = (h.head + 1) % len(h.ring)
	}
	if h.cfg.PerLock == 0 {
		return
	}
	lg, ok := h.locks[r.lock]
	if !ok {
		lg = &lockGrants{name: r.lock}
		h.locks[r.lock] = lg
	} else {
		h.unlink(lg)
	}
	h.link(lg)
	lg.add(r, h.cfg.PerLock)
	if len(h.locks) > h.cfg.Global {
		// Granted longer ago than the ring reaches (Global other locks
		// have a newer grant), so none of its grants is in the ring.
		old := h.oldest
		h.unlink(old)
		delete(h.locks, old.name)
	}
}

func (lg *lockGrants) add(r grantRec, max int) {
	if len(lg.recs) < max {
		lg.recs = append(lg.recs, r)
		return
	}
	lg.recs[lg.head] = r
	lg.head = (lg.head + 1) % len(lg.recs)
}

// at returns the i-th oldest grant kept.
func (lg *lockGrants) at(i int) *grantRec { return &lg.recs[(lg.head+i)%len(lg.recs)] }

func (h *grantHistory) link(lg *lockGrants) {
	lg.prev, lg.next = h.newer, nil
	if h.newer != nil {
		h.newer.next = lg
	} else {
		h.oldest = lg
	}
	h.newer = lg
}

func (h *grantHistory) unlink(lg *lockGrants) {
	if lg.prev != nil {
		lg.prev.next = lg.next
	} else {
		h.oldest = lg.next
	}
	if lg.next != nil {
		lg.next.prev = lg.prev
	} else {
		h.newer = lg.prev
	}
	lg.prev, lg.next = nil, nil
}

// ended records that the grant of lock with token ended at index.
func (h *grantHistory) ended(lock string, token, index uint64, way uint8) {
	if r := h.find(token); r != nil {
		r.ended, r.way = index, way
	}
	// The lock's last grant, or the one before it when the entry handed
	// the lock to a waiter.
	if lg, ok := h.locks[lock]; ok {
		for i := len(lg.recs) - 1; i >= 0 && lg.at(i).token >= token; i-- {
			if r := lg.at(i); r.token == token {
				r.ended, r.way = index, way
			}
		}
	}
}

// find returns the ring's grant with token, or nil.
func (h *grantHistory) find(token uint64) *grantRec {
	n := len(h.ring)
	i := sort.Search(n, func(i int) bool { return h.ringAt(i).token >= token })
	if i < n && h.ringAt(i).token == token {
		return h.ringAt(i)
	}
	return nil
}

// capture copies every grant kept, each once: the per-lock grants older
// than the ring (in no order) and the ring, oldest first. It runs under the
// FSM's lock, so it only copies; records sorts and converts outside it.
func (h *grantHistory) capture() (older, ring []grantRec) {
	var first uint64 // the ring's oldest token
	if len(h.ring) > 0 {
		first = h.ringAt(0).token
	}
	for _, lg := range h.locks {
		for i := range lg.recs {
			if r := lg.at(i); len(h.ring) == 0 || r.token < first {
				older = append(older, *r)
			}
		}
	}
	ring = make([]grantRec, 0, len(h.ring))
	ring = append(ring, h.ring[h.head:]...)
	ring = append(ring, h.ring[:h.head]...)
	return older, ring
}

// records returns what capture copied as records in token order, the ring
// last: what a snapshot holds, and what rebuildHistory reads.
func records(older, ring []grantRec) []entry.GrantRecord {
	sort.Slice(older, func(i, j int) bool { return older[i].token < older[j].token })
	out := make([]entry.GrantRecord, 0, len(older)+len(ring))
	for i := range older {
		out = append(out, older[i].record())
	}
	for i := range ring {
		out = append(out, ring[i].record())
	}
	return out
}

// rebuildHistory builds the history that holds recs (sorted by token, the
// last ring of them the ring), as records wrote it; with other settings
// than the ones recs were kept under, it is what those settings keep of
// them. A lock's history is its last cfg.PerLock grants among recs, and
// the cfg.Global locks granted last keep one.
//
// held, when not nil, returns the held grant of a lock, whose strings a
// record of that grant shares instead of keeping its own.
func rebuildHistory(cfg entry.GrantHistorySettings, from uint64, recs []entry.GrantRecord, ring int, held func(lock string) *lockEntry) *grantHistory {
	h := newGrantHistory(cfg, from)
	if cfg.Global == 0 {
		return h
	}
	ring = min(ring, cfg.Global)
	if ring < len(recs) && ring > 0 {
		// The ring is shorter than it was: what it forgets moves from.
		h.from = max(h.from, recs[len(recs)-ring-1].Token+1)
	}
	start := len(recs) - ring
	for i := range recs {
		r := recs[i]
		way, _ := wayOf(r.Ended)
		g := grantRec{token: r.Token, granted: r.GrantedIndex, ended: r.EndedIndex, lock: r.Lock, holder: r.Holder, way: way}
		if held != nil {
			if e := held(r.Lock); e != nil && e.token == r.Token {
				g.lock, g.holder = e.name(), e.holder()
			}
		}
		if i >= start {
			h.ring = append(h.ring, g)
		}
		if cfg.PerLock == 0 {
			continue
		}
		lg, ok := h.locks[g.lock]
		if !ok {
			lg = &lockGrants{name: g.lock}
			h.locks[g.lock] = lg
		} else {
			h.unlink(lg)
		}
		h.link(lg)
		lg.add(g, cfg.PerLock)
	}
	for len(h.locks) > cfg.Global {
		old := h.oldest
		h.unlink(old)
		delete(h.locks, old.name)
	}
	return h
}

// TokenLookup says why a token is not in the history.
type TokenLookup int

const (
	// TokenFound: the grant is in the history.
	TokenFound TokenLookup = iota
	// TokenNotKept: the token may have been a grant, older than the
	// history reaches (or granted before the cluster kept one).
	TokenNotKept
	// TokenNeverIssued: no grant has had this token; it is above every
	// token issued, or within the history's reach and not a lock grant.
	TokenNeverIssued
	// TokenNoHistory: the cluster keeps no grant history (not yet
	// configured, or configured with a size of 0).
	TokenNoHistory
)

// GrantOf returns the grant that had token, or why it cannot.
func (f *FSM) GrantOf(token uint64) (entry.GrantRecord, TokenLookup) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h := f.s.history
	switch {
	case token == 0 || token > f.s.lastToken:
		return entry.GrantRecord{}, TokenNeverIssued
	case h == nil || h.cfg.Global == 0:
		return entry.GrantRecord{}, TokenNoHistory
	case token < h.from:
		return entry.GrantRecord{}, TokenNotKept
	}
	if r := h.find(token); r != nil {
		return r.record(), TokenFound
	}
	return entry.GrantRecord{}, TokenNeverIssued
}

// GrantHistory returns up to n of lock's last grants, newest first, and the
// applied index they were read at.
func (f *FSM) GrantHistory(lock string, n int) ([]entry.GrantRecord, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h := f.s.history
	if h == nil {
		return nil, f.applied
	}
	lg, ok := h.locks[lock]
	if !ok {
		return nil, f.applied
	}
	n = min(n, len(lg.recs))
	out := make([]entry.GrantRecord, 0, n)
	for i := len(lg.recs) - 1; i >= len(lg.recs)-n; i-- {
		out = append(out, lg.at(i).record())
	}
	return out, f.applied
}

// GrantHistorySettings returns the cluster's history settings, and false
// while it has none (not yet set by its leader, or an older cluster's log).
func (f *FSM) GrantHistorySettings() (entry.GrantHistorySettings, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.s.history == nil {
		return entry.GrantHistorySettings{}, false
	}
	return f.s.history.cfg, true
}

// applySetGrantHistory fixes the settings (the first starts the history
// at its entry) or changes them: the history then keeps what the new
// settings keep of what it had.
func applySetGrantHistory(s *state, c *entry.SetGrantHistory, index uint64) any {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%w: %v", entry.ErrMalformedCommand, err)
	}
	if s.history == nil {
		s.history = newGrantHistory(c.GrantHistorySettings, entry.MakeToken(s.epoch, index))
		return c.GrantHistorySettings
	}
	if s.history.cfg != c.GrantHistorySettings {
		h := s.history
		older, ring := h.capture()
		s.history = rebuildHistory(c.GrantHistorySettings, h.from, records(older, ring), len(ring), nil)
	}
	return c.GrantHistorySettings
}
