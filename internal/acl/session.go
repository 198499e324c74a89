package acl

import (
	"context"
	"sync"
)

// A request that outlives an ACL reload (an event stream, a parked blocking
// read) is authorised again by what the file says now, not by what it said
// when the request came in: a token removed from the file ends its streams
// and parked reads, and a token whose prefixes narrowed stops seeing what
// is outside them. The Store closes a channel at each reload; the request's
// Session, which Middleware puts in its context, says who its token is now.

// reloads is the Store's reload signal: changed is closed, and replaced,
// at each reload that swapped in a new ACL.
type reloads struct {
	mu      sync.Mutex
	changed chan struct{}
}

func (r *reloads) signal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed != nil {
		close(r.changed)
	}
	r.changed = make(chan struct{})
}

func (r *reloads) next() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}

// Session is an authenticated request's standing with the ACL in force.
type Session struct {
	store  *Store
	p      *Principal
	bearer string // the request's bearer token; "" for a member
}

type sessionKey struct{}

// SessionFrom returns the request's Session: nil when no ACL authenticated
// it (and a nil Session's methods say so).
func SessionFrom(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}

// Changed returns a channel closed at the ACL's next reload; nil (never
// closed) without an ACL. Take it before Principal, so that no reload falls
// between them unseen.
func (s *Session) Changed() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.store.reloads.next()
}

// Principal returns the request's principal as the ACL in force has it:
// ErrUnknownToken once its token was removed from the file (or its secret
// changed). A member's principal does not come from the file and stays.
// Without an ACL it is nil, nil.
func (s *Session) Principal() (*Principal, error) {
	if s == nil {
		return nil, nil
	}
	if s.bearer == "" {
		return s.p, nil
	}
	if p := s.store.ACL().lookup(s.bearer); p != nil {
		return p, nil
	}
	return nil, ErrUnknownToken
}
