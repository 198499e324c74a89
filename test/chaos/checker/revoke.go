package checker

import (
	"fmt"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// RevokedWrites checks issue 28's rule for revoke: a revoked holder's
// lock-bound writes after the revoke are refused. Fencing is what makes a
// revoke safe, and the lock binding is what refuses the holder's writes
// even before the next holder writes (without it, an unbound write with
// the revoked token is still above the key's mark until then). Two ways:
//
//   - in real time, from the clients' history: no lock-bound put with a
//     revoked token, called after a client was told of the revoke (a
//     revoke answered ok, or a renew, release or revoke of the token
//     refused revoked), is acknowledged;
//   - in log order, from the watcher's stream: no put of that token to a
//     key its lock binds is accepted at an index after the revoke's entry
//     (a revoked event, or a hand-off with reason revoked), when every
//     acknowledged put of that token and key was lock-bound (an unbound
//     one may land there, and the stream does not say which it was).
func RevokedWrites(h history.History) []Violation {
	told := map[uint64]history.Op{} // token → the op that first told a client of its revoke
	for _, op := range h.Ops {
		if !tellsRevoke(op) {
			continue
		}
		if first, ok := told[op.Token]; !ok || op.Return < first.Return {
			told[op.Token] = op
		}
	}
	var out []Violation
	for _, p := range h.Ops {
		r, ok := told[p.Token]
		if p.Kind != history.Put || p.Lock == "" || p.Outcome != history.OK || !ok || p.Call <= r.Return {
			continue
		}
		out = append(out, Violation{
			Message: fmt.Sprintf("lock-bound put of %s with t%d (lock %s) acknowledged, called after the grant's revoke was answered", p.Target, p.Token, p.Lock),
			Ops:     []history.Op{r, p},
		})
	}
	return append(out, revokedWritesInLog(h)...)
}

// tellsRevoke reports whether op told its client that op.Token was revoked.
func tellsRevoke(op history.Op) bool {
	return (op.Kind == history.Revoke && op.Outcome == history.OK) || op.Outcome == history.Revoked
}

// revokedWritesInLog is RevokedWrites' log-order half.
func revokedWritesInLog(h history.History) []Violation {
	if h.Watch == nil {
		return nil
	}
	type revoke struct {
		index uint64
		lock  string
	}
	revoked := map[uint64]revoke{}
	for _, e := range h.Watch.Events {
		switch {
		case e.Type == wire.EventRevoked && e.Name != "":
			// A lock's or a permit's (a session's names nothing); a put
			// binds only a lock, so a permit's is never matched below.
			revoked[e.Token] = revoke{e.Index, e.Name}
		case e.Type == wire.EventHandedOff && e.Reason == wire.EventRevoked:
			revoked[e.PrevToken] = revoke{e.Index, e.Name}
		}
	}
	// Per token and key: whether every acknowledged put was bound to the
	// lock the token is a grant of.
	type tokenKey struct {
		token uint64
		key   string
	}
	bound := map[tokenKey]bool{}
	for _, op := range h.Ops {
		r, ok := revoked[op.Token]
		if op.Kind != history.Put || op.Outcome != history.OK || !ok {
			continue
		}
		k := tokenKey{op.Token, op.Target}
		was, seen := bound[k]
		bound[k] = (!seen || was) && op.Lock == r.lock
	}
	var out []Violation
	for _, e := range h.Watch.Events {
		r, ok := revoked[e.Token]
		if e.Type != wire.EventPut || !ok || e.Index <= r.index || !bound[tokenKey{e.Token, e.Key}] {
			continue
		}
		out = append(out, Violation{
			Message: fmt.Sprintf("put of %s with t%d accepted at index %d, after the revoke of %s's grant t%d at index %d; every acknowledged put of it was bound to %s",
				e.Key, e.Token, e.Index, r.lock, e.Token, r.index, r.lock),
		})
	}
	return out
}

// hasRevoke reports whether a client revoked anything: what RevokedWrites
// judges.
func hasRevoke(h history.History) bool {
	for _, op := range h.Ops {
		if op.Kind == history.Revoke {
			return true
		}
	}
	return false
}
