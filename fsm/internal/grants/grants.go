// Package grants is the replicated grant history: the ring of the
// cluster's last grants and the last grants of each recently granted lock
// or semaphore, each bounded by the cluster's settings.
//
// It answers, after the fact, "whose write was token T?" and "who held
// lock L (or a permit of semaphore S) lately?". The FSM feeds it from
// applied entries only and carries it in snapshots, so every member
// answers the same (see fsm/DESIGN.md, "The grant history").
//
// It keeps two overlapping sets of grants, both bounded:
//   - the ring: the cluster's last Global grants, in token order; a token
//     lookup answers from it;
//   - per name (a lock, or a semaphore: the two are namespaces of their
//     own), its last PerLock grants, for at most Global names (those
//     granted most recently, locks and semaphores in one order), even when
//     the ring has moved past them; a lock's or semaphore's history
//     answers from it.
//
// A grant in both is stored twice (as values, 64 bytes each, its strings
// shared), which costs less than a pointer per grant would in allocations.
//
// A multi-grant (one token over several lock names) is one grant: the ring
// and a snapshot keep it once, under its first name, with its names beside
// it (History.multis, a record's Names); each of its names' histories
// keeps a copy under that name, so that every name's history shows it.
package grants

import (
	"cmp"
	"slices"
	"sort"

	"github.com/fencer-io/fencer/fsm/entry"
)

// Way is how a grant ended, as a Grant keeps it: an index into endWays.
type Way uint8

// The ways a grant ends (Held: it has not).
const (
	Held Way = iota
	Released
	Expired
	HandedOff
	Voided
	// Revoked: an operator ended it (fsm/revoke.go); it stays revoked in
	// the history even when the entry hands the name on.
	Revoked
)

// Kind is what a grant is of. Locks and semaphores are namespaces of their
// own, so a name's history is keyed by both.
type Kind uint8

const (
	OfLock Kind = iota
	OfPermit
)

var endWays = [...]string{Held: "", Released: entry.EndReleased, Expired: entry.EndExpired, HandedOff: entry.EndHandedOff, Voided: entry.EndVoided,
	Revoked: entry.EndRevoked}

func wayOf(s string) (Way, bool) {
	for i, w := range endWays {
		if w == s {
			return Way(i), true
		}
	}
	return 0, false
}

// Grant is an entry.GrantRecord in 64 bytes: the way and the kind are a
// byte each, and the strings are those of the grant as the lock table or
// the permit keeps it (no allocation per grant).
type Grant struct {
	Token, Granted, Ended uint64
	// Name is the lock's, or the semaphore's when Kind is OfPermit.
	Name, Holder string
	Way          Way
	Kind         Kind
	// Shared: a lock's shared grant (a byte of what was padding: a Grant
	// stays 64 bytes).
	Shared bool
}

// Record returns g as the record a snapshot and a read hold.
func (g *Grant) Record() entry.GrantRecord {
	r := entry.GrantRecord{Token: g.Token, Lock: g.Name, Holder: g.Holder, GrantedIndex: g.Granted,
		Ended: endWays[g.Way], EndedIndex: g.Ended}
	if g.Shared {
		r.Mode = entry.ModeShared
	}
	if g.Kind == OfPermit {
		r.Lock, r.Semaphore = "", g.Name
	}
	return r
}

// grantOf is Record's inverse (an unknown way reads as held: the
// snapshot's checks refuse one before a history is rebuilt from it).
func grantOf(r *entry.GrantRecord) Grant {
	way, _ := wayOf(r.Ended)
	g := Grant{Token: r.Token, Granted: r.GrantedIndex, Ended: r.EndedIndex, Name: r.Lock, Holder: r.Holder, Way: way,
		Shared: r.Mode == entry.ModeShared}
	if r.Semaphore != "" {
		g.Name, g.Kind = r.Semaphore, OfPermit
	}
	return g
}

// named is the key of a name's history.
type named struct {
	name string
	kind Kind
}

