// Package sim is the model side of coord's deterministic simulation
// (coord/sim_test.go): a clock that stops at each instant a timer is due
// (Clock), and a Checker that follows every proposal and applied entry of
// the fake Raft log and holds the engine to its invariants. It knows
// nothing of coord's internals: what it sees is the commands proposed, the
// events the FSM reports for each applied entry, the clock, and what the
// simulation tells it of its own clients (a waiter queued, a lease renewed,
// a leader promoted).
package sim

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
)

// Kind is the primitive a name belongs to; each has a namespace of its own.
type Kind int

// The kinds of names.
const (
	Lock Kind = iota
	Semaphore
)

func (k Kind) String() string {
	if k == Semaphore {
		return "semaphore"
	}
	return "lock"
}

// Key is a name of one kind.
type Key struct {
	Kind Kind
	Name string
}

func (k Key) String() string { return fmt.Sprintf("%s %q", k.Kind, k.Name) }

// Grant is a grant the checker believes held.
type Grant struct {
	Key       Key
	Token     uint64
	Holder    string
	RequestID string
	TTL       time.Duration
	LockDelay time.Duration
	// Start is when the leader last (re)started its lease: the entry that
	// granted it, a renewal, a retry answered with it, or a promotion.
	Start time.Time
	// Session is the session the grant lives under (0: none); its TTL and,
	// unless it asked for one of its own, its lock-delay are the session's.
	Session uint64
}

// Delay is a running lock-delay (of a lock, or of a semaphore's slot).
type Delay struct {
	Key    Key
	Since  uint64
	Length time.Duration
	Start  time.Time
}

// Ended is a grant an entry ended.
type Ended struct {
	Key     Key
	Token   uint64
	Expired bool
}

// Effect is what one applied entry did, read from its command and its
// events: what every invariant is checked against, before the checker's
// state moves past it.
type Effect struct {
	Index uint64
	Cmd   entry.Command
	Now   time.Time
	// Frees is the name a Release, Expire, SemRelease, SemExpire or
	// EndDelay frees; Next the waiter's acquire it carries for it.
	Frees      *Key
	Next       *Offer
	Started    []*Grant
	Ended      []Ended
	DelayEnded *Delay // the running delay an EndDelay names, if the checker knows it
	// SessionStarted is the session a SessionCreate opened; SessionEnded
	// the live session a SessionEnd ended (SessionExpired: by expiry).
	SessionStarted *Session
	SessionEnded   *Session
	SessionExpired bool
	// SessionFreed counts the slots of each name a session's end frees for
	// a waiter (freedLocked).
	SessionFreed map[Key]int
	// Unanswered: the leader proposing the entry was told its outcome is
	// unknown, and so does not know what it did.
	Unanswered bool
}

// Offer is an acquire carried by a freeing entry for the head waiter.
type Offer struct {
	RequestID string
	Holder    string
	Session   uint64 // the session it is under (0: none)
}

// Invariant is one property of the engine. Applied is checked against
// every applied entry before the checker's state moves past it, Proposed
// against every proposal (committed or not), State against the FSM's state
// after every step; each returns "" or what is wrong. Any may be nil.
type Invariant struct {
	Name     string
	Applied  func(c *Checker, e *Effect) string
	Proposed func(c *Checker, cmd entry.Command, now time.Time) string
}

// Invariants are the properties the simulation holds the engine to. Each
// planted bug in DESIGN.md's "The simulation" fails one of them.
//
// The sessions' are in sessions.go; those checked once a step has settled
// (a grant that outlived its session, a freed name left unserved) are in
// Settled.
var Invariants = []Invariant{
	{Name: "holders within policy", Applied: holdersWithinPolicy},
	{Name: "tokens increase", Applied: tokensIncrease},
	{Name: "served in the freeing entry", Applied: servedInFreeingEntry},
	{Name: "no lease ends early", Proposed: noEarlyEnd},
	{Name: invNothingSurvives, Applied: nothingSurvivesItsSession},
	{Name: "a session's end ends all its grants", Applied: endEndsAll},
	{Name: "no session ends early", Proposed: noEarlySessionEnd},
	{Name: invServedAfterEnd, Applied: servedAfterSessionEnd},
	{Name: "a multi-grant is one grant", Applied: oneMultiGrant},
	{Name: "multi-acquires in FIFO order", Applied: multiInOrder},
}

