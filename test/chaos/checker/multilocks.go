package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// MultiGrants judges multi-locks: a multi-grant is one grant over several
// names, so from the watcher's stream
//
//   - every name of it carries its one token, granted at that token's
//     index, and the names the stream shows granted with it are those the
//     client asked for and was answered ok;
//   - its names end at one index (a release, an expiry or a restore's
//     void), each once: no name ends without the others;
//   - no write with its token is accepted after that end (the workload
//     binds every write of a multi-grant's token to one of its names, so
//     such a write must be refused not_lock_holder);
//   - no name is granted to a multi-grant while an earlier one holds it
//     (waiting multi-locks queue for each other's names; the names are
//     multi-locks' alone).
//
// What falls in the stream's gaps, or after it, is not judged.
func MultiGrants(h history.History) []Violation {
	w := h.Watch
	if w == nil {
		return nil
	}
	inGap := func(index uint64) bool {
		return index > w.Until || slices.ContainsFunc(w.Gaps, func(gap history.WatchGap) bool { return index > gap.After && index <= gap.Until })
	}
	granted := map[uint64][]history.WatchedGrant{}
	for _, g := range w.Grants {
		if g.Type == wire.EventAcquired {
			granted[g.Token] = append(granted[g.Token], g)
		}
	}
	asked := map[uint64]history.Op{}
	multi := map[uint64]bool{}
	for _, op := range h.Ops {
		if op.Kind == history.MultiAcquire && op.Outcome == history.OK {
			asked[op.Token], multi[op.Token] = op, true
		}
	}
	for t, gs := range granted {
		if len(gs) > 1 {
			multi[t] = true
		}
	}
	type end struct {
		name  string
		index uint64
	}
	ends := map[uint64][]end{}
	var puts []history.WatchedEvent
	for _, e := range w.Events {
		switch {
		case e.Type == wire.EventPut && multi[e.Token]:
			puts = append(puts, e)
		case (e.Type == wire.EventReleased || e.Type == wire.EventExpired || e.Type == wire.EventVoided) && multi[e.Token]:
			ends[e.Token] = append(ends[e.Token], end{e.Name, e.Index})
		case e.Type == wire.EventHandedOff && multi[e.PrevToken]:
			ends[e.PrevToken] = append(ends[e.PrevToken], end{e.Name, e.Index})
		}
	}
	var out []Violation
	tokens := make([]uint64, 0, len(multi))
	for t := range multi {
		tokens = append(tokens, t)
	}
	slices.Sort(tokens)
	for _, t := range tokens {
		op, known := asked[t]
		var ops []history.Op
		if known {
			ops = []history.Op{op}
		}
		var names []string
		for _, g := range granted[t] {
			names = append(names, g.Lock)
			if g.Index != tokenIndex(t) {
				out = append(out, Violation{Message: fmt.Sprintf("multi-grant t%d: %s granted at index %d, not its token's %d", t, g.Lock, g.Index, tokenIndex(t)), Ops: ops})
			}
		}
		if known && !inGap(tokenIndex(t)) && !sameNames(names, op.Names) {
			out = append(out, Violation{Message: fmt.Sprintf("multi-grant t%d asked for %v, the stream grants %v with it", t, op.Names, names), Ops: ops})
		}
		endAt, seen := uint64(0), map[string]bool{}
		for _, e := range ends[t] {
			if seen[e.name] {
				out = append(out, Violation{Message: fmt.Sprintf("multi-grant t%d: %s ended twice", t, e.name), Ops: ops})
			}
			seen[e.name] = true
			if endAt != 0 && e.index != endAt {
				out = append(out, Violation{Message: fmt.Sprintf("multi-grant t%d: its names end at indexes %d and %d, not in one entry", t, endAt, e.index), Ops: ops})
			}
			endAt = max(endAt, e.index)
		}
		if endAt != 0 && !inGap(endAt) {
			for _, n := range names {
				if !seen[n] {
					out = append(out, Violation{Message: fmt.Sprintf("multi-grant t%d: %s did not end with its other names at index %d", t, n, endAt), Ops: ops})
				}
			}
		}
		for _, p := range puts {
			if p.Token == t && endAt != 0 && p.Index > endAt {
				out = append(out, Violation{Message: fmt.Sprintf("multi-grant t%d ended at index %d, yet a write of %s with its token was accepted at index %d", t, endAt, p.Key, p.Index), Ops: ops})
			}
		}
	}
	endOf := func(t uint64, name string) uint64 {
		for _, e := range ends[t] {
			if e.name == name {
				return e.index
			}
		}
		return 0
	}
	return append(out, multiOverlaps(granted, multi, endOf, asked, w)...)
}

// multiOverlaps finds a name granted to a multi-grant before the
// multi-grant that had it before ended, where the stream shows both and
// everything between.
func multiOverlaps(granted map[uint64][]history.WatchedGrant, multi map[uint64]bool, endOf func(uint64, string) uint64,
	asked map[uint64]history.Op, w *history.Watch) []Violation {
	seenBetween := func(a, b uint64) bool {
		return b <= w.Until && !slices.ContainsFunc(w.Gaps, func(gap history.WatchGap) bool { return gap.After < b && gap.Until > a })
	}
	byName := map[string][]history.WatchedGrant{}
	for t, gs := range granted {
		if multi[t] {
			for _, g := range gs {
				byName[g.Lock] = append(byName[g.Lock], g)
			}
		}
	}
	var out []Violation
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		gs := byName[name]
		slices.SortFunc(gs, func(a, b history.WatchedGrant) int { return cmp.Compare(a.Index, b.Index) })
		for i := 1; i < len(gs); i++ {
			prev, cur := gs[i-1], gs[i]
			if end := endOf(prev.Token, name); (end == 0 || end > cur.Index) && seenBetween(prev.Index, cur.Index) {
				var ops []history.Op
				for _, t := range []uint64{prev.Token, cur.Token} {
					if op, ok := asked[t]; ok {
						ops = append(ops, op)
					}
				}
				out = append(out, Violation{Message: fmt.Sprintf("%s granted to multi-grant t%d at index %d while multi-grant t%d held it", name, cur.Token, cur.Index, prev.Token), Ops: ops})
			}
		}
	}
	return out
}

// sameNames reports whether a and b hold the same names, in any order.
func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}