// History is a cluster's grant history. Nothing before the entry that set
// its settings is in it.
type History struct {
	cfg entry.GrantHistorySettings
	// from is the lowest token the ring accounts for: every grant with a
	// token at or above it is in the ring. It starts at the token the
	// SetGrantHistory entry would have had, and moves past each grant the
	// ring forgets.
	from uint64
	// permitsFrom is the lowest token from which permits are recorded
	// (0: none are, without cfg.Permits): from itself when the history
	// began with them, the token of the entry that asked for them when
	// that came later. A ring that does not hold a token between from and
	// permitsFrom cannot say it was no permit's.
	permitsFrom uint64
	ring        []Grant // circular once len == cfg.Global; ring[head] is the oldest
	head        int
	// locks are the per-name histories, in the order of their last grant
	// (oldest first), so that the name forgotten past cfg.Global names is
	// the one granted longest ago.
	locks         map[named]*lockGrants
	oldest, newer *lockGrants // the order's ends: oldest and newest
	// multis are the names of the multi-grants kept, by token; refs
	// counts the copies kept (the ring's, each name's), and the names go
	// with the last. A Grant has no room for them in its 64 bytes, and
	// multi-grants are few.
	multis map[uint64]*multiNames
}

type multiNames struct {
	names []string
	refs  int
}

// lockGrants is one name's last grants, oldest first, circular once full.
type lockGrants struct {
	recs       []Grant
	head       int
	prev, next *lockGrants // toward older and newer last grants
	key        named
}

// New returns an empty history under cfg whose ring starts at token from
// (and so do its permits, with cfg.Permits).
func New(cfg entry.GrantHistorySettings, from uint64) *History {
	h := &History{cfg: cfg, from: from, locks: map[named]*lockGrants{}, multis: map[uint64]*multiNames{}}
	if cfg.Permits {
		h.permitsFrom = from
	}
	return h
}

// Settings returns the settings the history keeps grants under.
func (h *History) Settings() entry.GrantHistorySettings { return h.cfg }

// From returns the lowest token the ring accounts for.
func (h *History) From() uint64 { return h.from }

// PermitsFrom returns the lowest token from which permits are recorded,
// 0 when they are not.
func (h *History) PermitsFrom() uint64 { return h.permitsFrom }

// RecordsPermits says that permits are recorded from token on: the token
// of the entry whose settings first asked for them, or a restored
// history's PermitsFrom. The settings must ask for them.
func (h *History) RecordsPermits(token uint64) { h.permitsFrom = token }

// Accounts reports whether every grant with token, lock or permit, would
// be in the ring: if it is not, there was none.
func (h *History) Accounts(token uint64) bool {
	return token >= h.from && h.permitsFrom != 0 && token >= h.permitsFrom
}

// ringAt is the i-th oldest grant of the ring.
func (h *History) ringAt(i int) *Grant {
	return &h.ring[(h.head+i)%len(h.ring)]
}

// Granted records a new grant, the newest of all.
func (h *History) Granted(g Grant) {
	if h.cfg.Global == 0 {
		h.from = g.Token + 1
		return
	}
	h.addToRing(g)
	h.addToLock(g)
	h.trimLocks()
}

// GrantedMulti records a new multi-grant of lock names (g's Name is the
// first): once in the ring, and in each name's history.
func (h *History) GrantedMulti(g Grant, names []string) {
	if h.cfg.Global == 0 {
		h.from = g.Token + 1
		return
	}
	h.multis[g.Token] = &multiNames{names: slices.Clone(names)}
	h.addToRing(g)
	for _, n := range names {
		c := g
		c.Name = n
		h.addToLock(c)
	}
	h.trimLocks()
}

// addToRing adds g to the ring, forgetting its oldest grant when full.
func (h *History) addToRing(g Grant) {
	h.kept(&g)
	if len(h.ring) < h.cfg.Global {
		h.ring = append(h.ring, g)
		return
	}
	h.from = h.ring[h.head].Token + 1
	h.forget(&h.ring[h.head])
	h.ring[h.head] = g
	h.head = (h.head + 1) % len(h.ring)
}

// trimLocks forgets the names granted longer ago than the ring reaches
// (Global other names have a newer grant), so that none of their grants
// is in the ring.
func (h *History) trimLocks() {
	for len(h.locks) > h.cfg.Global {
		h.forgetOldestLock()
	}
}

// kept and forget count a multi-grant's copies as they are stored and
// overwritten.
func (h *History) kept(g *Grant) {
	if m := h.multis[g.Token]; m != nil {
		m.refs++
	}
}

