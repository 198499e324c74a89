package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// A session is one lease for many grants, and its end, by close or by
// expiry, is one log entry that ends every grant still under it. Three
// checks judge that, from two sources: the watcher's stream, which gives
// the index of every grant's end, of every session's end and of every
// accepted put; and the clients' own history, which says when a client was
// told a session had ended (its close answered ok, or a renewal or an
// acquire under it was refused session_expired) and what it observed
// after that.
//
//   - SessionGrantsEnd: every grant of a session that was still held when
//     the session ended ends at that index, no earlier (a session grant
//     has no lease of its own: only its release, or a restore, ends it
//     before its session) and no later; a session ends once; and a close
//     that answers ok names every grant its client held under it.
//   - SessionWrites: no lock-bound write with any of a session's tokens is
//     accepted after the session's end: neither at a later index of the
//     stream, nor acknowledged to a client that sent it after a client had
//     been told the session was over.
//   - SessionSurvivors: no grant outlives its session: none is granted
//     under it after its end, none still holds past its end index, and no
//     client is told one is current after being told the session ended.
//
// The index checks need the stream and skip what falls in its gaps; the
// time checks need only the history.

// sessionGrant is one grant made under a session, as the history or the
// stream tells of it.
type sessionGrant struct {
	session uint64
	token   uint64
	kind    string // wire.GrantKindLock or wire.GrantKindSemaphore
	name    string
	op      *history.Op // the acquire that was granted it, if recorded
}

func (g sessionGrant) String() string {
	return fmt.Sprintf("%s %s's grant t%d (granted at index %d)", g.kind, g.name, g.token, tokenIndex(g.token))
}

// grantEnd is the entry that ended a grant and how.
type grantEnd struct {
	index uint64
	how   string // released, expired or voided
}

// sessionFacts is everything the history says of the sessions.
type sessionFacts struct {
	grants map[uint64]sessionGrant // by token
	// ends are the indexes of each session's end events, closed or
	// expired (more than one is a violation).
	ends    map[uint64][]uint64
	created map[uint64]uint64 // session → index of its creation
	// grantEnds is how each grant ended, from the stream.
	grantEnds map[uint64]grantEnd
	// known is, per session, the op that first told a client the session
	// had ended (by its return).
	known map[uint64]history.Op
	puts  []history.WatchedEvent
	// restores are the indexes of the restores and recoveries the stream
	// showed (by their voided events): each ended every session without
	// an event of the session's own.
	restores []uint64
	w        *history.Watch
}

func readSessions(h history.History) sessionFacts {
	f := sessionFacts{grants: map[uint64]sessionGrant{}, ends: map[uint64][]uint64{}, created: map[uint64]uint64{},
		grantEnds: map[uint64]grantEnd{}, known: map[uint64]history.Op{}, w: h.Watch}
	for i, op := range h.Ops {
		switch {
		case op.Session != 0 && op.Outcome == history.OK && op.Kind == history.Acquire:
			f.grants[op.Token] = sessionGrant{session: op.Session, token: op.Token, kind: wire.GrantKindLock, name: op.Target, op: &h.Ops[i]}
		case op.Session != 0 && op.Outcome == history.OK && op.Kind == history.SemAcquire:
			f.grants[op.Token] = sessionGrant{session: op.Session, token: op.Token, kind: wire.GrantKindSemaphore, name: op.Target, op: &h.Ops[i]}
		}
		if endsSession(op) {
			if k, seen := f.known[op.Session]; !seen || op.Return < k.Return {
				f.known[op.Session] = op
			}
		}
	}
	if h.Watch == nil {
		return f
	}
	add := func(session, token uint64, kind, name string) {
		if _, seen := f.grants[token]; !seen && session != 0 {
			f.grants[token] = sessionGrant{session: session, token: token, kind: kind, name: name}
		}
	}
	for _, g := range h.Watch.Grants {
		add(g.Session, g.Token, wire.GrantKindLock, g.Lock)
	}
	for _, e := range h.Watch.Events {
		switch e.Type {
		case wire.EventPermitAcquired, wire.EventPermitHandedOff:
			add(e.Session, e.Token, wire.GrantKindSemaphore, e.Name)
		case wire.EventSessionCreated:
			f.created[e.Session] = e.Index
		case wire.EventSessionExpired, wire.EventSessionClosed:
			f.ends[e.Session] = append(f.ends[e.Session], e.Index)
		case wire.EventPut:
			f.puts = append(f.puts, e)
		case wire.EventVoided:
			f.restores = append(f.restores, e.Index)
		}
		switch e.Type {
		case wire.EventReleased, wire.EventExpired, wire.EventVoided, wire.EventPermitReleased, wire.EventPermitExpired:
			how := e.Type
			if e.Type == wire.EventPermitReleased {
				how = wire.EventReleased
			} else if e.Type == wire.EventPermitExpired {
				how = wire.EventExpired
			}
			f.grantEnds[e.Token] = grantEnd{index: e.Index, how: how}
		case wire.EventHandedOff, wire.EventPermitHandedOff:
			f.grantEnds[e.PrevToken] = grantEnd{index: e.Index, how: e.Reason}
		}
	}
	return f
}

