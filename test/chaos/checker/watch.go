package checker

import (
	"fmt"
	"slices"
)

// Watch is what a watcher of GET /v1/events saw through a whole run: the
// grants it was told of, in the order it received them, and the ranges of
// log indexes it could not see (the members no longer kept them when it
// asked: a restarted or wiped member, a restore).
type Watch struct {
	Grants []WatchedGrant `json:"grants"`
	Gaps   []WatchGap     `json:"gaps,omitempty"`
	// Until is the last log index the watch is known to have covered: a
	// grant after it was applied after the watcher stopped.
	Until uint64 `json:"until"`
}

// WatchedGrant is one acquired or handed_off event: the new grant.
type WatchedGrant struct {
	Index  uint64 `json:"index"`
	Type   string `json:"type"`
	Lock   string `json:"lock"`
	Holder string `json:"holder,omitempty"`
	Token  uint64 `json:"token"`
}

// WatchGap is the log indexes (After, Until] the watcher did not see.
type WatchGap struct {
	After uint64 `json:"after"`
	Until uint64 `json:"until"`
}

// tokenIndex is the log index of the entry that granted token (the epoch
// is above bit 40).
func tokenIndex(token uint64) uint64 { return token & (1<<40 - 1) }

// WatchedGrants checks the watcher's stream against the clients' history:
// its events come in log order, each entry once; the grants it reports
// come in token order; and every grant a client was acknowledged (acquire
// and campaign ok) is in it, with its lock and token, unless its entry is in
// a gap or after the watch ended.
func WatchedGrants(h History) []Violation {
	w := h.Watch
	if w == nil {
		return nil
	}
	var out []Violation
	var last WatchedGrant
	seen := map[uint64]WatchedGrant{}
	for i, g := range w.Grants {
		if i > 0 {
			switch {
			case g.Index < last.Index:
				out = append(out, Violation{Message: fmt.Sprintf("event of index %d (%s %s t%d) after one of index %d: not in log order", g.Index, g.Type, g.Lock, g.Token, last.Index)})
			case g.Token <= last.Token:
				out = append(out, Violation{Message: fmt.Sprintf("grant t%d of %s reported after t%d of %s: not in token order", g.Token, g.Lock, last.Token, last.Lock)})
			}
		}
		if prev, dup := seen[g.Token]; dup {
			out = append(out, Violation{Message: fmt.Sprintf("grant t%d reported twice (index %d and %d)", g.Token, prev.Index, g.Index)})
		}
		seen[g.Token] = g
		last = g
	}
	inGap := func(index uint64) bool {
		return index > w.Until || slices.ContainsFunc(w.Gaps, func(gap WatchGap) bool { return index > gap.After && index <= gap.Until })
	}
	for _, op := range h.Ops {
		if (op.Kind != Acquire && op.Kind != Campaign) || op.Outcome != OK {
			continue
		}
		g, ok := seen[op.Token]
		switch {
		case !ok && !inGap(tokenIndex(op.Token)):
			out = append(out, Violation{Message: fmt.Sprintf("acknowledged grant t%d of %s is not in the watched stream", op.Token, op.Target), Ops: []Op{op}})
		case ok && g.Lock != op.Target:
			out = append(out, Violation{Message: fmt.Sprintf("grant t%d is of %s, the watched stream says %s", op.Token, op.Target, g.Lock), Ops: []Op{op}})
		}
	}
	return out
}
