// Package lease times the leader's leases: one timer over a heap of
// deadlines, a full-length restart of every lease when a node is promoted,
// and the expiring mark that refuses a renewal once an expiry is under way.
// Deadlines are the leader's alone and never replicated; coord decides what
// is timed and proposes the expiries.
package lease

import (
	"cmp"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Key names what one deadline times: a kind (coord's: a lock's lease, a
// permit's, a lock-delay, a session's), the lock's or semaphore's name, and
// an id that tells apart several deadlines of one name (a permit's token, a
// slot delay's start; 0 where a name has one at a time). It is compared,
// never parsed.
type Key struct {
	Kind Kind
	Name string
	ID   uint64
}

// Kind is the kind of a Key; coord/internal/timed defines them.
type Kind uint8

// Timers tracks the deadline of every lease the leader times, on the
// leader only, each under a Key with the token of its grant (for a
// lock-delay, the index it started at).
//
// Deadlines are not replicated: a renewal extends the leader's deadline
// without writing the log. A new leader therefore cannot know how much of a
// lease was left and restarts every lease at its full TTL (Promote), so a
// lease may outlive its TTL across a failover but never ends early. When a
// deadline passes, expire is called with the key and token; the caller
// proposes an Expire command, which the FSM ignores if the token is no longer
// current.
//
// All deadlines share one timer and a min-heap (as etcd's lessor does), so
// 100,000 leases cost 100,000 records in one slab, not 100,000 runtime
// timers; the heap holds their slots. A renewal only moves a lease's
// deadline; the heap keeps the time it was last scheduled for, and a lease
// found renewed when it comes due is simply scheduled again.
type Timers struct {
	clock  Clock
	base   time.Time // lease times are durations since base: 8 bytes, not 24
	expire func(key Key, token uint64)

	mu      sync.Mutex
	active  bool
	leases  leaseTable
	due     dueHeap
	timer   Timer
	timerAt time.Duration

	firing atomic.Int64 // expire calls started and not yet returned
	// inOrder makes the leases that fall due together expire one after
	// another, in key order (InOrder).
	inOrder bool
}

// tracked is one tracked deadline, a record of 64 bytes in the slab (it was
// 96 with time.Time fields); times are since Timers.base, read from the
// clock's monotonic reading. Its Key is held field by field, so that the
// kind fits in the padding after expiring: a Key field would cost 16 bytes
// more.
type tracked struct {
	name     string
	id       uint64
	token    uint64
	ttl      time.Duration
	deadline time.Duration // moved by renewals
	at       time.Duration // when the heap expects it due (≤ deadline)
	index    int32         // position in the heap; unscheduled, or released
	expiring bool          // an Expire is being proposed; renewals are refused
	kind     Kind
}

func (t *tracked) key() Key { return Key{Kind: t.kind, Name: t.name, ID: t.id} }

func (t *tracked) hasKey(k Key) bool { return t.kind == k.Kind && t.id == k.ID && t.name == k.Name }

// restart times the record's grant with token for ttl from now; the
// caller schedules it.
func (t *tracked) restart(token uint64, ttl, now time.Duration) {
	t.token, t.ttl, t.deadline, t.at = token, ttl, now+ttl, now+ttl
}

// New returns an inactive tracker; expire runs in its own goroutine.
func New(clock Clock, expire func(key Key, token uint64)) *Timers {
	if clock == nil {
		clock = RealClock
	}
	return &Timers{clock: clock, base: clock.Now(), expire: expire, leases: newLeaseTable(0)}
}

// now is the clock's time as a lease time.
func (l *Timers) now() time.Duration { return l.clock.Now().Sub(l.base) }

// Lease is a deadline to time: its key, the token of its grant and its full
// length.
type Lease struct {
	Key   Key
	Token uint64
	TTL   time.Duration
}

// Promote starts timing every lease of leases at its full length from now,
// forgetting any earlier ones: a new leader cannot know how much of a lease
// was left, so a lease may outlive its TTL across a failover, never end
// early. leases is read under the tracker's lock, without a copy; hint is
// about how many there are (a million leases grow no map step by step).
func (l *Timers) Promote(hint int, leases iter.Seq[Lease]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearLocked()
	l.active = true
	l.leases = newLeaseTable(hint)
	l.due = make(dueHeap, 0, max(hint, 0))
	// Every lease starts now: collect them, then order the heap once
	// (linear) instead of pushing each (a million leases on a new leader).
	now := l.now()
	for ls := range leases {
		s := l.leases.add(ls.Key)
		t := l.leases.rec(s)
		if t.index == unscheduled { // a new record: every earlier one is in the heap
			t.index = int32(len(l.due))
			l.due = append(l.due, s)
		} else if t.token > ls.Token {
			continue
		}
		t.restart(ls.Token, ls.TTL, now)
	}
	l.due.init(&l.leases)
	l.armLocked()
}

// Demote stops the timer and forgets every lease; a follower tracks nothing.
func (l *Timers) Demote() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active = false
	l.clearLocked()
}

func (l *Timers) clearLocked() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.leases = newLeaseTable(0)
	l.due = nil
}

