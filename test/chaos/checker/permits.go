package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// A semaphore's permits are judged like the lock model judges grants: only
// from what is certain. A permit is certainly live from the return of its
// sem_acquire ok until the earliest of:
//
//   - its lease's end at the soonest: TTL after the call of its grant or of
//     its last renewal that answered ok (the server starts a lease, or
//     restarts it, no earlier than the request that asks for it is sent;
//     renewals nobody recorded, such as the client library's keep-alive,
//     only make it longer); for a permit under a session, its session's:
//     the session's TTL after the call of its creation or of its last
//     renewal that answered ok, or the call of its close if sooner;
//   - the call of its first release, whatever the answer;
//   - a restore, which drops every permit.
//
// More than limit permits certainly live at one instant is a violation. A
// permit granted by an acquire whose answer was lost is not counted, and a
// lease that outlived its TTL (a failover restarts leases at full length)
// is counted only for its TTL, so the check can miss an excess but never
// invents one.

// permitSpan is the time a permit was certainly live.
type permitSpan struct {
	grant    history.Op
	from, to int64
}

// PermitLimits finds instants at which a semaphore had more permits
// certainly live than its limit.
func PermitLimits(h history.History) []Violation {
	type permit struct {
		sem   string
		token uint64
	}
	renewed := map[permit]int64{}
	released := map[permit]int64{}
	for _, op := range h.Ops {
		p := permit{op.Target, op.Token}
		switch {
		case op.Kind == history.SemRenew && op.Outcome == history.OK:
			renewed[p] = max(renewed[p], op.Call)
		case op.Kind == history.SemRelease:
			if at, ok := released[p]; !ok || op.Call < at {
				released[p] = op.Call
			}
		}
	}
	var restores []int64
	for _, e := range h.Events {
		if e.Kind == history.EventRestore {
			restores = append(restores, e.Time)
		}
	}
	underSession := sessionSpans(h)
	bySem := map[string][]permitSpan{}
	for _, g := range h.Ops {
		if g.Kind != history.SemAcquire || g.Outcome != history.OK {
			continue
		}
		p := permit{g.Target, g.Token}
		to := max(g.Call, renewed[p]) + g.TTL*int64(time.Millisecond)
		if g.Session != 0 {
			// A permit under a session lives as long as the session.
			to = underSession[g.Token]
		}
		if at, ok := released[p]; ok {
			to = min(to, at)
		}
		for _, at := range restores {
			if at >= g.Call {
				to = min(to, at)
			}
		}
		if to > g.Return {
			bySem[g.Target] = append(bySem[g.Target], permitSpan{grant: g, from: g.Return, to: to})
		}
	}
	var out []Violation
	for _, sem := range sortedKeys(bySem) {
		out = append(out, excessPermits(sem, bySem[sem])...)
	}
	return out
}

// excessPermits sweeps one semaphore's spans in time order and reports
// each stretch during which more than the limit were live, once, with the
// permits live when the excess began. The limit is the greatest any live
// grant asked for (the service refuses a mismatch, so they agree), which
// can only hide an excess.
func excessPermits(sem string, spans []permitSpan) []Violation {
	type edge struct {
		at    int64
		start bool
		i     int
	}
	var edges []edge
	for i, s := range spans {
		edges = append(edges, edge{s.from, true, i}, edge{s.to, false, i})
	}
	// Ends before starts at one instant: spans are half-open.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		switch {
		case a.start == b.start:
			return cmp.Compare(a.i, b.i)
		case a.start:
			return 1
		}
		return -1
	})
	live := map[int]bool{}
	over := false
	var out []Violation
	for _, e := range edges {
		if !e.start {
			delete(live, e.i)
		} else {
			live[e.i] = true
		}
		limit := 0
		for i := range live {
			limit = max(limit, spans[i].grant.Limit)
		}
		switch {
		case len(live) > limit && !over:
			over = true
			var ops []history.Op
			for i := range live {
				ops = append(ops, spans[i].grant)
			}
			slices.SortFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Token, b.Token) })
			out = append(out, Violation{
				Message: fmt.Sprintf("semaphore %s: %d permits certainly live at once at %d, limit %d", sem, len(live), e.at, limit),
				Ops:     ops,
			})
		case len(live) <= limit:
			over = false
		}
	}
	return out
}
