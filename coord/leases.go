package coord

import (
	"container/heap"
	"sync"
	"time"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// leaseTimers tracks the deadline of every held lock, on the leader only,
// and of every running lock-delay (under delayKey, with the delay's start
// index for a token).
//
// Deadlines are not replicated: a renewal extends the leader's deadline
// without writing the log. A new leader therefore cannot know how much of a
// lease was left and restarts every lease at its full TTL (Promote), so a
// lease may outlive its TTL across a failover but never ends early. When a
// deadline passes, expire is called with the lock and token; the caller
// proposes an Expire command, which the FSM ignores if the token is no longer
// current.
//
// All deadlines share one timer and a min-heap (as etcd's lessor does), so
// 100,000 leases cost 100,000 small structs, not 100,000 runtime timers. A
// renewal only moves a lease's deadline; the heap keeps the time it was
// last scheduled for, and a lease found renewed when it comes due is simply
// scheduled again.
type leaseTimers struct {
	clock  Clock
	base   time.Time // lease times are durations since base: 8 bytes, not 24
	expire func(lock string, token uint64)

	mu      sync.Mutex
	active  bool
	leases  map[string]*lease
	due     leaseHeap
	timer   Timer
	timerAt time.Duration
}

// lease is one tracked deadline, 64 bytes (it was 96 with time.Time
// fields); times are since leaseTimers.base, read from the clock's monotonic
// reading.
type lease struct {
	name     string
	token    uint64
	ttl      time.Duration
	deadline time.Duration // moved by renewals
	at       time.Duration // when the heap expects it due (≤ deadline)
	index    int32         // position in the heap; -1 when not in it
	expiring bool          // an Expire is being proposed; renewals are refused
}

// newLeaseTimers returns an inactive tracker; expire runs in its own
// goroutine.
func newLeaseTimers(clock Clock, expire func(lock string, token uint64)) *leaseTimers {
	if clock == nil {
		clock = RealClock
	}
	return &leaseTimers{clock: clock, base: clock.Now(), expire: expire, leases: map[string]*lease{}}
}

// now is the clock's time as a lease time.
func (l *leaseTimers) now() time.Duration { return l.clock.Now().Sub(l.base) }

// Promote starts tracking every lock f holds at its full TTL from now,
// without a copy of them all; it returns how many it tracks.
func (l *leaseTimers) Promote(f *fsm.FSM) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearLocked()
	l.active = true
	n := 0
	f.EachLock(func(lk entry.Lock) {
		l.trackLocked(lk.Name, lk.Token, time.Duration(lk.TTLMillis)*time.Millisecond)
		n++
	})
	// Running lock-delays restart at full length too, for the same reason:
	// a delay may last longer across a failover, never shorter.
	for _, d := range f.Delays() {
		l.trackLocked(delayKey(d.Lock), d.Since, time.Duration(d.Millis)*time.Millisecond)
	}
	for _, sem := range f.Semaphores() {
		for _, p := range sem.Permits {
			l.trackLocked(permitKey(p.Semaphore, p.Token), p.Token, time.Duration(p.TTLMillis)*time.Millisecond)
			n++
		}
	}
	l.armLocked()
	return n
}

// Demote stops the timer and forgets every lease; a follower tracks nothing.
func (l *leaseTimers) Demote() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active = false
	l.clearLocked()
}

func (l *leaseTimers) clearLocked() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.leases = map[string]*lease{}
	l.due = nil
}

// Track starts the lease of a new grant, replacing any earlier one of the lock.
func (l *leaseTimers) Track(lock string, token uint64, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active {
		return
	}
	l.trackLocked(lock, token, ttl)
	l.armLocked()
}

func (l *leaseTimers) trackLocked(name string, token uint64, ttl time.Duration) {
	if old, ok := l.leases[name]; ok {
		if old.token > token {
			return // a newer grant is already tracked
		}
		l.unscheduleLocked(old)
	}
	deadline := l.now() + ttl
	ls := &lease{name: name, token: token, ttl: ttl, deadline: deadline, index: -1}
	l.leases[name] = ls
	l.scheduleLocked(ls, deadline)
}

func (l *leaseTimers) scheduleLocked(ls *lease, at time.Duration) {
	ls.at = at
	heap.Push(&l.due, ls)
}

func (l *leaseTimers) unscheduleLocked(ls *lease) {
	if ls.index >= 0 {
		heap.Remove(&l.due, int(ls.index))
	}
}

// armLocked points the one timer at the earliest scheduled lease.
func (l *leaseTimers) armLocked() {
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
func (l *leaseTimers) fire() {
	l.mu.Lock()
	if !l.active {
		l.mu.Unlock()
		return
	}
	l.timer = nil
	now := l.now()
	var ended []*lease
	for len(l.due) > 0 && l.due[0].at <= now {
		ls := heap.Pop(&l.due).(*lease)
		if ls.deadline > now {
			l.scheduleLocked(ls, ls.deadline) // renewed meanwhile
			continue
		}
		ls.expiring = true
		ended = append(ended, ls)
	}
	l.armLocked()
	l.mu.Unlock()
	for _, ls := range ended {
		go l.expire(ls.name, ls.token)
	}
}

// Renew extends a lease to a full TTL from now. It reports false when the
// lease is not tracked (not leader, superseded) or is already expiring.
func (l *leaseTimers) Renew(lock string, token uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases[lock]
	if !l.active || !ok || ls.token != token || ls.expiring {
		return false
	}
	ls.deadline = l.now() + ls.ttl
	return true
}

// Forget stops tracking a lease that ended (released or expired).
func (l *leaseTimers) Forget(lock string, token uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls, ok := l.leases[lock]; ok && ls.token == token {
		l.unscheduleLocked(ls)
		delete(l.leases, lock)
	}
}

// Retry re-arms an expiring lease after a failed Expire proposal, so that it
// is proposed again after delay unless the lease ended meanwhile.
func (l *leaseTimers) Retry(lock string, token uint64, delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases[lock]
	if !l.active || !ok || ls.token != token {
		return
	}
	ls.expiring = false
	ls.deadline = l.now() + delay
	l.unscheduleLocked(ls)
	l.scheduleLocked(ls, ls.deadline)
	l.armLocked()
}

// Remaining returns how long the tracked lease of a lock has left.
func (l *leaseTimers) Remaining(lock string, token uint64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases[lock]
	if !l.active || !ok || ls.token != token {
		return 0, false
	}
	return max(ls.deadline-l.now(), 0), true
}

// Len returns how many leases are tracked.
func (l *leaseTimers) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.leases)
}

// leaseHeap orders leases by the time they are scheduled to come due.
type leaseHeap []*lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = int32(i), int32(j)
}

func (h *leaseHeap) Push(x any) {
	ls := x.(*lease)
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
