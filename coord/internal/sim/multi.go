package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/fencer-io/fencer/fsm/entry"
)

// Multi-locks in the model: a MultiAcquire's events start one grant per
// name, all with its token; a MultiRelease's end them. A waiting
// multi-acquire is queued for each of its names (QueuedMulti); a name
// whose queue holds one may be kept for it, free, with nobody offered it
// (coord/DESIGN.md, "Multi-locks"), which the model cannot tell from the
// FIFO's order (it keeps none): the freeing-entry rules are not asked of
// such a name, and oneMultiGrant asks what a multi-grant must be.

// QueuedMulti registers a client's multi-acquire that may queue for
// names, before it is made.
func (c *Checker) QueuedMulti(names []string, requestID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		put(c.queued, Key{Lock, n}, requestID, true)
		c.order[Key{Lock, n}] = append(c.order[Key{Lock, n}], requestID)
	}
	c.multiReqs[requestID] = true
}

// aheadLocked returns the requests still queued for k that were queued
// before req (each step settles before the next, so the order in which
// the simulation registers its waiters is their order in the FIFO).
func (c *Checker) aheadLocked(k Key, req string) []string {
	// Forget those out of the FIFO (answered, offered or granted).
	c.order[k] = slices.DeleteFunc(c.order[k], func(r string) bool { return !c.queued[k][r] })
	if i := slices.Index(c.order[k], req); i >= 0 {
		return c.order[k][:i]
	}
	return nil
}

// WaitEnds says the wait of the queued request req ends at end, by the
// leader's clock.
func (c *Checker) WaitEnds(req string, end time.Time) {
	c.mu.Lock()
	c.waitEnds[req] = end
	c.mu.Unlock()
}

// multiInOrder: a queued multi-acquire is granted only once nobody queued
// before it on any of its names still waits, and a queued single acquire
// never passes a multi-acquire queued before it (FIFO both ways; two
// multi-acquires thereby never wait on each other).
func multiInOrder(c *Checker, e *Effect) string {
	if _, ok := e.Cmd.(*entry.MultiAcquire); ok && len(e.Started) > 0 && c.multiReqs[e.Started[0].RequestID] {
		c.counts["multi-grants of queued requests"]++
	}
	for _, g := range e.Started {
		if !c.queued[g.Key][g.RequestID] {
			continue
		}
		for _, r := range c.aheadLocked(g.Key, g.RequestID) {
			if end, ok := c.waitEnds[r]; ok && !e.Now.Before(end) {
				continue // its wait has ended: it leaves the FIFO, answered soon
			}
			if c.multiReqs[g.RequestID] || c.multiReqs[r] {
				// Judged once the step settles: r may have left the FIFO
				// already, answered by a proposal of its own that failed
				// (Unserved), an answer the simulation reads later.
				c.passed = append(c.passed, passed{ahead: r, what: fmt.Sprintf("entry %d: %s granted to request %s (token %d) while request %s, queued before it, still waited",
					e.Index, g.Key, g.RequestID, g.Token, r)})
			}
		}
	}
	return ""
}

// AnsweredMulti says the multi-acquire with requestID got its answer.
func (c *Checker) AnsweredMulti(names []string, requestID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		delete(c.queued[Key{Lock, n}], requestID)
		c.unowe(Key{Lock, n}, requestID, false)
	}
	delete(c.multiReqs, requestID)
	delete(c.waitEnds, requestID)
}

// keptLocked reports whether a multi-acquire is queued for k: k may be
// kept for it.
func (c *Checker) keptLocked(k Key) bool {
	for req := range c.queued[k] {
		if c.multiReqs[req] {
			return true
		}
	}
	return false
}

// liveToken finds a live lock grant with token, of any name.
func (c *Checker) liveToken(token uint64) *Grant {
	for k, gs := range c.live {
		if g := gs[token]; g != nil && k.Kind == Lock {
			return g
		}
	}
	return nil
}

// oneMultiGrant: a MultiAcquire grants every one of its names or none,
// all with one token; a MultiRelease ends every name of its grant and
// nothing else.
func oneMultiGrant(c *Checker, e *Effect) string {
	switch x := e.Cmd.(type) {
	case *entry.MultiAcquire:
		if len(e.Started) == 0 {
			return ""
		}
		if len(e.Started) != len(x.Names) {
			return fmt.Sprintf("multi-acquire of %v granted %d names", x.Names, len(e.Started))
		}
		for _, g := range e.Started {
			if g.Token != e.Started[0].Token || !slices.Contains(x.Names, g.Key.Name) || g.Key.Kind != Lock {
				return fmt.Sprintf("multi-acquire of %v granted %s with token %d beside token %d", x.Names, g.Key, g.Token, e.Started[0].Token)
			}
		}
	case *entry.MultiRelease:
		names := c.multis[x.Token]
		if len(e.Ended) == 0 {
			return ""
		}
		if len(e.Ended) != len(names) {
			return fmt.Sprintf("multi-grant %d of %v ended %d names", x.Token, names, len(e.Ended))
		}
		for _, end := range e.Ended {
			if end.Token != x.Token || !slices.Contains(names, end.Key.Name) {
				return fmt.Sprintf("multi-grant %d's end ended %s's grant %d", x.Token, end.Key, end.Token)
			}
		}
	}
	return ""
}

// applyMultiLocked moves the model's multi-grants past an entry.
func (c *Checker) applyMultiLocked(e *Effect) {
	switch x := e.Cmd.(type) {
	case *entry.MultiAcquire:
		for _, n := range x.Names {
			delete(c.queued[Key{Lock, n}], x.RequestID)
			c.unowe(Key{Lock, n}, x.RequestID, false)
		}
		if len(e.Started) > 0 && c.multis[e.Started[0].Token] == nil {
			c.multis[e.Started[0].Token] = slices.Clone(x.Names)
			c.counts["multi-grants"]++
		}
	case *entry.MultiRelease:
		if len(e.Ended) > 0 {
			delete(c.multis, x.Token)
		}
	}
}

// passed is a grant that passed a request queued before it, unless that
// request had left the FIFO (Unserved).
type passed struct {
	ahead, what string
}

// Unserved says the queued request req was answered with the failure of
// a proposal of its own (this node could not propose): it left its FIFO
// then, whatever the simulation read of it since.
func (c *Checker) Unserved(req string) {
	c.mu.Lock()
	c.unserved[req] = true
	c.mu.Unlock()
}

// settleMultiLocked fails every grant that passed a request that had not
// left its FIFO.
func (c *Checker) settleMultiLocked() {
	for _, p := range c.passed {
		if !c.unserved[p.ahead] {
			c.failLocked("multi-acquires in FIFO order", "%s", p.what)
		}
	}
	c.passed, c.unserved = nil, map[string]bool{}
}
