package checker

import "github.com/fencer-io/fencer/test/chaos/history"

// Porcupine must try every place an indeterminate operation could take
// effect, and an Unknown one may take effect anywhere up to the end of the
// history: a failing history with a dozen of them on one lock is beyond any
// time budget. Most of those places cannot matter, though. "It did not
// happen" is always one of the model's branches, and it explains the history
// whenever "it happened" does, unless a later operation observes the effect:
//
//   - renew, read and get change nothing either way: left out.
//   - release: "happened" frees the lock, which any later step that needs a
//     free lock gets anyway from spontaneous expiry, and a lock that stayed
//     held allows everything a freed one does: left out.
//   - acquire: "happened" grants an unseen token, which only matters to an
//     op that observes it. Placing the grant right before that op allows
//     everything placing it earlier does, so the acquire is left out and the
//     observing op may adopt the token itself (model.LockInput.Unseen), if an
//     indeterminate acquire on the lock could have granted it. That each
//     unseen token has an acquire of its own is checked by UnseenGrants.
//   - put: "happened" sets the key, which only matters to a get returning
//     exactly that write, or to a stale_token refusal it could explain and
//     that an earlier acknowledged put does not. Without either it is left
//     out; with them, it must take effect before the last of them returns
//     rather than before the end of the history.

// plan returns, for each op of h, the time by which the linearizability
// check must place it (-1: leave it out), and whether it observes an unseen
// token (see model.LockInput).
func plan(h history.History) (window []int64, unseen []bool) {
	granted := map[uint64]bool{}
	var acked, acquires []history.Op
	for _, op := range h.Ops {
		switch {
		case op.Kind == history.Acquire && op.Outcome == history.OK:
			granted[op.Token] = true
		case op.Kind == history.Acquire && op.Outcome.Indeterminate():
			acquires = append(acquires, op)
		case op.Kind == history.Put && op.Outcome == history.OK:
			acked = append(acked, op)
		}
	}
	window = make([]int64, len(h.Ops))
	unseen = make([]bool, len(h.Ops))
	for i, u := range h.Ops {
		if observesToken(u) && !granted[u.Token] {
			for _, a := range acquires {
				if a.Target == u.Target && a.Call <= u.Return {
					unseen[i] = true
					break
				}
			}
		}
		switch {
		case !u.Outcome.Indeterminate():
			window[i] = u.Return
		case u.Kind == history.Put:
			window[i] = putWindow(h.Ops, u, acked)
		default:
			window[i] = -1
		}
	}
	return window, unseen
}

// putWindow returns the time by which the indeterminate put u must take
// effect to matter, or -1 if it never does. A get reads a write first no
// later than the earliest such get returns, so for each write only the
// earliest get counts; a refusal may rest on u wherever it falls.
func putWindow(ops []history.Op, u history.Op, acked []history.Op) int64 {
	firstGet := int64(-1)
	last := int64(-1)
	for _, o := range ops {
		if o.Target != u.Target || u.Call > o.Return {
			continue
		}
		switch {
		case o.Kind == history.Get && o.Outcome == history.OK && o.Found && o.Stamp() == u.Stamp() && o.Value == u.Value:
			if firstGet < 0 || o.Return < firstGet {
				firstGet = o.Return
			}
		case o.Kind == history.Put && o.Outcome == history.StaleToken && !u.Stamp().Admits(o.Stamp()) && !refusedAnyway(o, acked):
			last = max(last, o.Return)
		}
	}
	last = max(last, firstGet)
	switch {
	case last < 0:
		return -1
	case u.Outcome == history.Unknown:
		return max(u.Return, last)
	}
	return u.Return // answered: if it took effect, it did before the answer
}

// observesToken reports whether op tells its client that op.Token is the
// lock's current grant.
func observesToken(op history.Op) bool {
	switch {
	case op.Kind == history.Acquire:
		return op.Outcome == history.LockHeld
	case op.Kind == history.Renew, op.Kind == history.Release, op.Kind == history.Revoke:
		return op.Outcome == history.OK
	case op.Kind == history.Read:
		return op.Outcome == history.OK && op.Held
	}
	return false
}

// refusedAnyway reports whether the refusal s is explained without any
// indeterminate put: an acknowledged put of a stamp at least s's returned
// before s was called, and a key's stamp never goes back.
func refusedAnyway(s history.Op, acked []history.Op) bool {
	for _, a := range acked {
		if a.Target == s.Target && a.Return < s.Call && !a.Stamp().Admits(s.Stamp()) {
			return true
		}
	}
	return false
}