// Checker follows the log and holds it to Invariants. Its methods are safe
// to call from the fake Raft's hook and the FSM's observer.
type Checker struct {
	mu     sync.Mutex
	limits map[Key]int
	live   map[Key]map[uint64]*Grant
	delays map[Key]map[uint64]*Delay
	// queued are the request ids of the simulation's clients queued for a
	// name (registered before the call), until an entry offers or grants
	// them or the client is answered.
	queued map[Key]map[string]bool
	// granted are the request ids that ever produced a grant, by name.
	granted  map[Key]map[string]bool
	sessions map[uint64]*Session
	// ended are the sessions the log ended, each with its end's index.
	ended map[uint64]uint64
	// newlyEnded are those ended since the last CheckSessions.
	newlyEnded []uint64
	// owed are the names a session's end freed while waiters were queued
	// for them, until the waiters queued then are served (invariant
	// "freed names served after a session's end").
	owed map[Key]*owed
	// multiReqs are the request ids of the multi-acquires in queued;
	// multis the names of the live multi-grants, by token (multi.go).
	multiReqs map[string]bool
	multis    map[uint64][]string
	// order is the order in which requests were queued for each name.
	order map[Key][]string
	// waitEnds are when the queued requests' waits end (WaitEnds).
	waitEnds map[string]time.Time
	// passed and unserved are judged once the step settles (multi.go).
	passed    []passed
	unserved  map[string]bool
	lastToken uint64
	step      int
	failures  []string
	counts    map[string]int
}

// NewChecker returns a checker of names whose policy allows limit[key]
// holders at once (a lock: 1).
func NewChecker(limits map[Key]int) *Checker {
	return &Checker{limits: limits, live: map[Key]map[uint64]*Grant{}, delays: map[Key]map[uint64]*Delay{},
		queued: map[Key]map[string]bool{}, granted: map[Key]map[string]bool{}, counts: map[string]int{},
		sessions: map[uint64]*Session{}, ended: map[uint64]uint64{}, owed: map[Key]*owed{},
		multiReqs: map[string]bool{}, multis: map[uint64][]string{}, order: map[Key][]string{}, waitEnds: map[string]time.Time{},
		unserved: map[string]bool{}}
}

// SetStep names the simulation's step in failures from now on.
func (c *Checker) SetStep(n int) {
	c.mu.Lock()
	c.step = n
	c.mu.Unlock()
}

func (c *Checker) failLocked(invariant, format string, args ...any) {
	if len(c.failures) < 20 {
		c.failures = append(c.failures, fmt.Sprintf("step %d: %s: %s", c.step, invariant, fmt.Sprintf(format, args...)))
	}
}

// Failures returns what was found wrong so far.
func (c *Checker) Failures() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.failures)
}

// Proposed checks a proposal, committed or not, at the leader's time now.
func (c *Checker) Proposed(cmd entry.Command, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, inv := range Invariants {
		if inv.Proposed != nil {
			if why := inv.Proposed(c, cmd, now); why != "" {
				c.failLocked(inv.Name, "%s", why)
			}
		}
	}
}

// Applied checks the entry at index, cmd, applied at now with events evs,
// and moves the checker's state past it. unanswered says its proposer was
// answered outcome-unknown.
func (c *Checker) Applied(index uint64, cmd entry.Command, evs []event.Event, now time.Time, unanswered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.effectLocked(index, cmd, evs, now)
	e.Unanswered = unanswered
	if e.SessionEnded != nil {
		e.SessionFreed = c.freedLocked(e)
	}
	for _, inv := range Invariants {
		if inv.Applied != nil {
			if why := inv.Applied(c, e); why != "" {
				c.failLocked(inv.Name, "entry %d (%s): %s", index, cmd.Type(), why)
			}
		}
	}
	c.countLocked(e)
	c.applyLocked(e)
}

