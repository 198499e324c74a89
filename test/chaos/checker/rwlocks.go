package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// A lock taken in a mode (issue 28: shared or exclusive) is judged from
// what is certain, as permits are: a grant is certainly live from the
// return of its rw_acquire ok until the earliest of its lease's end at the
// soonest (TTL after the acquire's call: renewals nobody recorded, the
// client library's keep-alive, only make it longer), the call of its
// first release, and a restore. An exclusive grant certainly live at an
// instant when another grant of its lock, shared or exclusive, certainly
// is too is a violation: the service had granted both at once. A grant
// whose answer was lost is not counted, so the check can miss an overlap
// but never invents one.

// RWExclusion finds exclusive grants of a lock that overlapped, in real
// time, any other grant of the same lock.
func RWExclusion(h history.History) []Violation {
	released := map[uint64]int64{}
	for _, op := range h.Ops {
		if op.Kind == history.RWRelease {
			if at, ok := released[op.Token]; !ok || op.Call < at {
				released[op.Token] = op.Call
			}
		}
	}
	var restores []int64
	for _, e := range h.Events {
		if e.Kind == history.EventRestore {
			restores = append(restores, e.Time)
		}
	}
	byLock := map[string][]permitSpan{}
	for _, g := range h.Ops {
		if g.Kind != history.RWAcquire || g.Outcome != history.OK {
			continue
		}
		to := g.Call + g.TTL*int64(time.Millisecond)
		if at, ok := released[g.Token]; ok {
			to = min(to, at)
		}
		for _, at := range restores {
			if at >= g.Call {
				to = min(to, at)
			}
		}
		if to > g.Return {
			byLock[g.Target] = append(byLock[g.Target], permitSpan{grant: g, from: g.Return, to: to})
		}
	}
	var out []Violation
	for _, lock := range sortedKeys(byLock) {
		spans := byLock[lock]
		slices.SortFunc(spans, func(a, b permitSpan) int { return cmp.Compare(a.from, b.from) })
		for i, x := range spans {
			if x.grant.Mode != "exclusive" {
				continue
			}
			for j, y := range spans {
				// Half-open spans overlap when each starts before the other
				// ends; a pair of exclusive grants is reported once.
				if i == j || (y.grant.Mode == "exclusive" && j < i) || x.from >= y.to || y.from >= x.to {
					continue
				}
				out = append(out, Violation{
					Message: fmt.Sprintf("lock %s: exclusive grant t%d certainly live beside %s grant t%d from %d to %d",
						lock, x.grant.Token, y.grant.Mode, y.grant.Token, max(x.from, y.from), min(x.to, y.to)),
					Ops: []history.Op{x.grant, y.grant},
				})
			}
		}
	}
	return out
}
