package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fencer-io/fencer/fsm/entry"
)

// Sessions (issue 27): one lease for many grants. The checker learns of a
// session from its SessionCreate's event and of its end from its
// SessionEnd's, and of a grant's session from the grant's event; a
// renewal and a promotion restart its lease (SessionRestarted, Promoted).

// Session is a session the checker believes live.
type Session struct {
	ID        uint64
	Holder    string
	RequestID string
	TTL       time.Duration
	LockDelay time.Duration
	// Start is when the leader last (re)started its lease: the entry that
	// opened it, a renewal, a retry answered with it, or a promotion.
	Start time.Time
}

// SessionView is a live session as the FSM holds it, for CheckSessions.
type SessionView struct {
	ID        uint64
	Holder    string
	TTL       time.Duration
	LockDelay time.Duration
	Grants    []GrantRef
}

// GrantRef names one grant.
type GrantRef struct {
	Key   Key
	Token uint64
}

func (g GrantRef) String() string { return fmt.Sprintf("%s:%d", g.Key, g.Token) }

// owed is a name a session's end freed while waiters were queued for it:
// slots of it are owed to the requests queued then, before anybody else.
type owed struct {
	session uint64
	end     uint64
	slots   int
	reqs    map[string]bool
}

const (
	invNothingSurvives = "nothing a session held survives its end"
	invServedAfterEnd  = "freed names served after a session's end"
)

// nothingSurvivesItsSession: no grant under a session is granted once the
// session has ended (or under one the log never opened). That no grant
// outlives its session's end is checked by endEndsAll in the entry, and by
// Settled after each step.
func nothingSurvivesItsSession(c *Checker, e *Effect) string {
	for _, g := range e.Started {
		if g.Session == 0 {
			continue
		}
		if end, ok := c.ended[g.Session]; ok {
			return fmt.Sprintf("%s granted token %d to %s under session %d, which ended at index %d", g.Key, g.Token, g.Holder, g.Session, end)
		}
		if c.sessions[g.Session] == nil {
			return fmt.Sprintf("%s granted token %d to %s under session %d, which the log never opened", g.Key, g.Token, g.Holder, g.Session)
		}
	}
	return ""
}

// endEndsAll: a session's end ends, in its one entry, every grant that was
// live under it, and no grant under another session or none.
func endEndsAll(c *Checker, e *Effect) string {
	s := e.SessionEnded
	if s == nil {
		return ""
	}
	want := c.sessionGrantsLocked(s.ID)
	var got, stray []GrantRef
	for _, end := range e.Ended {
		g := c.live[end.Key][end.Token]
		switch {
		case g == nil:
		case g.Session != s.ID:
			stray = append(stray, GrantRef{end.Key, end.Token})
		default:
			got = append(got, GrantRef{end.Key, end.Token})
		}
	}
	if len(stray) > 0 {
		return fmt.Sprintf("session %d's end ends %v, not under it", s.ID, stray)
	}
	sortRefs(got)
	if !slices.Equal(got, want) {
		return fmt.Sprintf("session %d's end ends %d of its %d grants: %v of %v", s.ID, len(got), len(want), got, want)
	}
	return ""
}

// noEarlySessionEnd: the leader proposes a session's expiry only once its
// own clock has reached the session's last start plus its TTL, and never
// expires a grant under a session on its own (it has no lease of its own:
// only its session's end ends it, unless it is released).
func noEarlySessionEnd(c *Checker, cmd entry.Command, now time.Time) string {
	var g *Grant
	switch x := cmd.(type) {
	case *entry.SessionEnd:
		s := c.sessions[x.Session]
		if x.Expired && s != nil && now.Before(s.Start.Add(s.TTL)) {
			return fmt.Sprintf("expiry of session %d (%s) proposed %v after its lease last started, its TTL is %v",
				s.ID, s.Holder, now.Sub(s.Start), s.TTL)
		}
	case *entry.Expire:
		g = c.live[Key{Lock, x.Lock}][x.Token]
	case *entry.SemExpire:
		g = c.live[Key{Semaphore, x.Semaphore}][x.Token]
	}
	if g != nil && g.Session != 0 {
		return fmt.Sprintf("expiry of %s's grant %d (%s) proposed on its own; it lives under session %d, which times it",
			g.Key, g.Token, g.Holder, g.Session)
	}
	return ""
}