// Track starts timing key for the grant with token, replacing an earlier
// grant's deadline under the same key.
func (l *Timers) Track(key Key, token uint64, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active {
		return
	}
	l.trackLocked(key, token, ttl)
	l.armLocked()
}

// trackLocked times key's grant with token for ttl from now. The record
// of an earlier grant under key is reused: its expiring mark is cleared,
// as a new record's would be.
func (l *Timers) trackLocked(key Key, token uint64, ttl time.Duration) {
	s := l.leases.add(key) // a new record's token is 0
	if l.leases.rec(s).token > token {
		return // a newer grant is already tracked
	}
	l.unscheduleLocked(s)
	ls := l.leases.rec(s)
	ls.restart(token, ttl, l.now())
	ls.expiring = false
	l.scheduleLocked(s, ls.deadline)
}

func (l *Timers) scheduleLocked(s slot, at time.Duration) {
	l.leases.rec(s).at = at
	l.due.push(&l.leases, s)
}

func (l *Timers) unscheduleLocked(s slot) {
	if i := l.leases.rec(s).index; i >= 0 {
		l.due.remove(&l.leases, int(i))
	}
}

// armLocked points the one timer at the earliest scheduled lease.
func (l *Timers) armLocked() {
	if !l.active || len(l.due) == 0 {
		return
	}
	next := l.leases.rec(l.due[0]).at
	if l.timer != nil && next >= l.timerAt {
		return // already armed early enough
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timerAt = next
	l.timer = l.clock.AfterFunc(max(next-l.now(), 0), l.fire)
}

// fire runs when the timer goes off: every lease whose deadline has passed
// is marked expiring and handed to expire; renewed ones are rescheduled.
func (l *Timers) fire() {
	l.mu.Lock()
	if !l.active {
		l.mu.Unlock()
		return
	}
	l.timer = nil
	now := l.now()
	var ended []ending
	for len(l.due) > 0 && l.leases.rec(l.due[0]).at <= now {
		s := l.due[0]
		l.due.remove(&l.leases, 0)
		ls := l.leases.rec(s)
		if ls.deadline > now {
			l.scheduleLocked(s, ls.deadline) // renewed meanwhile
			continue
		}
		ls.expiring = true
		ended = append(ended, ending{ls.key(), ls.token})
	}
	l.armLocked()
	l.mu.Unlock()
	l.firing.Add(int64(len(ended)))
	if l.inOrder {
		slices.SortFunc(ended, func(a, b ending) int { return cmpKeys(a.key, b.key) })
		go func() {
			for _, e := range ended {
				l.expire(e.key, e.token)
				l.firing.Add(-1)
			}
		}()
		return
	}
	for _, e := range ended {
		go func() {
			defer l.firing.Add(-1)
			l.expire(e.key, e.token)
		}()
	}
}

// ending is a lease handed to expire, copied out of its record under the
// lock: once the lock is released the slot may be freed and reused.
type ending struct {
	key   Key
	token uint64
}

// InOrder makes leases that fall due at one instant expire one after
// another in the order of their keys, instead of each in a goroutine of its
// own, whose proposals race. Coord's simulation sets it, so that a seed
// replays one log: leases restarted together by a promotion fall due
// together, and the order their expiries reached the log was the
// scheduler's. A leader leaves it off: a million leases due together after
// a failover expire in parallel, batched by Raft.
func (l *Timers) InOrder() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inOrder = true
}

func cmpKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
}

// Firing returns how many expire calls have started and not returned: a
// test that steps a fake clock waits for none before its next step.
func (l *Timers) Firing() int64 { return l.firing.Load() }

