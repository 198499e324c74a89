// Package sessions is the state's table of sessions: each live session's
// record and the grants held under it, and the ids of the sessions that
// ended lately, so that an acquire under one is answered "expired" rather
// than "unknown" (bounded, forgotten oldest first, in log order).
package sessions

import (
	"cmp"
	"slices"

	"github.com/fencer-io/fencer/fsm/entry"
)

// MaxEnded bounds the ended sessions remembered.
const MaxEnded = 1 << 16

// Kind is what a grant under a session is.
type Kind uint8

const (
	Lock   Kind = iota + 1 // a lock's grant (an election's too)
	Permit                 // a semaphore's permit
)

// Grant is one grant under a session.
type Grant struct {
	Kind  Kind
	Name  string // the lock's or the semaphore's
	Token uint64
}

// Session is a live session and its grants.
type Session struct {
	rec    entry.Session
	grants map[uint64]Grant // by token
}

// Record returns the session's record.
func (s *Session) Record() entry.Session { return s.rec }

// Len counts the grants under the session.
func (s *Session) Len() int { return len(s.grants) }

// Grants returns the grants under the session, sorted by token: the order
// its end frees them in.
func (s *Session) Grants() []Grant {
	out := make([]Grant, 0, len(s.grants))
	for _, g := range s.grants {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b Grant) int { return cmp.Compare(a.Token, b.Token) })
	return out
}

// Table is the sessions, live and lately ended.
type Table struct {
	live  map[uint64]*Session
	ended map[uint64]bool
	// endedOrder is ended in log order, oldest first; cut at the front.
	endedOrder []uint64
	grants     int
}

// New returns an empty table.
func New() *Table { return &Table{live: map[uint64]*Session{}, ended: map[uint64]bool{}} }

// Open adds a live session.
func (t *Table) Open(rec entry.Session) *Session {
	s := &Session{rec: rec, grants: map[uint64]Grant{}}
	t.live[rec.ID] = s
	return s
}

// Get returns the live session id, or nil.
func (t *Table) Get(id uint64) *Session { return t.live[id] }

// Ended reports whether id is a session that ended lately.
func (t *Table) Ended(id uint64) bool { return t.ended[id] }

// Len counts the live sessions.
func (t *Table) Len() int { return len(t.live) }

// Grants counts the grants held under live sessions.
func (t *Table) Grants() int { return t.grants }

// Attach records a grant under live session id (a no-op for another).
func (t *Table) Attach(id uint64, g Grant) {
	if s := t.live[id]; s != nil {
		if _, dup := s.grants[g.Token]; !dup {
			t.grants++
		}
		s.grants[g.Token] = g
	}
}

// Detach forgets a grant that ended under session id.
func (t *Table) Detach(id, token uint64) {
	if s := t.live[id]; s != nil {
		if _, ok := s.grants[token]; ok {
			delete(s.grants, token)
			t.grants--
		}
	}
}

// End removes a live session (its grants are the caller's to end first)
// and remembers that it ended.
func (t *Table) End(id uint64) {
	s := t.live[id]
	if s == nil {
		return
	}
	t.grants -= len(s.grants)
	delete(t.live, id)
	t.remember(id)
}

func (t *Table) remember(id uint64) {
	if t.ended[id] {
		return
	}
	t.ended[id] = true
	t.endedOrder = append(t.endedOrder, id)
	if len(t.endedOrder) > MaxEnded {
		delete(t.ended, t.endedOrder[0])
		t.endedOrder = t.endedOrder[1:]
	}
}

// Records returns the live sessions' records, sorted by id.
func (t *Table) Records() []entry.Session {
	out := make([]entry.Session, 0, len(t.live))
	for _, s := range t.live {
		out = append(out, s.rec)
	}
	slices.SortFunc(out, func(a, b entry.Session) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// EndedIDs returns the ended sessions remembered, oldest first.
func (t *Table) EndedIDs() []uint64 { return slices.Clone(t.endedOrder) }

// RestoreEnded remembers ids, oldest first, as ended (a snapshot's).
func (t *Table) RestoreEnded(ids []uint64) {
	for _, id := range ids {
		t.remember(id)
	}
}
