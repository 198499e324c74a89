// Package fakeclock is a clock for tests (a lease.Clock): its time moves only when
// Advance is called, and timers that fall due then run synchronously, in
// deadline order.
package fakeclock

import (
	"sort"
	"sync"
	"time"
)

// Clock is a lease.Clock whose time moves only when Advance is called; due
// timers then run synchronously, in deadline order.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *Clock
	at      time.Time
	f       func()
	stopped bool
}

// New returns a clock at a fixed time.
func New() *Clock { return &Clock{now: time.Unix(1_000_000, 0)} }

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Clock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves time forward by d, running every timer that falls due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		var due *fakeTimer
		for i, t := range c.timers {
			if t.stopped {
				continue
			}
			if !t.at.After(target) {
				due = t
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				c.now = t.at
			}
			break
		}
		if due == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		due.stopped = true
		c.mu.Unlock()
		due.f()
	}
}

// Pending counts timers that have not fired or been stopped.
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