// countLocked counts what the invariants were exercised on.
func (c *Checker) countLocked(e *Effect) {
	c.counts["entries"]++
	for _, end := range e.Ended {
		if end.Expired {
			c.counts["expiries"]++
		}
	}
	if e.Frees != nil && len(c.queued[*e.Frees]) > 0 {
		c.counts["frees with waiters queued"]++
		if e.Next != nil {
			c.counts["frees offering the head waiter"]++
		}
	}
	if e.DelayEnded != nil {
		c.counts["lock-delays ended"]++
	}
	c.countSessionLocked(e)
}

// Counts returns how many entries of interest the checker saw.
func (c *Checker) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// effectLocked reads what an entry did from its command and events.
func (c *Checker) effectLocked(index uint64, cmd entry.Command, evs []event.Event, now time.Time) *Effect {
	e := &Effect{Index: index, Cmd: cmd, Now: now}
	// grantOf is the acquire in cmd that a grant event of k is for.
	grantOf := func(k Key) (ttl, delay int64, req string) {
		switch x := cmd.(type) {
		case *entry.Acquire:
			return x.TTLMillis, x.LockDelayMillis, x.RequestID
		case *entry.MultiAcquire:
			return x.TTLMillis, 0, x.RequestID
		case *entry.SemAcquire:
			return x.TTLMillis, x.LockDelayMillis, x.RequestID
		case *entry.Release:
			if x.Next != nil {
				return x.Next.TTLMillis, x.Next.LockDelayMillis, x.Next.RequestID
			}
		case *entry.Expire:
			if x.Next != nil {
				return x.Next.TTLMillis, x.Next.LockDelayMillis, x.Next.RequestID
			}
		case *entry.SemRelease:
			if x.Next != nil {
				return x.Next.TTLMillis, x.Next.LockDelayMillis, x.Next.RequestID
			}
		case *entry.SemExpire:
			if x.Next != nil {
				return x.Next.TTLMillis, x.Next.LockDelayMillis, x.Next.RequestID
			}
		case *entry.EndDelay:
			if k.Kind == Lock && x.Next != nil {
				return x.Next.TTLMillis, x.Next.LockDelayMillis, x.Next.RequestID
			}
			if k.Kind == Semaphore && x.NextPermit != nil {
				return x.NextPermit.TTLMillis, x.NextPermit.LockDelayMillis, x.NextPermit.RequestID
			}
		case *entry.SessionEnd:
			for _, a := range x.Next {
				if k.Kind == Lock && a != nil && a.Lock == k.Name {
					return a.TTLMillis, a.LockDelayMillis, a.RequestID
				}
			}
			for _, a := range x.NextPermits {
				if k.Kind == Semaphore && a != nil && a.Semaphore == k.Name {
					return a.TTLMillis, a.LockDelayMillis, a.RequestID
				}
			}
		}
		return 0, 0, ""
	}
	start := func(k Key, token uint64, holder string, session uint64) {
		if c.live[k][token] != nil {
			// A waiter offered again after a proposal whose outcome was
			// unknown gets the grant that proposal made (Existing): the
			// event names it, but nothing new is granted.
			return
		}
		ttl, delay, req := grantOf(k)
		g := &Grant{Key: k, Token: token, Holder: holder, RequestID: req, TTL: millis(ttl), LockDelay: millis(delay), Start: now, Session: session}
		if s := c.sessions[session]; s != nil {
			// Timed by its session (a grant under one that is not live
			// is a failure of its own, and keeps what it asked).
			g.TTL = s.TTL
			if g.LockDelay == 0 {
				g.LockDelay = s.LockDelay
			}
		}
		e.Started = append(e.Started, g)
	}
	for _, ev := range evs {
		lock, sem := Key{Lock, ev.Lock}, Key{Semaphore, ev.Semaphore}
		switch ev.Type {
		case event.Acquired:
			start(lock, ev.Token, ev.Holder, ev.Session)
		case event.HandedOff:
			e.Ended = append(e.Ended, Ended{Key: lock, Token: ev.PrevToken, Expired: ev.Reason == event.Expired})
			start(lock, ev.Token, ev.Holder, ev.Session)
		case event.Released, event.Expired:
			e.Ended = append(e.Ended, Ended{Key: lock, Token: ev.Token, Expired: ev.Type == event.Expired})
		case event.PermitAcquired:
			start(sem, ev.Token, ev.Holder, ev.Session)
		case event.PermitHandedOff:
			e.Ended = append(e.Ended, Ended{Key: sem, Token: ev.PrevToken, Expired: ev.Reason == event.Expired})
			start(sem, ev.Token, ev.Holder, ev.Session)
		case event.PermitReleased, event.PermitExpired:
			e.Ended = append(e.Ended, Ended{Key: sem, Token: ev.Token, Expired: ev.Type == event.PermitExpired})
		case event.SessionCreated:
			if x, ok := cmd.(*entry.SessionCreate); ok {
				e.SessionStarted = &Session{ID: ev.Session, Holder: ev.Holder, RequestID: x.RequestID,
					TTL: millis(x.TTLMillis), LockDelay: millis(x.LockDelayMillis), Start: now}
			}
		case event.SessionExpired, event.SessionClosed:
			e.SessionExpired = ev.Type == event.SessionExpired
			if e.SessionEnded = c.sessions[ev.Session]; e.SessionEnded == nil {
				c.failLocked("model", "entry %d ended session %d, which was not live", index, ev.Session)
			}
		}
	}
	offer := func(k Key, next *Offer) {
		e.Frees, e.Next = &k, next
	}
	switch x := cmd.(type) {
	case *entry.Release:
		offer(Key{Lock, x.Lock}, acquireOffer(x.Next))
	case *entry.Expire:
		offer(Key{Lock, x.Lock}, acquireOffer(x.Next))
	case *entry.SemRelease:
		offer(Key{Semaphore, x.Semaphore}, permitOffer(x.Next))
	case *entry.SemExpire:
		offer(Key{Semaphore, x.Semaphore}, permitOffer(x.Next))
	case *entry.EndDelay:
		if x.Semaphore != "" {
			offer(Key{Semaphore, x.Semaphore}, permitOffer(x.NextPermit))
		} else {
			offer(Key{Lock, x.Lock}, acquireOffer(x.Next))
		}
		e.DelayEnded = c.delays[*e.Frees][x.Since]
	}
	return e
}

