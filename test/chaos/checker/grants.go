package checker

import (
	"cmp"
	"fmt"
	"slices"
)

// grants returns the ops of h that were granted a token (acquire,
// sem_acquire and campaign ok), in history order. Every token comes from
// one sequence, whatever it was granted for.
func grants(h History) []Op {
	var out []Op
	for _, op := range h.Ops {
		if isGrant(op) {
			out = append(out, op)
		}
	}
	return out
}

func isGrant(op Op) bool {
	return op.Outcome == OK && (op.Kind == Acquire || op.Kind == SemAcquire || op.Kind == Campaign)
}

// grantScope names what a grant is of: an election is a lock, so a
// campaign shares its lock's scope; a semaphore's names are its own.
func grantScope(op Op) string {
	if op.Kind == SemAcquire {
		return "semaphore " + op.Target
	}
	return op.Target
}

// UniqueGrants finds tokens granted more than once, on any locks: a token is
// a log index, so two grants sharing one means two log entries claimed the
// same index.
func UniqueGrants(h History) []Violation {
	first := map[uint64]Op{}
	var out []Violation
	for _, g := range grants(h) {
		prev, dup := first[g.Token]
		if !dup {
			first[g.Token] = g
			continue
		}
		out = append(out, Violation{
			Message: fmt.Sprintf("token t%d granted twice: on %s and on %s", g.Token, prev.Target, g.Target),
			Ops:     []Op{prev, g},
		})
	}
	return out
}

// GrantOrder finds grants of a lock (or an election, or a semaphore's
// permits) that do not follow real time: if grant A returned before grant B
// was called, B must carry the greater token.
func GrantOrder(h History) []Violation {
	byLock := map[string][]Op{}
	for _, g := range grants(h) {
		byLock[grantScope(g)] = append(byLock[grantScope(g)], g)
	}
	var out []Violation
	for _, lock := range sortedKeys(byLock) {
		for _, r := range regressions(byLock[lock], func(op Op) Stamp { return Stamp{Token: op.Token} }) {
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: grant t%d was called after grant t%d returned, but its token is not greater",
					lock, r.later.Token, r.earlier.Token),
				Ops: []Op{r.earlier, r.later},
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
func EpochTokens(h History) []Violation {
	var out []Violation
	for _, e := range h.Events {
		if !e.Kind.IsEpoch() {
			continue
		}
		var highest *Op
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
					Ops:    []Op{*highest, g},
					Events: []Event{e},
				})
			}
		}
	}
	return out
}

func acknowledgesToken(op Op) bool {
	if op.Outcome != OK && !(op.Kind == Acquire && op.Outcome == LockHeld) {
		return false
	}
	switch op.Kind {
	case Acquire, Renew, Release, SemAcquire, SemRenew, SemRelease, Campaign, Proclaim, Resign:
		return true
	case Read:
		return op.Held
	}
	return false
}

// regression is a pair of ops where later was called after earlier returned
// and yet its stamp does not come after earlier's.
type regression struct{ earlier, later Op }

// regressions checks that stamps follow real time: for every op, the greatest
// stamp among the ops that returned before it was called must admit its own.
// Only that greatest predecessor is reported, one pair per offending op.
func regressions(ops []Op, stamp func(Op) Stamp) []regression {
	byReturn := slices.Clone(ops)
	slices.SortStableFunc(byReturn, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
	byCall := slices.Clone(ops)
	slices.SortStableFunc(byCall, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	var out []regression
	var best *Op
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

func stampLess(a, b Stamp) bool {
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
func UnseenGrants(h History) []Violation {
	granted := map[uint64]bool{}
	for _, g := range grants(h) {
		granted[g.Token] = true
	}
	first := map[string]map[uint64]Op{} // per lock, per unseen token: its earliest-returning observer
	acquires := map[string][]Op{}
	for _, op := range h.Ops {
		switch {
		case op.Kind == Acquire && op.Outcome.indeterminate():
			acquires[op.Target] = append(acquires[op.Target], op)
		case observesToken(op) && !granted[op.Token]:
			if first[op.Target] == nil {
				first[op.Target] = map[uint64]Op{}
			}
			if o, seen := first[op.Target][op.Token]; !seen || op.Return < o.Return {
				first[op.Target][op.Token] = op
			}
		}
	}
	var out []Violation
	for _, lock := range sortedKeys(first) {
		var observers []Op
		for _, o := range first[lock] {
			observers = append(observers, o)
		}
		slices.SortFunc(observers, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
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
				Ops:     []Op{o},
			})
		}
	}
	return out
}
