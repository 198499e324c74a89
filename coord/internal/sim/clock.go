package sim

import (
	"sort"
	"sync"
	"time"
)

// Clock is a lease.Clock for the simulation. Unlike fakeclock's Advance,
// which runs every timer due before its target in one call, Step stops at
// each instant a timer is due, so that the simulation can wait for what
// those timers set going (an expiry's proposal, a waiter giving up) before
// time moves on: a goroutine that reads the clock late would otherwise see
// a later time on one run than on another.
//
// It also recognises the timer of a queued acquire's wait: the simulation
// announces the wait's length (Expect) before the call, and the AfterFunc
// of exactly that length binds to it, so the simulation knows when the
// waiter has armed its timer and when that timer has fired.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  []*timer
	expects map[time.Duration][]*Wait
}

type timer struct {
	c       *Clock
	at      time.Time
	seq     uint64
	f       func()
	stopped bool
	wait    *Wait
}

// Wait is an announced wait timer: Armed once the waiter created it, Fired
// once it fell due.
type Wait struct {
	Armed bool
	Fired bool
	At    time.Time
}

// NewClock returns a clock at a fixed time.
func NewClock() *Clock {
	return &Clock{now: time.Unix(1_000_000, 0), expects: map[time.Duration][]*Wait{}}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc runs f when the clock reaches now+d, from Step.
func (c *Clock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	if ws := c.expects[d]; len(ws) > 0 {
		t.wait, c.expects[d] = ws[0], ws[1:]
		t.wait.Armed, t.wait.At = true, t.at
		if len(c.expects[d]) == 0 {
			delete(c.expects, d)
		}
	}
	c.timers = append(c.timers, t)
	return t
}

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Expect announces a wait timer of length d about to be created.
func (c *Clock) Expect(d time.Duration) *Wait {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &Wait{}
	c.expects[d] = append(c.expects[d], w)
	return w
}

// Unexpect withdraws an announcement that no timer took (the acquire was
// answered without queueing).
func (c *Clock) Unexpect(d time.Duration, w *Wait) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := c.expects[d]
	for i, x := range ws {
		if x == w {
			c.expects[d] = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(c.expects[d]) == 0 {
		delete(c.expects, d)
	}
}

// WaitArmed reports whether an announced wait's timer exists.
func (c *Clock) WaitArmed(w *Wait) (armed, fired bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return w.Armed, w.Fired
}

// Step moves time towards target: to the first instant at or before target
// at which a timer is due, running every timer due then (in the order they
// were created), or to target itself when none is. It reports how many
// timers ran and whether target was reached; a caller steps until it is.
func (c *Clock) Step(target time.Time) (fired int, reached bool) {
	c.mu.Lock()
	live := c.timers[:0]
	for _, t := range c.timers {
		if !t.stopped {
			live = append(live, t)
		}
	}
	c.timers = live
	var at time.Time
	found := false
	for _, t := range c.timers {
		if !t.at.After(target) && (!found || t.at.Before(at)) {
			at, found = t.at, true
		}
	}
	if !found {
		if target.After(c.now) {
			c.now = target
		}
		c.mu.Unlock()
		return 0, true
	}
	var due []*timer
	rest := c.timers[:0]
	for _, t := range c.timers {
		if t.at.Equal(at) {
			due = append(due, t)
		} else {
			rest = append(rest, t)
		}
	}
	c.timers = rest
	sort.Slice(due, func(i, j int) bool { return due[i].seq < due[j].seq })
	if at.After(c.now) {
		c.now = at
	}
	for _, t := range due {
		t.stopped = true
		if t.wait != nil {
			t.wait.Fired = true
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
	// Timers that ran may have armed others due at once: the caller
	// steps again to see.
	return len(due), false
}

// Pending counts the timers that have neither fired nor been stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}