func acquireOffer(a *entry.Acquire) *Offer {
	if a == nil {
		return nil
	}
	return &Offer{RequestID: a.RequestID, Holder: a.Holder, Session: a.Session}
}

func permitOffer(a *entry.SemAcquire) *Offer {
	if a == nil {
		return nil
	}
	return &Offer{RequestID: a.RequestID, Holder: a.Holder, Session: a.Session}
}

// applyLocked moves the checker's state past an entry.
func (c *Checker) applyLocked(e *Effect) {
	for _, end := range e.Ended {
		g := c.live[end.Key][end.Token]
		if g == nil {
			c.failLocked("model", "entry %d ended %s's grant %d, which was not held", e.Index, end.Key, end.Token)
			continue
		}
		delete(c.live[end.Key], end.Token)
		if end.Expired && g.LockDelay > 0 {
			since := e.Index
			if e.SessionEnded != nil && end.Key.Kind == Semaphore && c.delays[end.Key][since] != nil {
				// One session's end may start several delays of one
				// semaphore's slots: a second is known by its permit's
				// token, or the nearest number below it none is known by.
				for since = end.Token; since > 1 && c.delays[end.Key][since] != nil; since-- {
				}
			}
			put(c.delays, end.Key, since, &Delay{Key: end.Key, Since: since, Length: g.LockDelay, Start: e.Now})
		}
	}
	if d := e.DelayEnded; d != nil {
		delete(c.delays[d.Key], d.Since)
	}
	for _, g := range e.Started {
		put(c.live, g.Key, g.Token, g)
		c.lastToken = max(c.lastToken, g.Token)
		if g.RequestID != "" {
			put(c.granted, g.Key, g.RequestID, true)
		}
	}
	// A waiter whose own acquire was proposed, or offered in an entry that
	// freed its name, has left its queue, granted or not. One offered in
	// an entry that the FSM refused (a release of a grant that had ended)
	// is put back at the head of its queue.
	switch x := e.Cmd.(type) {
	case *entry.Acquire:
		delete(c.queued[Key{Lock, x.Lock}], x.RequestID)
	case *entry.SemAcquire:
		delete(c.queued[Key{Semaphore, x.Semaphore}], x.RequestID)
	case *entry.SessionEnd:
		if e.SessionEnded != nil {
			for _, a := range x.Next {
				if a != nil {
					delete(c.queued[Key{Lock, a.Lock}], a.RequestID)
				}
			}
			for _, a := range x.NextPermits {
				if a != nil {
					delete(c.queued[Key{Semaphore, a.Semaphore}], a.RequestID)
				}
			}
		}
	}
	if e.Next != nil && (len(e.Ended) > 0 || e.DelayEnded != nil) {
		delete(c.queued[*e.Frees], e.Next.RequestID)
	}
	c.applySessionLocked(e)
	c.applyMultiLocked(e)
}