// Restart tracks the lease under key from now, as Track does, unless its
// expiry is already under way (it fired and is being proposed): then it
// changes nothing and reports false. A retried answer that restarts a lease
// (a session's creation answered again) uses it, so that it never revives a
// lease whose end is being written.
func (l *Timers) Restart(key Key, token uint64, ttl time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active {
		return true // nothing is timed here: nothing to revive
	}
	if s, ok := l.leases.get(key); ok {
		if old := l.leases.rec(s); old.token == token && old.expiring {
			return false
		}
	}
	l.trackLocked(key, token, ttl)
	l.armLocked()
	return true
}

// Due reports whether the lease under key with token is the one the timers
// handed to expire, still expiring: not restarted since (tracked again by
// a grant's answer, restarted by a new leader's Promote), nor forgotten.
// The expiry's proposer asks it under the name's queue, where nothing can
// track the lease again, so that an expiry whose lease was restarted after
// it fired is dropped rather than proposed before the new deadline.
func (l *Timers) Due(key Key, token uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.lookupLocked(key)
	return l.active && ok && ls.token == token && ls.expiring
}

// Renew extends a lease to a full TTL from now. It reports false when the
// lease is not tracked (not leader, superseded) or is already expiring.
func (l *Timers) Renew(key Key, token uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.lookupLocked(key)
	if !l.active || !ok || ls.token != token || ls.expiring {
		return false
	}
	ls.deadline = l.now() + ls.ttl
	return true
}

// Forget stops tracking a lease that ended (released or expired).
func (l *Timers) Forget(key Key, token uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.leases.get(key); ok && l.leases.rec(s).token == token {
		l.unscheduleLocked(s)
		l.leases.remove(key)
	}
}

// Retry re-arms an expiring lease after a failed Expire proposal, so that it
// is proposed again after delay unless the lease ended meanwhile.
func (l *Timers) Retry(key Key, token uint64, delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.leases.get(key)
	if !l.active || !ok || l.leases.rec(s).token != token {
		return
	}
	l.unscheduleLocked(s)
	ls := l.leases.rec(s)
	ls.expiring = false
	ls.deadline = l.now() + delay
	l.scheduleLocked(s, ls.deadline)
	l.armLocked()
}

// Remaining returns how long the grant with token has left under key.
func (l *Timers) Remaining(key Key, token uint64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.lookupLocked(key)
	if !l.active || !ok || ls.token != token {
		return 0, false
	}
	return max(ls.deadline-l.now(), 0), true
}

// lookupLocked returns key's record, valid until the next Track.
func (l *Timers) lookupLocked(key Key) (*tracked, bool) {
	s, ok := l.leases.get(key)
	if !ok {
		return nil, false
	}
	return l.leases.rec(s), true
}

// Len returns how many leases are tracked.
func (l *Timers) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leases.len()
}

// dueHeap is a min-heap of slots ordered by the time each record is
// scheduled to come due (tracked.at), each record keeping its position
// (tracked.index) so that a lease can leave the heap when it ends. It is
// written out rather than over container/heap, whose Push and Pop would box
// each slot in an interface: an allocation per Track.
type dueHeap []slot

func (h dueHeap) less(x *leaseTable, i, j int) bool { return x.rec(h[i]).at < x.rec(h[j]).at }

func (h dueHeap) swap(x *leaseTable, i, j int) {
	h[i], h[j] = h[j], h[i]
	x.rec(h[i]).index, x.rec(h[j]).index = int32(i), int32(j)
}

// init orders a heap whose records already hold their positions.
func (h dueHeap) init(x *leaseTable) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(x, i)
	}
}

func (h *dueHeap) push(x *leaseTable, s slot) {
	x.rec(s).index = int32(len(*h))
	*h = append(*h, s)
	h.up(x, len(*h)-1)
}

// remove takes the slot at position i out of the heap.
func (h *dueHeap) remove(x *leaseTable, i int) {
	last := len(*h) - 1
	if i != last {
		h.swap(x, i, last)
	}
	x.rec((*h)[last]).index = unscheduled
	*h = (*h)[:last]
	if i != last && !h.down(x, i) {
		h.up(x, i)
	}
}

func (h dueHeap) up(x *leaseTable, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(x, i, parent) {
			return
		}
		h.swap(x, i, parent)
		i = parent
	}
}

// down moves the slot at i towards the leaves; it reports whether it moved.
func (h dueHeap) down(x *leaseTable, i int) bool {
	start := i
	for {
		child := 2*i + 1
		if child >= len(h) {
			break
		}
		if right := child + 1; right < len(h) && h.less(x, right, child) {
			child = right
		}
		if !h.less(x, child, i) {
			break
		}
		h.swap(x, i, child)
		i = child
	}
	return i > start
}
