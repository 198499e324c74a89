package coord

import (
	"context"
	"fmt"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// A revoke is an operator ending a grant, or a session and every grant
// under it, now (fsm/revoke.go). On the leader it is an expiry that no
// timer fired: the engine frees the name under its queue, offering it to
// the head waiter in the revoking entry unless the grant's lock-delay
// starts there, and a session's revoke is its end, holding every name it
// frees (sessions.go). The FSM remembers what was revoked, so the holder's
// next renew (and release) is refused as revoked, not as lost.

// Revoke ends the lock's grant with token at an operator's word.
func (s *Service) Revoke(ctx context.Context, name string, token uint64) (fsm.ReleaseResult, error) {
	res, err := revokeGrant(ctx, s, s.locks, name, token)
	if err != nil {
		return fsm.ReleaseResult{}, err
	}
	return *res.Lock, nil
}

// RevokePermit ends the semaphore's permit with token at an operator's
// word.
func (s *Service) RevokePermit(ctx context.Context, name string, token uint64) (fsm.SemReleaseResult, error) {
	res, err := revokeGrant(ctx, s, s.sems, name, token)
	if err != nil {
		return fsm.SemReleaseResult{}, err
	}
	return *res.Permit, nil
}

// revokeGrant is Revoke and RevokePermit: the format gate, then the
// engine's revoke.
func revokeGrant[C entry.Command, R any](ctx context.Context, s *Service, e *engine[C, R], name string, token uint64) (*fsm.RevokeResult, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return nil, err
	}
	if err := s.revokeReadable(); err != nil {
		return nil, err
	}
	return e.revoke(name, token)
}

// RevokeSession ends a session and every grant under it at an operator's
// word, in one entry, as its expiry would; it returns the session's
// record and the grants it ended.
func (s *Service) RevokeSession(ctx context.Context, id uint64) (entry.Session, []fsm.SessionGrant, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return entry.Session{}, nil, err
	}
	if err := s.revokeReadable(); err != nil {
		return entry.Session{}, nil, err
	}
	r, err := s.endSession(id, "", sessionRevoked)
	if err != nil {
		return entry.Session{}, nil, err
	}
	s.log.Info("session revoked", "session", id, "holder", r.Session.Holder)
	return r.Session, endedGrants(r), nil
}

// revokeReadable refuses revokes while a member reads no revoke entries
// (a rolling upgrade), after a quorum round, as sessionsReadable.
func (s *Service) revokeReadable() error {
	if f := s.raft.EntryFormat(); f < entry.LogFormatLockModes {
		return s.refuse(fmt.Errorf("%w: revoke needs log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatLockModes, f))
	}
	return nil
}

// revoke proposes the revoke of the grant with token under the name's
// queue, offering the name to the head waiter in that entry unless the
// grant's lock-delay starts there (as expire). A grant not held is
// refused after a quorum round: revoked already, or ended.
func (e *engine[C, R]) revoke(name string, token uint64) (*fsm.RevokeResult, error) {
	h := e.hold(name)
	defer h.Release()
	g, held := e.state(name, "", "", "").Grant(token)
	if !held {
		if e.s.fsm.Revoked(token) {
			return nil, e.s.refuse(e.revokedError(name, token))
		}
		return nil, e.s.refuse(fmt.Errorf("%w: %s %q has no live grant with token %d", refusal.ErrLeaseLost, e.what, name, token))
	}
	if g.Multi {
		// The FSM would end this name alone, leaving the multi-grant's
		// others held on its one lease, and a snapshot whose multi-grant
		// lacks a name is refused on restore.
		return nil, e.s.refuse(fmt.Errorf("%w: %s %q's grant with token %d is one name of a multi-lock: revoking one name would leave the others held, and a multi-lock's revoke is not built yet",
			refusal.ErrMultiGrant, e.what, name, token))
	}
	h.Frees(token)
	next := h.Pop(g.LockDelayMillis == 0)
	res, err := e.s.raft.Apply(e.p.revoke(name, token, next))
	if err != nil {
		h.Failed()
		return nil, err
	}
	r := res.(*fsm.RevokeResult)
	if r.Lock != nil {
		h.Done(r.Lock, token)
	} else {
		h.Done(r.Permit, token)
	}
	e.s.log.Info("grant revoked", e.what, name, "token", token, "holder", g.Holder)
	return r, nil
}

// revokedError refuses a renewal or a release of a revoked grant.
func (e *engine[C, R]) revokedError(name string, token uint64) error {
	return fmt.Errorf("%w: %s %q's grant with token %d was revoked by an operator", refusal.ErrRevoked, e.what, name, token)
}

func (lockPolicy) revoke(name string, token uint64, next *entry.Acquire) entry.Command {
	return &entry.Revoke{Lock: name, Token: token, Next: next}
}

func (semPolicy) revoke(name string, token uint64, next *entry.SemAcquire) entry.Command {
	return &entry.Revoke{Semaphore: name, Token: token, NextPermit: next}
}

// sessionEnding is how a session ends: closed by its holder, expired on
// the leader's clock, or revoked by an operator.
type sessionEnding int

const (
	sessionClosed sessionEnding = iota
	sessionExpired
	sessionRevoked
)

// endCommand is the entry that ends session id so, carrying the one
// hand-off offerOne chose.
func (how sessionEnding) endCommand(id uint64, secret string, next *entry.Acquire, nextPermit *entry.SemAcquire) entry.Command {
	if how == sessionRevoked {
		return &entry.Revoke{Session: id, Next: next, NextPermit: nextPermit}
	}
	cmd := &entry.SessionEnd{Session: id, Lease: secret, Expired: how == sessionExpired}
	if next != nil {
		cmd.Next = []*entry.Acquire{next}
	}
	if nextPermit != nil {
		cmd.NextPermits = []*entry.SemAcquire{nextPermit}
	}
	return cmd
}

// sessionEndResult reads the result of a session's end or revoke.
func sessionEndResult(res any) *fsm.SessionEndResult {
	if r, ok := res.(*fsm.RevokeResult); ok {
		return r.Session
	}
	return res.(*fsm.SessionEndResult)
}

// sessionRevokedError refuses a renewal of a revoked session.
func sessionRevokedError(id uint64) error {
	return fmt.Errorf("%w: session %d was revoked by an operator, and every grant under it", refusal.ErrRevoked, id)
}