func (h *History) forget(g *Grant) {
	if m := h.multis[g.Token]; m != nil {
		if m.refs--; m.refs == 0 {
			delete(h.multis, g.Token)
		}
	}
}

// RecordOf returns g, kept by h, as a record: with its names when it is
// a multi-grant.
func (h *History) RecordOf(g *Grant) entry.GrantRecord {
	r := g.Record()
	if m := h.multis[g.Token]; m != nil {
		r.Names = slices.Clone(m.names)
	}
	return r
}

// addToLock adds g to its name's grants, which become the newest name's.
func (h *History) addToLock(g Grant) {
	if h.cfg.PerLock == 0 {
		return
	}
	key := named{g.Name, g.Kind}
	lg, ok := h.locks[key]
	if !ok {
		lg = &lockGrants{key: key}
		h.locks[key] = lg
	} else {
		h.unlink(lg)
	}
	h.link(lg)
	h.kept(&g)
	if old, ok := lg.add(g, h.cfg.PerLock); ok {
		h.forget(&old)
	}
}

// forgetOldestLock drops the grants of the name granted longest ago.
func (h *History) forgetOldestLock() {
	old := h.oldest
	h.unlink(old)
	delete(h.locks, old.key)
	for i := range old.recs {
		h.forget(&old.recs[i])
	}
}

// add keeps g, and returns the grant it overwrote when full.
func (lg *lockGrants) add(g Grant, max int) (Grant, bool) {
	if len(lg.recs) < max {
		lg.recs = append(lg.recs, g)
		return Grant{}, false
	}
	old := lg.recs[lg.head]
	lg.recs[lg.head] = g
	lg.head = (lg.head + 1) % len(lg.recs)
	return old, true
}

// at returns the i-th oldest grant kept.
func (lg *lockGrants) at(i int) *Grant { return &lg.recs[(lg.head+i)%len(lg.recs)] }

func (h *History) link(lg *lockGrants) {
	lg.prev, lg.next = h.newer, nil
	if h.newer != nil {
		h.newer.next = lg
	} else {
		h.oldest = lg
	}
	h.newer = lg
}