// endsSession reports whether op told its client that its session had
// ended: a close ok, or a session op or an acquire under the session
// refused session_expired.
func endsSession(op history.Op) bool {
	switch {
	case op.Session == 0:
		return false
	case op.Kind == history.SessionClose && op.Outcome == history.OK:
		return true
	}
	return op.Outcome == history.SessionExpired
}

// end returns the index at which session ended, if the stream saw it end.
func (f sessionFacts) end(session uint64) (uint64, bool) {
	if ends := f.ends[session]; len(ends) > 0 {
		return slices.Min(ends), true
	}
	return 0, false
}

// restoredAfter reports whether a restore or recovery the stream showed
// came after index.
func (f sessionFacts) restoredAfter(index uint64) bool {
	return slices.ContainsFunc(f.restores, func(at uint64) bool { return at > index })
}

// unseen reports whether the stream may have missed an event in (from, to]:
// a gap overlaps it, or it runs past the watch's end.
func (f sessionFacts) unseen(from, to uint64) bool {
	if to > f.w.Until {
		return true
	}
	return slices.ContainsFunc(f.w.Gaps, func(g history.WatchGap) bool { return g.After < to && g.Until > from })
}

func (f sessionFacts) sortedGrants() []sessionGrant {
	out := make([]sessionGrant, 0, len(f.grants))
	for _, g := range f.grants {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b sessionGrant) int { return cmp.Compare(a.token, b.token) })
	return out
}

func (g sessionGrant) evidence() []history.Op {
	if g.op == nil {
		return nil
	}
	return []history.Op{*g.op}
}

// SessionGrantsEnd finds sessions whose grants did not all end in the
// entry that ended the session, and sessions that ended more than once or
// never.
func SessionGrantsEnd(h history.History) []Violation {
	out := closesReleaseAll(h)
	if h.Watch == nil {
		return out
	}
	f := readSessions(h)
	for _, id := range sortedIDs(f.ends) {
		if ends := f.ends[id]; len(ends) > 1 {
			out = append(out, Violation{Message: fmt.Sprintf("session s%d ended %d times, at indexes %v", id, len(ends), ends)})
		}
	}
	for _, id := range sortedIDs(f.created) {
		if _, ended := f.end(id); !ended && !f.unseen(f.created[id], f.w.Until) && !f.restoredAfter(f.created[id]) {
			out = append(out, Violation{Message: fmt.Sprintf("session s%d, created at index %d, never ended up to index %d, the end of the watch", id, f.created[id], f.w.Until)})
		}
	}
	for _, g := range f.sortedGrants() {
		end, ended := f.end(g.session)
		granted := tokenIndex(g.token)
		if !ended || granted > end {
			continue // SessionSurvivors judges a grant after its session's end
		}
		e, seen := f.grantEnds[g.token]
		switch {
		case !seen && f.unseen(granted, end):
		case !seen:
			out = append(out, Violation{
				Message: fmt.Sprintf("session s%d ended at index %d, but its %s did not end there: no end of it up to index %d", g.session, end, g, f.w.Until),
				Ops:     g.evidence(),
			})
		case e.index == end:
		case e.index < end && (e.how == wire.EventReleased || e.how == wire.EventVoided):
			// Released on its own (the session goes on), or voided by a
			// restore, before the session ended.
		case e.index < end:
			out = append(out, Violation{
				Message: fmt.Sprintf("session s%d's %s ended %s at index %d, before the session ended at index %d: a grant under a session has no lease of its own",
					g.session, g, e.how, e.index, end),
				Ops: g.evidence(),
			})
		default:
			out = append(out, Violation{
				Message: fmt.Sprintf("session s%d ended at index %d, but its %s ended at index %d", g.session, end, g, e.index),
				Ops:     g.evidence(),
			})
		}
	}
	return out
}