// servedAfterSessionEnd: a name a session's end frees (no lock-delay
// starting) while waiters are queued for it goes to them, in that entry
// (the one hand-off it may carry: one entry mints one token) or in the
// entries right after, before any other acquire has it. The end offers a
// waiter one of them; no entry grants an owed name to a request that was
// not queued when the end freed it; and once the step settles nothing is
// owed (Settled).
func servedAfterSessionEnd(c *Checker, e *Effect) string {
	if s := e.SessionEnded; s != nil && !e.Unanswered {
		x := e.Cmd.(*entry.SessionEnd)
		if len(x.Next)+len(x.NextPermits) == 0 {
			for k, n := range e.SessionFreed {
				if n > 0 && len(c.queued[k]) > 0 && !c.keptLocked(k) {
					return fmt.Sprintf("session %d's end frees %s with %d waiters queued (%v) and offers none of its names to any",
						s.ID, k, len(c.queued[k]), sortedKeys(c.queued[k]))
				}
			}
		}
	}
	for _, g := range e.Started {
		if o := c.owed[g.Key]; o != nil && !o.reqs[g.RequestID] {
			return fmt.Sprintf("%s granted token %d to %s's request %q ahead of the waiters %v queued when session %d's end at index %d freed it",
				g.Key, g.Token, g.Holder, g.RequestID, sortedKeys(o.reqs), o.session, o.end)
		}
	}
	return ""
}

// freedLocked counts the slots of each name a session's end frees for a
// waiter: every grant it ends, but those whose lock-delay starts there.
func (c *Checker) freedLocked(e *Effect) map[Key]int {
	freed := map[Key]int{}
	for _, end := range e.Ended {
		if g := c.live[end.Key][end.Token]; g != nil && !(end.Expired && g.LockDelay > 0) {
			freed[end.Key]++
		}
	}
	return freed
}

// applySessionLocked moves the checker's sessions past an entry.
func (c *Checker) applySessionLocked(e *Effect) {
	if s := e.SessionStarted; s != nil {
		c.sessions[s.ID] = s
		c.lastToken = max(c.lastToken, s.ID)
	}
	// What an owed name's queue did in this entry.
	for _, g := range e.Started {
		c.unowe(g.Key, g.RequestID, true)
	}
	switch x := e.Cmd.(type) {
	case *entry.Acquire:
		c.unowe(Key{Lock, x.Lock}, x.RequestID, false)
	case *entry.SemAcquire:
		c.unowe(Key{Semaphore, x.Semaphore}, x.RequestID, false)
	}
	s := e.SessionEnded
	if s == nil {
		return
	}
	delete(c.sessions, s.ID)
	c.ended[s.ID] = e.Index
	c.newlyEnded = append(c.newlyEnded, s.ID)
	if e.Unanswered {
		// Its proposer does not know the names are free: it serves them
		// when something next frees them or a wait ends.
		return
	}
	// The waiters queued as it was applied (applyLocked has taken out the
	// one it offered, and its grant was counted above).
	for k, n := range e.SessionFreed {
		for _, g := range e.Started {
			if g.Key == k {
				n--
			}
		}
		if n > 0 && len(c.queued[k]) > 0 && !c.keptLocked(k) {
			c.owed[k] = &owed{session: s.ID, end: e.Index, slots: n, reqs: maps.Clone(c.queued[k])}
		}
	}
}

// unowe says request req for k left its queue (granted: it got a slot).
func (c *Checker) unowe(k Key, req string, granted bool) {
	o := c.owed[k]
	if o == nil || !o.reqs[req] {
		return
	}
	delete(o.reqs, req)
	if granted {
		o.slots--
		c.counts["freed names served after a session's end"]++
	}
	if o.slots <= 0 || len(o.reqs) == 0 {
		delete(c.owed, k)
	}
}

func (c *Checker) countSessionLocked(e *Effect) {
	if e.SessionStarted != nil {
		c.counts["sessions opened"]++
	}
	s := e.SessionEnded
	if s == nil {
		return
	}
	c.counts["session ends"]++
	if e.SessionExpired {
		c.counts["session expiries"]++
	}
	c.counts["grants ended by a session's end"] += len(e.Ended)
	if len(e.Ended) > 1 {
		c.counts["session ends of several grants"]++
	}
	for k, n := range e.SessionFreed {
		if n > 0 && len(c.queued[k]) > 0 {
			c.counts["session ends freeing a name with waiters"]++
			break
		}
	}
}