func (h *History) unlink(lg *lockGrants) {
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

// Ended records that the grant of name (a lock's or a semaphore's, as
// kind says) with token ended at index.
func (h *History) Ended(kind Kind, name string, token, index uint64, way Way) {
	if g := h.Find(token); g != nil {
		g.Ended, g.Way = index, way
	}
	// A lock's last grant, or the one before it when the entry handed the
	// lock to a waiter; a semaphore's, any of its last: permits end in
	// any order, so the walk goes back to the token at most PerLock.
	if lg, ok := h.locks[named{name, kind}]; ok {
		for i := len(lg.recs) - 1; i >= 0 && lg.at(i).Token >= token; i-- {
			if g := lg.at(i); g.Token == token {
				g.Ended, g.Way = index, way
			}
		}
	}
}

// Find returns the ring's grant with token, or nil.
func (h *History) Find(token uint64) *Grant {
	n := len(h.ring)
	i := sort.Search(n, func(i int) bool { return h.ringAt(i).Token >= token })
	if i < n && h.ringAt(i).Token == token {
		return h.ringAt(i)
	}
	return nil
}

// Last returns up to n of the last grants of name (a lock's or a
// semaphore's, as kind says), newest first.
func (h *History) Last(kind Kind, name string, n int) []entry.GrantRecord {
	lg, ok := h.locks[named{name, kind}]
	if !ok {
		return nil
	}
	n = min(n, len(lg.recs))
	out := make([]entry.GrantRecord, 0, n)
	for i := len(lg.recs) - 1; i >= len(lg.recs)-n; i-- {
		out = append(out, h.RecordOf(lg.at(i)))
	}
	return out
}

// Captured is every grant a history kept, each once: the per-lock grants
// older than the ring, then the ring, oldest first. A multi-grant is one
// grant, under its first name, with its names (multis).
type Captured struct {
	older, ring []Grant
	multis      map[uint64][]string
}

// Capture copies every grant kept. It runs under the FSM's lock, so it
// only copies; Sort, Records and Each run outside it.
func (h *History) Capture() Captured {
	c := Captured{multis: make(map[uint64][]string, len(h.multis))}
	for t, m := range h.multis {
		c.multis[t] = m.names // never changed once kept
	}
	var first uint64 // the ring's oldest token
	if len(h.ring) > 0 {
		first = h.ringAt(0).Token
	}
	seen := map[uint64]bool{} // multi-grants older than the ring
	for _, lg := range h.locks {
		for i := range lg.recs {
			g := *lg.at(i)
			if len(h.ring) > 0 && g.Token >= first {
				continue
			}
			if names := c.multis[g.Token]; names != nil {
				if seen[g.Token] {
					continue
				}
				seen[g.Token], g.Name = true, names[0]
			}
			c.older = append(c.older, g)
		}
	}
	c.ring = make([]Grant, 0, len(h.ring))
	c.ring = append(c.ring, h.ring[h.head:]...)
	c.ring = append(c.ring, h.ring[:h.head]...)
	return c
}

// Sort puts the grants in token order (the ring already is).
func (c Captured) Sort() {
	slices.SortFunc(c.older, func(a, b Grant) int { return cmp.Compare(a.Token, b.Token) })
}

// Len counts the grants captured; RingLen those of the ring.
func (c Captured) Len() int     { return len(c.older) + len(c.ring) }
func (c Captured) RingLen() int { return len(c.ring) }

// Shared counts the shared grants captured.
func (c Captured) Shared() int {
	n := 0
	for _, part := range [][]Grant{c.older, c.ring} {
		for i := range part {
			if part[i].Shared {
				n++
			}
		}
	}
	return n
}

// Each calls fn with every grant as a record in token order, the ring
// last: what a snapshot holds. Call Sort first.
func (c Captured) Each(fn func(*entry.GrantRecord)) {
	for _, part := range [][]Grant{c.older, c.ring} {
		for i := range part {
			r := part[i].Record()
			r.Names = c.multis[r.Token]
			fn(&r)
		}
	}
}

// Records returns the grants as Each hands them over, sorting them first.
func (c Captured) Records() []entry.GrantRecord {
	c.Sort()
	out := make([]entry.GrantRecord, 0, c.Len())
	c.Each(func(r *entry.GrantRecord) { out = append(out, *r) })
	return out
}

// Resize returns the history that cfg keeps of h's grants: h itself when
// only Permits changes (what it keeps is the same).
func (h *History) Resize(cfg entry.GrantHistorySettings) *History {
	if cfg.Sizes() == h.cfg.Sizes() {
		h.cfg = cfg
		return h
	}
	c := h.Capture()
	out := Rebuild(cfg, h.from, c.Records(), c.RingLen(), nil)
	out.permitsFrom = h.permitsFrom
	return out
}

// Rebuild builds the history that holds recs (sorted by token, the last
// ring of them the ring), as Captured.Records wrote it; with other settings
// than the ones recs were kept under, it is what those settings keep of
// them. A lock's history is its last cfg.PerLock grants among recs, and
// the cfg.Global locks granted last keep one.
//
// held, when not nil, returns the lock name and holder of lock's held
// grant if its token is token, which a record of that grant shares
// instead of keeping strings of its own. (Permits are few next to locks,
// a semaphore's limit bounding them, and keep their own strings.)
//
// A history that started recording permits after it began gets its
// PermitsFrom back with RecordsPermits (New sets it to from).
func Rebuild(cfg entry.GrantHistorySettings, from uint64, recs []entry.GrantRecord, ring int, held func(lock string, token uint64) (name, holder string, ok bool)) *History {
	h := New(cfg, from)
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
		g := grantOf(&recs[i])
		names := []string{g.Name}
		if len(recs[i].Names) > 1 && g.Kind == OfLock {
			names = recs[i].Names
			h.multis[g.Token] = &multiNames{names: slices.Clone(names)}
		}
		for j, n := range names {
			c := g
			c.Name = n
			if held != nil && c.Kind == OfLock {
				if name, holder, ok := held(n, c.Token); ok {
					c.Name, c.Holder = name, holder
				}
			}
			if j == 0 && i >= start {
				h.kept(&c)
				h.ring = append(h.ring, c)
			}
			h.addToLock(c)
		}
	}
	h.trimLocks()
	return h
}