// closesReleaseAll finds closes that answered ok without every grant the
// closing client held under the session: one it was granted before it
// sent the close and had not tried to release on its own. A restore in
// between may have voided some: such closes are not judged.
func closesReleaseAll(h history.History) []Violation {
	var out []Violation
	for _, c := range h.Ops {
		if c.Kind != history.SessionClose || c.Outcome != history.OK ||
			slices.ContainsFunc(h.Events, func(e history.Event) bool { return e.Kind == history.EventRestore && e.Time < c.Return }) {
			continue
		}
		var missing []history.Op
		for _, g := range h.Ops {
			granted := g.Session == c.Session && g.Outcome == history.OK && (g.Kind == history.Acquire || g.Kind == history.SemAcquire) && g.Return < c.Call
			if !granted || slices.Contains(c.Released, g.Token) {
				continue
			}
			released := slices.ContainsFunc(h.Ops, func(r history.Op) bool {
				return (r.Kind == history.Release || r.Kind == history.SemRelease) && r.Token == g.Token && r.Call < c.Return
			})
			if !released {
				missing = append(missing, g)
			}
		}
		if len(missing) > 0 {
			var held []string
			for _, g := range missing {
				held = append(held, fmt.Sprintf("t%d (%s)", g.Token, g.Target))
			}
			out = append(out, Violation{
				Message: fmt.Sprintf("session s%d's close answered ok releasing %v, without %s, which its client held under it",
					c.Session, c.Released, strings.Join(held, ", ")),
				Ops: append(missing, c),
			})
		}
	}
	return out
}

// SessionWrites finds lock-bound writes accepted with a session's token
// after the session ended.
func SessionWrites(h history.History) []Violation {
	f := readSessions(h)
	var out []Violation
	if h.Watch != nil {
		type write struct {
			key   string
			token uint64
		}
		sentAs := map[write][]history.Op{} // the puts sent of each key with each token
		for _, op := range h.Ops {
			if op.Kind == history.Put {
				k := write{op.Target, op.Token}
				sentAs[k] = append(sentAs[k], op)
			}
		}
		for _, p := range f.puts {
			g, ok := f.grants[p.Token]
			if !ok {
				continue
			}
			end, ended := f.end(g.session)
			sent := sentAs[write{p.Key, p.Token}]
			// Only a write every client sent bound to the lock is the
			// cluster's to refuse: an unbound one is fenced by its token
			// alone.
			if !ended || p.Index <= end || len(sent) == 0 || slices.ContainsFunc(sent, func(op history.Op) bool { return op.Lock == "" }) {
				continue
			}
			out = append(out, Violation{
				Message: fmt.Sprintf("lock-bound write of %s with t%d, session s%d's %s, accepted at index %d, after the session ended at index %d",
					p.Key, p.Token, g.session, g, p.Index, end),
				Ops: append(g.evidence(), sent...),
			})
		}
	}
	for _, op := range h.Ops {
		if op.Kind != history.Put || op.Outcome != history.OK || op.Lock == "" {
			continue
		}
		g, ok := f.grants[op.Token]
		if !ok {
			continue
		}
		if k, known := f.known[g.session]; known && op.Call > k.Return {
			out = append(out, Violation{
				Message: fmt.Sprintf("lock-bound write of %s with t%d, session s%d's %s, acknowledged although sent at %d, after a client was told at %d that the session had ended",
					op.Target, op.Token, g.session, g, op.Call, k.Return),
				Ops: append(g.evidence(), k, op),
			})
		}
	}
	return out
}