func put[K comparable, V any](m map[Key]map[K]V, k Key, id K, v V) {
	if m[k] == nil {
		m[k] = map[K]V{}
	}
	m[k][id] = v
}

// holdersWithinPolicy: never more holders of a name than its policy allows.
func holdersWithinPolicy(c *Checker, e *Effect) string {
	count := map[Key]int{}
	for _, end := range e.Ended {
		count[end.Key]--
	}
	for _, g := range e.Started {
		count[g.Key]++
	}
	for k, d := range count {
		if d <= 0 {
			continue
		}
		held := len(c.live[k]) + d
		if limit := c.limit(k); held > limit {
			return fmt.Sprintf("%s has %d holders after it (tokens %v and the new one), its policy allows %d", k, held, c.tokensLocked(k), limit)
		}
	}
	return ""
}

func (c *Checker) limit(k Key) int {
	if k.Kind == Lock {
		return 1
	}
	return c.limits[k]
}

// tokensIncrease: every grant's token is greater than every token issued
// before it (so than every earlier grant's of its name).
func tokensIncrease(c *Checker, e *Effect) string {
	for _, g := range e.Started {
		if g.Token <= c.lastToken {
			return fmt.Sprintf("%s granted token %d to %s, not above the last token issued, %d", g.Key, g.Token, g.Holder, c.lastToken)
		}
	}
	if s := e.SessionStarted; s != nil && s.ID <= c.lastToken {
		return fmt.Sprintf("session %d (%s) opened with an id not above the last token issued, %d", s.ID, s.Holder, c.lastToken)
	}
	return ""
}

// servedInFreeingEntry: an entry that frees a name while a waiter is queued
// for it, and leaves it free of lock-delays, offers it to a waiter in that
// same entry, and the waiter gets it (unless its request had been granted
// before: a proposal whose outcome was unknown).
func servedInFreeingEntry(c *Checker, e *Effect) string {
	if e.Frees == nil {
		return ""
	}
	k := *e.Frees
	effective, free := false, true
	switch e.Cmd.(type) {
	case *entry.EndDelay:
		effective = e.DelayEnded != nil
	default:
		for _, end := range e.Ended {
			if end.Key != k {
				continue
			}
			effective = true
			if g := c.live[k][end.Token]; end.Expired && g != nil && g.LockDelay > 0 {
				free = false // its lock-delay starts here: nobody may have it
			}
		}
	}
	if !effective || !free || len(c.queued[k]) == 0 || c.keptLocked(k) {
		return ""
	}
	if e.Next == nil {
		return fmt.Sprintf("it frees %s with %d waiters queued (%v) and offers it to none of them", k, len(c.queued[k]), sortedKeys(c.queued[k]))
	}
	for _, g := range e.Started {
		if g.Key == k {
			return ""
		}
	}
	if c.granted[k][e.Next.RequestID] {
		return ""
	}
	if _, ended := c.ended[e.Next.Session]; ended && e.Next.Session != 0 {
		// Its session ended while it waited: refused, and the name's
		// other waiters are served in the entries after.
		return ""
	}
	return fmt.Sprintf("it frees %s and offers it to %s's request %s, which gets nothing", k, e.Next.Holder, e.Next.RequestID)
}

