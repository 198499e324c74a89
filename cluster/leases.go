package cluster

import (
	"sync"
	"time"

	"github.com/fencer-io/fencer/fsm"
)

// Leases tracks the deadline of every held lock, on the leader only.
//
// Deadlines are not replicated: a renewal extends the leader's deadline
// without writing the log. A new leader therefore cannot know how much of a
// lease was left and restarts every lease at its full TTL (Promote), so a
// lease may outlive its TTL across a failover but never ends early. When a
// deadline passes, expire is called with the lock and token; the caller
// proposes an Expire command, which the FSM ignores if the token is no longer
// current.
type Leases struct {
	clock  Clock
	expire func(lock string, token uint64)

	mu     sync.Mutex
	active bool
	leases map[string]*lease
}

type lease struct {
	token    uint64
	ttl      time.Duration
	deadline time.Time
	timer    Timer
	expiring bool // an Expire is being proposed; renewals are refused
}

// NewLeases returns an inactive tracker; expire runs in its own goroutine.
func NewLeases(clock Clock, expire func(lock string, token uint64)) *Leases {
	if clock == nil {
		clock = RealClock
	}
	return &Leases{clock: clock, expire: expire, leases: map[string]*lease{}}
}

// Promote starts tracking every held lock at its full TTL from now.
func (l *Leases) Promote(locks []fsm.Lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopAllLocked()
	l.active = true
	for _, lk := range locks {
		l.trackLocked(lk.Name, lk.Token, time.Duration(lk.TTLMillis)*time.Millisecond)
	}
}

// Demote stops every timer; a follower tracks nothing.
func (l *Leases) Demote() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active = false
	l.stopAllLocked()
}

func (l *Leases) stopAllLocked() {
	for name, ls := range l.leases {
		ls.timer.Stop()
		delete(l.leases, name)
	}
}

// Track starts the lease of a new grant, replacing any earlier one of the lock.
func (l *Leases) Track(lock string, token uint64, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active {
		return
	}
	l.trackLocked(lock, token, ttl)
}

func (l *Leases) trackLocked(name string, token uint64, ttl time.Duration) {
	if old, ok := l.leases[name]; ok {
		if old.token > token {
			return // a newer grant is already tracked
		}
		old.timer.Stop()
	}
	ls := &lease{token: token, ttl: ttl, deadline: l.clock.Now().Add(ttl)}
	l.leases[name] = ls
	ls.timer = l.clock.AfterFunc(ttl, func() { l.fire(name, ls) })
}

// fire runs when a lease's timer goes off. A renewal only moves the deadline,
// so the timer is re-armed for whatever is left.
func (l *Leases) fire(name string, ls *lease) {
	l.mu.Lock()
	if !l.active || l.leases[name] != ls || ls.expiring {
		l.mu.Unlock()
		return
	}
	if left := ls.deadline.Sub(l.clock.Now()); left > 0 {
		ls.timer = l.clock.AfterFunc(left, func() { l.fire(name, ls) })
		l.mu.Unlock()
		return
	}
	ls.expiring = true
	token := ls.token
	l.mu.Unlock()
	go l.expire(name, token)
}

// Renew extends a lease to a full TTL from now. It reports false when the
// lease is not tracked (not leader, superseded) or is already expiring.
func (l *Leases) Renew(lock string, token uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases[lock]
	if !l.active || !ok || ls.token != token || ls.expiring {
		return false
	}
	ls.deadline = l.clock.Now().Add(ls.ttl)
	return true
}

// Forget stops tracking a lease that ended (released or expired).
func (l *Leases) Forget(lock string, token uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls, ok := l.leases[lock]; ok && ls.token == token {
		ls.timer.Stop()
		delete(l.leases, lock)
	}
}

// Retry re-arms an expiring lease after a failed Expire proposal, so that it
// is proposed again after delay unless the lease ended meanwhile.
func (l *Leases) Retry(lock string, token uint64, delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases[lock]
	if !l.active || !ok || ls.token != token {
		return
	}
	ls.expiring = false
	ls.deadline = l.clock.Now().Add(delay)
	ls.timer.Stop()
	ls.timer = l.clock.AfterFunc(delay, func() { l.fire(lock, ls) })
}

// Remaining returns how long the tracked lease of a lock has left.
func (l *Leases) Remaining(lock string, token uint64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases[lock]
	if !l.active || !ok || ls.token != token {
		return 0, false
	}
	return max(ls.deadline.Sub(l.clock.Now()), 0), true
}

// Len returns how many leases are tracked.
func (l *Leases) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.leases)
}
