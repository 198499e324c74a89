// Package lease times the leader's leases: one timer over a heap of
// deadlines, a full-length restart of every lease when a node is promoted,
// and the expiring mark that refuses a renewal once an expiry is under way.
// Deadlines are the leader's alone and never replicated; coord decides what
// is timed and proposes the expiries.
package lease

import (
	"cmp"
	"container/heap"
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
// 100,000 leases cost 100,000 small structs, not 100,000 runtime timers. A
// renewal only moves a lease's deadline; the heap keeps the time it was
// last scheduled for, and a lease found renewed when it comes due is simply
// scheduled again.
type Timers struct {
	clock  Clock
	base   time.Time // lease times are durations since base: 8 bytes, not 24
	expire func(key Key, token uint64)

	mu      sync.Mutex
	active  bool
	leases  keyIndex
	due     leaseHeap
	timer   Timer
	timerAt time.Duration

	firing atomic.Int64 // expire calls started and not yet returned
	// inOrder makes the leases that fall due together expire one after
	// another, in key order (InOrder).
	inOrder bool
}

// tracked is one tracked deadline, 64 bytes (it was 96 with time.Time
// fields); times are since Timers.base, read from the clock's monotonic
// reading. Its Key is held field by field, so that the kind fits in the
// padding after expiring: a Key field would cost 16 bytes more.
type tracked struct {
	name     string
	id       uint64
	token    uint64
	ttl      time.Duration
	deadline time.Duration // moved by renewals
	at       time.Duration // when the heap expects it due (≤ deadline)
	index    int32         // position in the heap; -1 when not in it
	expiring bool          // an Expire is being proposed; renewals are refused
	kind     Kind
}

func (t *tracked) key() Key { return Key{Kind: t.kind, Name: t.name, ID: t.id} }

func newTracked(key Key, token uint64, ttl, deadline time.Duration, index int32) *tracked {
	return &tracked{name: key.Name, id: key.ID, kind: key.Kind, token: token, ttl: ttl, deadline: deadline, at: deadline, index: index}
}

// New returns an inactive tracker; expire runs in its own goroutine.
func New(clock Clock, expire func(key Key, token uint64)) *Timers {
	if clock == nil {
		clock = RealClock
	}
	return &Timers{clock: clock, base: clock.Now(), expire: expire, leases: newKeyIndex(0)}
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
	l.leases = newKeyIndex(hint)
	l.due = make(leaseHeap, 0, max(hint, 0))
	// Every lease starts now: collect them, then order the heap once
	// (linear) instead of pushing each (a million leases on a new leader).
	now := l.now()
	for ls := range leases {
		deadline := now + ls.TTL
		if old, ok := l.leases.get(ls.Key); ok {
			if old.token <= ls.Token {
				old.token, old.ttl, old.deadline, old.at = ls.Token, ls.TTL, deadline, deadline
			}
			continue
		}
		t := newTracked(ls.Key, ls.Token, ls.TTL, deadline, int32(len(l.due)))
		l.leases.put(ls.Key, t)
		l.due = append(l.due, t)
	}
	heap.Init(&l.due)
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
	l.leases = newKeyIndex(0)
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

func (l *Timers) trackLocked(key Key, token uint64, ttl time.Duration) {
	if old, ok := l.leases.get(key); ok {
		if old.token > token {
			return // a newer grant is already tracked
		}
		l.unscheduleLocked(old)
	}
	deadline := l.now() + ttl
	ls := newTracked(key, token, ttl, deadline, -1)
	l.leases.put(key, ls)
	l.scheduleLocked(ls, deadline)
}

func (l *Timers) scheduleLocked(ls *tracked, at time.Duration) {
	ls.at = at
	heap.Push(&l.due, ls)
}

func (l *Timers) unscheduleLocked(ls *tracked) {
	if ls.index >= 0 {
		heap.Remove(&l.due, int(ls.index))
	}
}

// armLocked points the one timer at the earliest scheduled lease.
func (l *Timers) armLocked() {
	if !l.active || len(l.due) == 0 {
		return
	}
	next := l.due[0].at
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
	var ended []*tracked
	for len(l.due) > 0 && l.due[0].at <= now {
		ls := heap.Pop(&l.due).(*tracked)
		if ls.deadline > now {
			l.scheduleLocked(ls, ls.deadline) // renewed meanwhile
			continue
		}
		ls.expiring = true
		ended = append(ended, ls)
	}
	l.armLocked()
	l.mu.Unlock()
	l.firing.Add(int64(len(ended)))
	if l.inOrder {
		slices.SortFunc(ended, func(a, b *tracked) int { return cmpKeys(a.key(), b.key()) })
		go func() {
			for _, ls := range ended {
				l.expire(ls.key(), ls.token)
				l.firing.Add(-1)
			}
		}()
		return
	}
	for _, ls := range ended {
		go func() {
			defer l.firing.Add(-1)
			l.expire(ls.key(), ls.token)
		}()
	}
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
	if old, ok := l.leases.get(key); ok && old.token == token && old.expiring {
		return false
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
	ls, ok := l.leases.get(key)
	return l.active && ok && ls.token == token && ls.expiring
}

// Renew extends a lease to a full TTL from now. It reports false when the
// lease is not tracked (not leader, superseded) or is already expiring.
func (l *Timers) Renew(key Key, token uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases.get(key)
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
	if ls, ok := l.leases.get(key); ok && ls.token == token {
		l.unscheduleLocked(ls)
		l.leases.remove(key)
	}
}

// Retry re-arms an expiring lease after a failed Expire proposal, so that it
// is proposed again after delay unless the lease ended meanwhile.
func (l *Timers) Retry(key Key, token uint64, delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases.get(key)
	if !l.active || !ok || ls.token != token {
		return
	}
	ls.expiring = false
	ls.deadline = l.now() + delay
	l.unscheduleLocked(ls)
	l.scheduleLocked(ls, ls.deadline)
	l.armLocked()
}

// Remaining returns how long the grant with token has left under key.
func (l *Timers) Remaining(key Key, token uint64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases.get(key)
	if !l.active || !ok || ls.token != token {
		return 0, false
	}
	return max(ls.deadline-l.now(), 0), true
}

// Len returns how many leases are tracked.
func (l *Timers) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leases.len()
}

// leaseHeap orders leases by the time they are scheduled to come due.
type leaseHeap []*tracked

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = int32(i), int32(j)
}

func (h *leaseHeap) Push(x any) {
	ls := x.(*tracked)
	ls.index = int32(len(*h))
	*h = append(*h, ls)
}

func (h *leaseHeap) Pop() any {
	old := *h
	ls := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	ls.index = -1
	return ls
}