// sessionGrantsLocked lists the live grants under session id, sorted.
func (c *Checker) sessionGrantsLocked(id uint64) []GrantRef {
	var out []GrantRef
	for k, gs := range c.live {
		for t, g := range gs {
			if g.Session == id {
				out = append(out, GrantRef{k, t})
			}
		}
	}
	sortRefs(out)
	return out
}

func sortRefs(rs []GrantRef) {
	slices.SortFunc(rs, func(a, b GrantRef) int {
		switch {
		case a.Token < b.Token:
			return -1
		case a.Token > b.Token:
			return 1
		}
		return 0
	})
}

// Settled checks, once a step has settled, what may take several entries:
// no grant outlives its session's end, and nothing a session's end freed is
// still owed to the waiters queued then.
func (c *Checker) Settled() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, gs := range c.live {
		for t, g := range gs {
			if end, ok := c.ended[g.Session]; ok && g.Session != 0 {
				c.failLocked(invNothingSurvives, "%s's grant %d (%s) under session %d is still held after the session's end at index %d", k, t, g.Holder, g.Session, end)
			}
		}
	}
	c.settleMultiLocked()
	for k, o := range c.owed {
		c.failLocked(invServedAfterEnd, "session %d's end at index %d freed %s with waiters %v queued: %d slot(s) of it still not served",
			o.session, o.end, k, sortedKeys(o.reqs), o.slots)
		delete(c.owed, k)
	}
}

// CheckSessions compares the FSM's live sessions (views) with the
// checker's, and its ended ones: ended reports whether the FSM remembers
// id as ended.
func (c *Checker) CheckSessions(views []SessionView, ended func(id uint64) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	const inv = "sessions as the log says"
	seen := map[uint64]bool{}
	for _, v := range views {
		seen[v.ID] = true
		s := c.sessions[v.ID]
		if s == nil {
			if end, ok := c.ended[v.ID]; ok {
				c.failLocked(inv, "the FSM holds session %d live, which ended at index %d", v.ID, end)
			} else {
				c.failLocked(inv, "the FSM holds session %d live, which the log never opened", v.ID)
			}
			continue
		}
		if v.Holder != s.Holder || v.TTL != s.TTL || v.LockDelay != s.LockDelay {
			c.failLocked(inv, "the FSM holds session %d as %s, ttl %v, lock-delay %v; its log says %s, %v, %v",
				v.ID, v.Holder, v.TTL, v.LockDelay, s.Holder, s.TTL, s.LockDelay)
		}
		got := slices.Clone(v.Grants)
		sortRefs(got)
		if want := c.sessionGrantsLocked(v.ID); !slices.Equal(got, want) {
			c.failLocked(inv, "the FSM holds session %d with grants %v, its log says %v", v.ID, got, want)
		}
	}
	for id := range c.sessions {
		if !seen[id] {
			c.failLocked(inv, "the FSM does not hold session %d live, which its log opened and never ended", id)
		}
	}
	// Each ended session once, the step it ended: the FSM remembers the
	// ended lately (bounded), and asking about every one each step would
	// cost the run more than the rest of the check.
	for _, id := range c.newlyEnded {
		if !ended(id) {
			c.failLocked(inv, "the FSM does not remember session %d as ended, which ended at index %d", id, c.ended[id])
		}
	}
	c.newlyEnded = c.newlyEnded[:0]
}

// SessionRestarted says the leader restarted session id's lease at now (a
// renewal, or a retried create answered with it).
func (c *Checker) SessionRestarted(id uint64, now time.Time) {
	c.mu.Lock()
	if s := c.sessions[id]; s != nil {
		s.Start = now
	}
	c.mu.Unlock()
}

// SessionOf returns session id as the checker believes it: live, ended
// (at index end), or neither (never opened).
func (c *Checker) SessionOf(id uint64) (s Session, live bool, end uint64, ended bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if x := c.sessions[id]; x != nil {
		return *x, true, 0, false
	}
	end, ended = c.ended[id]
	return Session{}, false, end, ended
}

// LiveSessions returns the live sessions' ids, sorted.
func (c *Checker) LiveSessions() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sortedKeys(c.sessions)
}

// SessionGrants lists the live grants under session id, sorted by token.
func (c *Checker) SessionGrants(id uint64) []GrantRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionGrantsLocked(id)
}
