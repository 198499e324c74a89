package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// grants returns the ops of h that were granted a token (acquire,
// sem_acquire and campaign ok), in history order. Every token comes from
// one sequence, whatever it was granted for.
func grants(h history.History) []history.Op {
	var out []history.Op
	for _, op := range h.Ops {
		if isGrant(op) {
			out = append(out, op)
		}
	}
	return out
}

func isGrant(op history.Op) bool {
	return op.Outcome == history.OK && (op.Kind == history.Acquire || op.Kind == history.SemAcquire || op.Kind == history.Campaign || op.Kind == history.RWAcquire)
}

// grantScope names what a grant is of: an election is a lock, so a
// campaign shares its lock's scope; a semaphore's names are its own.
func grantScope(op history.Op) string {
	if op.Kind == history.SemAcquire {
		return "semaphore " + op.Target
	}
	return op.Target
}

// UniqueGrants finds tokens granted more than once, on any locks: a token is
// a log index, so two grants sharing one means two log entries claimed the
// same index.
func UniqueGrants(h history.History) []Violation {
	first := map[uint64]history.Op{}
	var out []Violation
	for _, g := range grants(h) {
		prev, dup := first[g.Token]
		if !dup {
			first[g.Token] = g
			continue
		}
		out = append(out, Violation{
			Message: fmt.Sprintf("token t%d granted twice: on %s and on %s", g.Token, prev.Target, g.Target),
			Ops:     []history.Op{prev, g},
		})
	}
	return out
}

// GrantOrder finds grants of a lock (or an election, or a semaphore's
// permits) that do not follow real time: if grant A returned before grant B
// was called, B must carry the greater token.
func GrantOrder(h history.History) []Violation {
	byLock := map[string][]history.Op{}
	for _, g := range grants(h) {
		byLock[grantScope(g)] = append(byLock[grantScope(g)], g)
	}
	var out []Violation
	for _, lock := range sortedKeys(byLock) {
		for _, r := range regressions(byLock[lock], func(op history.Op) history.Stamp { return history.Stamp{Token: op.Token} }) {
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: grant t%d was called after grant t%d returned, but its token is not greater",
					lock, r.later.Token, r.earlier.Token),
				Ops: []history.Op{r.earlier, r.later},
			})
		}
	}
	return out
}

// EpochTokens finds grants that reuse the token space after a restart,
// restore or member replacement: every grant called after such an event
// must exceed every token the service acknowledged before it. A token is
// acknowledged when the service reports it to a client as granted or current
// (acquire ok or lock_held, renew or release ok, read held).
func EpochTokens(h history.History) []Violation {
	var out []Violation
	for _, e := range h.Events {
		if !e.Kind.IsEpoch() {
			continue
		}
		var highest *history.Op
		for i, op := range h.Ops {
			if op.Return < e.Time && acknowledgesToken(op) && (highest == nil || op.Token > highest.Token) {
				highest = &h.Ops[i]
			}
		}
		if highest == nil {
			continue
		}
		for _, g := range grants(h) {
			if g.Call > e.Time && g.Token <= highest.Token {
				out = append(out, Violation{
					Message: fmt.Sprintf("%s: grant t%d called after the %s at %d does not exceed t%d, acknowledged before it",
						g.Target, g.Token, e.Kind, e.Time, highest.Token),
					Ops:    []history.Op{*highest, g},
					Events: []history.Event{e},
				})
			}
		}
	}
	return out
}

func acknowledgesToken(op history.Op) bool {
	if op.Outcome != history.OK && !(op.Kind == history.Acquire && op.Outcome == history.LockHeld) {
		return false
	}
	switch op.Kind {
	case history.Acquire, history.Renew, history.Release, history.Revoke, history.SemAcquire, history.SemRenew, history.SemRelease, history.Campaign, history.Proclaim, history.Resign:
		return true
	case history.Read:
		return op.Held
	}
	return false
}

// regression is a pair of ops where later was called after earlier returned
// and yet its stamp does not come after earlier's.
type regression struct{ earlier, later history.Op }

// regressions checks that stamps follow real time: for every op, the greatest
// stamp among the ops that returned before it was called must admit its own.
// Only that greatest predecessor is reported, one pair per offending op.
func regressions(ops []history.Op, stamp func(history.Op) history.Stamp) []regression {
	byReturn := slices.Clone(ops)
	slices.SortStableFunc(byReturn, func(a, b history.Op) int { return cmp.Compare(a.Return, b.Return) })
	byCall := slices.Clone(ops)
	slices.SortStableFunc(byCall, func(a, b history.Op) int { return cmp.Compare(a.Call, b.Call) })
	var out []regression
	var best *history.Op
	next := 0
	for _, op := range byCall {
		for ; next < len(byReturn) && byReturn[next].Return < op.Call; next++ {
			if best == nil || stampLess(stamp(*best), stamp(byReturn[next])) {
				best = &byReturn[next]
			}
		}
		if best != nil && !stamp(*best).Admits(stamp(op)) {
			out = append(out, regression{earlier: *best, later: op})
		}
	}
	return out
}

func stampLess(a, b history.Stamp) bool {
	return a.Token < b.Token || (a.Token == b.Token && a.Seq < b.Seq)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// UnseenGrants finds tokens observed as a lock's current grant (lock_held,
// renew or release ok, read held) that no grant accounts for. A token no
// acquire ok granted can only come from an indeterminate acquire on that
// lock, called before the token was first observed, and each such acquire
// grants one token.
func UnseenGrants(h history.History) []Violation {
	granted := map[uint64]bool{}
	for _, g := range grants(h) {
		granted[g.Token] = true
	}
	first := map[string]map[uint64]history.Op{} // per lock, per unseen token: its earliest-returning observer
	acquires := map[string][]history.Op{}
	for _, op := range h.Ops {
		switch {
		case op.Kind == history.Acquire && op.Outcome.Indeterminate():
			acquires[op.Target] = append(acquires[op.Target], op)
		case observesToken(op) && !granted[op.Token]:
			if first[op.Target] == nil {
				first[op.Target] = map[uint64]history.Op{}
			}
			if o, seen := first[op.Target][op.Token]; !seen || op.Return < o.Return {
				first[op.Target][op.Token] = op
			}
		}
	}
	var out []Violation
	for _, lock := range sortedKeys(first) {
		var observers []history.Op
		for _, o := range first[lock] {
			observers = append(observers, o)
		}
		slices.SortFunc(observers, func(a, b history.Op) int { return cmp.Compare(a.Return, b.Return) })
		// Any acquire called before one deadline is called before every
		// later one too, so counting in deadline order is a maximum matching.
		calls := make([]int64, 0, len(acquires[lock]))
		for _, a := range acquires[lock] {
			calls = append(calls, a.Call)
		}
		slices.Sort(calls)
		available, used := 0, 0
		for _, o := range observers {
			for available < len(calls) && calls[available] <= o.Return {
				available++
			}
			if used < available {
				used++
				continue
			}
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: t%d was observed as the current grant, but no acquire granted it", lock, o.Token),
				Ops:     []history.Op{o},
			})
		}
	}
	return out
}