// noEarlyEnd: the leader proposes a lease's expiry (a lock-delay's end)
// only once its own clock has reached the lease's last start plus its TTL
// (the delay's start plus its length).
func noEarlyEnd(c *Checker, cmd entry.Command, now time.Time) string {
	var g *Grant
	switch x := cmd.(type) {
	case *entry.Expire:
		g = c.live[Key{Lock, x.Lock}][x.Token]
	case *entry.SemExpire:
		g = c.live[Key{Semaphore, x.Semaphore}][x.Token]
	case *entry.MultiRelease:
		if x.Expired {
			g = c.liveToken(x.Token)
		}
	case *entry.EndDelay:
		k := Key{Lock, x.Lock}
		if x.Semaphore != "" {
			k = Key{Semaphore, x.Semaphore}
		}
		if d := c.delays[k][x.Since]; d != nil && now.Before(d.Start.Add(d.Length)) {
			return fmt.Sprintf("end of %s's lock-delay since %d proposed %v after it started, its length is %v",
				k, x.Since, now.Sub(d.Start), d.Length)
		}
	}
	if g != nil && now.Before(g.Start.Add(g.TTL)) {
		return fmt.Sprintf("expiry of %s's grant %d (%s) proposed %v after its lease last started, its TTL is %v",
			g.Key, g.Token, g.Holder, now.Sub(g.Start), g.TTL)
	}
	return ""
}

// Queued registers a client's acquire that may queue for k, before it is
// made.
func (c *Checker) Queued(k Key, requestID string) {
	c.mu.Lock()
	put(c.queued, k, requestID, true)
	c.order[k] = append(c.order[k], requestID)
	c.mu.Unlock()
}

// Answered says the client with requestID got its answer.
func (c *Checker) Answered(k Key, requestID string) {
	c.mu.Lock()
	delete(c.queued[k], requestID)
	delete(c.waitEnds, requestID)
	c.unowe(k, requestID, false)
	c.mu.Unlock()
}

// Restarted says the leader restarted the lease of k's grant token at now
// (a renewal, or a retry answered with the grant).
func (c *Checker) Restarted(k Key, token uint64, now time.Time) {
	c.mu.Lock()
	if g := c.live[k][token]; g != nil {
		g.Start = now
	}
	c.mu.Unlock()
}

// Promoted says a leader began serving at now: it restarts every lease and
// lock-delay at full length.
func (c *Checker) Promoted(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, gs := range c.live {
		for _, g := range gs {
			g.Start = now
		}
	}
	for _, ds := range c.delays {
		for _, d := range ds {
			d.Start = now
		}
	}
	for _, s := range c.sessions {
		s.Start = now
	}
}

// Live returns the grant of k with token, if the checker believes it held.
func (c *Checker) Live(k Key, token uint64) (Grant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.live[k][token]
	if !ok {
		return Grant{}, false
	}
	return *g, true
}

// InUse returns every duration a live grant or delay of the checker's has
// (TTLs, lock-delays), so that the simulation can draw new ones apart.
func (c *Checker) InUse() map[time.Duration]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[time.Duration]bool{}
	for _, gs := range c.live {
		for _, g := range gs {
			out[g.TTL], out[g.LockDelay] = true, true
		}
	}
	for _, ds := range c.delays {
		for _, d := range ds {
			out[d.Length] = true
		}
	}
	for _, s := range c.sessions {
		out[s.TTL], out[s.LockDelay] = true, true
	}
	return out
}

// State checks the FSM's state of k after a step (the tokens held and the
// start indexes of its running lock-delays) against the checker's and
// against k's policy.
func (c *Checker) State(k Key, tokens, delays []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(tokens) > c.limit(k) {
		c.failLocked("holders within policy", "the FSM holds %s with %d grants %v, its policy allows %d", k, len(tokens), tokens, c.limit(k))
	}
	if want := c.tokensLocked(k); !slices.Equal(want, sorted(tokens)) {
		c.failLocked("model", "the FSM holds %s with grants %v, its log says %v", k, sorted(tokens), want)
	}
	if want := sortedKeys(c.delays[k]); !slices.Equal(want, sorted(delays)) {
		c.failLocked("model", "the FSM has %s's lock-delays since %v, its log says %v", k, sorted(delays), want)
	}
}

func (c *Checker) tokensLocked(k Key) []uint64 { return sortedKeys(c.live[k]) }

func sorted[T uint64 | string](xs []T) []T {
	out := slices.Clone(xs)
	slices.Sort(out)
	if out == nil {
		out = []T{}
	}
	return out
}

func sortedKeys[K uint64 | string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