// SessionSurvivors finds grants that outlived their session.
func SessionSurvivors(h history.History) []Violation {
	f := readSessions(h)
	var out []Violation
	if h.Watch != nil {
		for _, g := range f.sortedGrants() {
			end, ended := f.end(g.session)
			granted := tokenIndex(g.token)
			if !ended {
				continue
			}
			if granted > end {
				out = append(out, Violation{
					Message: fmt.Sprintf("session s%d ended at index %d, and its %s was granted after that", g.session, end, g),
					Ops:     g.evidence(),
				})
				continue
			}
			e, seen := f.grantEnds[g.token]
			switch {
			case seen && e.index <= end:
			case seen:
				out = append(out, Violation{
					Message: fmt.Sprintf("session s%d ended at index %d, but its %s held on until index %d", g.session, end, g, e.index),
					Ops:     g.evidence(),
				})
			case !f.unseen(granted, f.w.Until):
				out = append(out, Violation{
					Message: fmt.Sprintf("session s%d ended at index %d, but its %s was still held at index %d, the end of the watch", g.session, end, g, f.w.Until),
					Ops:     g.evidence(),
				})
			}
		}
	}
	for _, op := range h.Ops {
		current := op.Kind == history.Read && op.Outcome == history.OK && op.Held ||
			op.Kind == history.Acquire && op.Outcome == history.LockHeld ||
			(op.Kind == history.Renew || op.Kind == history.SemRenew) && op.Outcome == history.OK
		if !current {
			continue
		}
		g, ok := f.grants[op.Token]
		if !ok {
			continue
		}
		if k, known := f.known[g.session]; known && op.Call > k.Return {
			out = append(out, Violation{
				Message: fmt.Sprintf("%s reported current at %d, after a client was told at %d that session s%d had ended", g, op.Call, k.Return, g.session),
				Ops:     append(g.evidence(), k, op),
			})
		}
	}
	return out
}

func sortedIDs[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// sessionSpans returns, per session permit's token, the time its session
// certainly lasted from: the latest call of its creation or of a renewal
// that answered ok (the server starts or restarts the session's lease no
// earlier than that), plus its TTL; and the first call of its close,
// whatever the answer. A permit whose session's creation was not recorded
// gets no end: math.MinInt64.
func sessionSpans(h history.History) map[uint64]int64 {
	type facts struct {
		ttl, from, closed int64
	}
	sessions := map[uint64]*facts{}
	for _, op := range h.Ops {
		if op.Kind == history.SessionCreate && op.Outcome == history.OK {
			sessions[op.Session] = &facts{ttl: op.TTL, from: op.Call, closed: math.MaxInt64}
		}
	}
	for _, op := range h.Ops {
		s := sessions[op.Session]
		switch {
		case s == nil:
		case op.Kind == history.SessionRenew && op.Outcome == history.OK:
			s.from = max(s.from, op.Call)
		case op.Kind == history.SessionClose:
			s.closed = min(s.closed, op.Call)
		}
	}
	out := map[uint64]int64{}
	for _, op := range h.Ops {
		if op.Kind != history.SemAcquire || op.Outcome != history.OK || op.Session == 0 {
			continue
		}
		s := sessions[op.Session]
		if s == nil {
			out[op.Token] = math.MinInt64
			continue
		}
		out[op.Token] = min(s.from+s.ttl*1e6, s.closed)
	}
	return out
}
