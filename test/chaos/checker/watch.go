package checker

import (
	"fmt"
	"slices"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// tokenIndex is the log index of the entry that granted token (the epoch
// is above bit 40).
func tokenIndex(token uint64) uint64 { return token & (1<<40 - 1) }

// WatchedGrants checks the watcher's stream against the clients' history:
// its events come in log order, each entry once; the grants it reports
// come in token order; and every grant a client was acknowledged (acquire
// and campaign ok) is in it, with its lock and token, unless its entry is in
// a gap or after the watch ended.
func WatchedGrants(h history.History) []Violation {
	w := h.Watch
	if w == nil {
		return nil
	}
	var out []Violation
	var last history.WatchedGrant
	seen := map[uint64]history.WatchedGrant{}
	for i, g := range w.Grants {
		if i > 0 {
			switch {
			case g.Index < last.Index:
				out = append(out, Violation{Message: fmt.Sprintf("event of index %d (%s %s t%d) after one of index %d: not in log order", g.Index, g.Type, g.Lock, g.Token, last.Index)})
			case g.Token < last.Token || g.Token == last.Token && !oneEntry(g, last):
				out = append(out, Violation{Message: fmt.Sprintf("grant t%d of %s reported after t%d of %s: not in token order", g.Token, g.Lock, last.Token, last.Lock)})
			}
		}
		if prev, dup := seen[g.Token]; dup && !oneEntry(g, prev) {
			out = append(out, Violation{Message: fmt.Sprintf("grant t%d reported twice (index %d and %d)", g.Token, prev.Index, g.Index)})
		}
		seen[g.Token] = g
		last = g
	}
	inGap := func(index uint64) bool {
		return index > w.Until || slices.ContainsFunc(w.Gaps, func(gap history.WatchGap) bool { return index > gap.After && index <= gap.Until })
	}
	for _, op := range h.Ops {
		if (op.Kind != history.Acquire && op.Kind != history.Campaign) || op.Outcome != history.OK {
			continue
		}
		g, ok := seen[op.Token]
		switch {
		case !ok && !inGap(tokenIndex(op.Token)):
			out = append(out, Violation{Message: fmt.Sprintf("acknowledged grant t%d of %s is not in the watched stream", op.Token, op.Target), Ops: []history.Op{op}})
		case ok && g.Lock != op.Target:
			out = append(out, Violation{Message: fmt.Sprintf("grant t%d is of %s, the watched stream says %s", op.Token, op.Target, g.Lock), Ops: []history.Op{op}})
		}
	}
	return out
}

// oneEntry reports whether a and b are two names of one multi-grant: one
// token granted on two locks in one entry (MultiGrants judges them).
func oneEntry(a, b history.WatchedGrant) bool {
	return a.Token == b.Token && a.Index == b.Index && a.Lock != b.Lock && a.Type == wire.EventAcquired && b.Type == wire.EventAcquired
}
