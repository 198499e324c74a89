package checker

import (
	"fmt"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// A refusal is a statement about the service's state, and the definite
// ones must be true. unissued_token says the write's token is above every
// token granted so far; tokens come from one sequence that only moves
// forward (EpochTokens checks that it does across restarts), so once any
// client was told of a token at least as great, the statement is false
// for every later write. The workload makes no token lookups, so
// unknown_token's never_granted has nothing to be checked against here.

// FalseUnissued finds writes refused unissued_token although a token at
// least as great had been acknowledged to a client (granted, or reported
// current by lock_held, a renew or release ok, a read) or seen by an
// election observer before the write was sent. It judges the answer
// whatever the op's outcome: a put retried after a lost answer is
// indeterminate, but the refusal it ended with is still false.
func FalseUnissued(h history.History) []Violation {
	var out []Violation
	for _, op := range h.Ops {
		if op.Code != wire.CodeUnissuedToken {
			continue
		}
		if g, ok := acknowledgedBefore(h, op.Token, op.Call); ok {
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: %s with t%d was refused unissued_token, but t%d had been acknowledged to c%d before it was sent",
					op.Target, op.Kind, op.Token, g.Token, g.Client),
				Ops: []history.Op{g, op},
			})
			continue
		}
		if o, ok := observedBefore(h, op.Token, op.Call); ok {
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: %s with t%d was refused unissued_token, but observer %d had seen t%d before it was sent",
					op.Target, op.Kind, op.Token, o.Observer, o.Token),
				Ops:          []history.Op{op},
				Observations: []history.Observation{o},
			})
		}
	}
	return out
}

// acknowledgedBefore returns the best evidence that a token of at least t
// had been issued by time at: the grant of t itself if it returned by then,
// or else the earliest-returning op that acknowledged such a token.
func acknowledgedBefore(h history.History, t uint64, at int64) (history.Op, bool) {
	var best history.Op
	found := false
	for _, op := range h.Ops {
		if op.Return >= at || op.Token < t || !acknowledgesToken(op) {
			continue
		}
		switch {
		case isGrant(op) && op.Token == t:
			return op, true
		case !found || op.Return < best.Return:
			best, found = op, true
		}
	}
	return best, found
}

func observedBefore(h history.History, t uint64, at int64) (history.Observation, bool) {
	for _, o := range h.Observations {
		if o.Time < at && o.Token >= t {
			return o, true
		}
	}
	return history.Observation{}, false
}

// hasCodes reports whether h records the codes of the service's error
// answers; a history written before they were recorded has none.
func hasCodes(h history.History) bool {
	for _, op := range h.Ops {
		if op.Code != "" {
			return true
		}
	}
	return false
}
