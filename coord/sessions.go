package coord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
)

// A session is one lease for many grants (fsm/session.go). The leader
// times it as it times a grant's lease (timed.SessionKey), and the grants
// under it are not timed at all: they live as long as the session. Its
// renewal is a quorum round and a new deadline, as a grant's; its end, by
// close or by expiry, is one entry that ends every grant under it, proposed
// with every one of their names' queues held (sorted by kind, then name,
// so that two ends never wait on each other), so that each freed name is
// served before any other acquire can reach it: the first, by token, in
// that entry itself, the others in the entries right after (one entry
// mints one token). A new leader restarts every session at its full TTL,
// as it does grants' leases.

// SessionRequest asks for a session.
type SessionRequest struct {
	Holder string
	TTL    time.Duration
	// LockDelay is the lock-delay of every grant under the session that
	// asks for none, started when the session expires.
	LockDelay time.Duration
	RequestID string
	Principal string
}

// SessionStatus is a live session as reported to clients (never its
// secret): its grants, and the leader's view of its time left (Known is
// false on a stale read from a follower).
type SessionStatus struct {
	fsm.SessionState
	Remaining time.Duration
	Known     bool
}

// CreateSession opens a session; a retry with the request id of an earlier
// one gets that one back (Existing).
func (s *Service) CreateSession(ctx context.Context, req SessionRequest) (fsm.SessionResult, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return fsm.SessionResult{}, err
	}
	if err := s.sessionsReadable(); err != nil {
		return fsm.SessionResult{}, err
	}
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	retry := s.fsm.SessionRequestGranted(req.Holder, req.RequestID, req.Principal)
	if n := s.fsm.SessionCount(); !retry && n >= s.cfg.MaxSessions {
		return fsm.SessionResult{}, s.refuse(fmt.Errorf("%w: %d sessions open (limit %d)", ErrTooManyLocks, n, s.cfg.MaxSessions))
	}
	res, err := s.raft.Apply(&entry.SessionCreate{
		Holder: req.Holder, Lease: newSecret(req.Holder), TTLMillis: req.TTL.Milliseconds(),
		LockDelayMillis: req.LockDelay.Milliseconds(), RequestID: req.RequestID, NowMillis: s.nowMillis(), Principal: req.Principal,
	})
	if err != nil {
		return fsm.SessionResult{}, err
	}
	r := res.(*fsm.SessionResult)
	// A retry tracks it too, in case the first answer was lost before the
	// leader did (as an acquire's), but never revives a session whose
	// expiry is under way: it is answered as ended, which it is about to be.
	if !s.timers.Restart(timed.SessionKey(r.Session.ID), r.Session.ID, millis(r.Session.TTLMillis)) {
		return fsm.SessionResult{}, fmt.Errorf("%w: session %d's TTL ran out on the leader; its end is being written", refusal.ErrSessionExpired, r.Session.ID)
	}
	return *r, nil
}

// sessionsReadable refuses sessions while a member reads no sessions'
// entries (a rolling upgrade), after a quorum round.
func (s *Service) sessionsReadable() error {
	if f := s.raft.EntryFormat(); f < entry.LogFormatSession {
		return s.refuse(fmt.Errorf("%w: sessions need log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatSession, f))
	}
	return nil
}

// checkUnderSession refuses, after a quorum round, an acquire under a
// session that is not live or whose secret is not the session's, before it
// could queue; the FSM decides again when it applies the acquire.
func (s *Service) checkUnderSession(id uint64, secret string) error {
	if id == 0 {
		return nil
	}
	if err := s.sessionsReadable(); err != nil {
		return err
	}
	rec, ok := s.fsm.SessionRecord(id)
	switch {
	case !ok:
		return s.refuse(s.sessionGone(id))
	case !secrets.Equal(rec.Lease, secret):
		return s.refuse(fmt.Errorf("%w: that is not session %d's lease", refusal.ErrSessionMismatch, id))
	}
	return nil
}

// sessionGone is why session id, not live, cannot be used.
func (s *Service) sessionGone(id uint64) error {
	if s.fsm.Revoked(id) {
		return sessionRevokedError(id)
	}
	if s.fsm.SessionEnded(id) {
		return fmt.Errorf("%w: session %d has ended, and every grant under it", refusal.ErrSessionExpired, id)
	}
	return fmt.Errorf("%w: no session has id %d", refusal.ErrUnknownSession, id)
}

// RenewSession confirms leadership with a quorum round and extends the
// session's deadline on the leader, and with it every grant's under it. It
// writes nothing to the log.
func (s *Service) RenewSession(ctx context.Context, id uint64, secret string) (entry.Session, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return entry.Session{}, err
	}
	if err := s.raft.VerifyLeader(); err != nil {
		return entry.Session{}, err
	}
	// The record alone: a renewal must not copy the session's grants.
	rec, ok := s.fsm.SessionRecord(id)
	switch {
	case !ok:
		return entry.Session{}, s.sessionGone(id)
	case !secrets.Equal(rec.Lease, secret):
		return entry.Session{}, fmt.Errorf("%w: that is not session %d's lease", refusal.ErrSessionMismatch, id)
	case !s.timers.Renew(timed.SessionKey(id), id):
		return entry.Session{}, fmt.Errorf("%w: session %d's TTL ran out on the leader; its end is being written", refusal.ErrSessionExpired, id)
	}
	s.metrics.Renewals.Inc()
	return rec, nil
}

// CloseSession ends a session and releases every grant under it, in one
// entry; it returns the grants it ended.
func (s *Service) CloseSession(ctx context.Context, id uint64, secret string) ([]fsm.SessionGrant, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return nil, err
	}
	r, err := s.endSession(id, secret, sessionClosed)
	if err != nil {
		return nil, err
	}
	s.metrics.Releases.Inc()
	return endedGrants(r), nil
}

// expireSession is called by the timers when a session's deadline passes.
func (s *Service) expireSession(id uint64) {
	if s.awaitLeader(context.Background()) != nil {
		return
	}
	_, err := s.endSession(id, "", sessionExpired)
	if s.expired(err, timed.SessionKey(id), id, "session", fmt.Sprint(id)) {
		s.log.Debug("session expired", "session", id)
	}
}

// endedAlready reads the failure of a session's expiry: a session found
// ended already is, as a grant found ended, refusal.ErrLeaseLost (nothing
// to retry).
func endedAlready(err error) error {
	if errors.Is(err, refusal.ErrSessionExpired) || errors.Is(err, refusal.ErrUnknownSession) {
		return fmt.Errorf("%w: %v", refusal.ErrLeaseLost, err)
	}
	return err
}

// sessionRead is called by endSession between its read of the session's
// grants and its hold of their names: a test's seam, to release a grant in
// between.
var sessionRead = func() {}

// endSession proposes the end of session id (how: closed, expired or
// revoked) with every name it holds held: the first freed name with a
// waiter is handed over in the entry, the rest are served right after,
// before any name is let go.
func (s *Service) endSession(id uint64, secret string, how sessionEnding) (*fsm.SessionEndResult, error) {
	expired := how == sessionExpired
	st, ok := s.fsm.Session(id)
	if !ok {
		if expired {
			return nil, endedAlready(s.sessionGone(id))
		}
		return nil, s.refuse(s.sessionGone(id))
	}
	sessionRead()
	names := make([]GrantName, 0, len(st.Grants))
	for _, g := range st.Grants {
		names = append(names, sessionGrantName(g))
	}
	names, holds := s.holdNames(names) // by kind, then name: never a deadlock
	held := make(map[GrantName]Freeing, len(names))
	for i, n := range names {
		held[n] = holds[i]
	}
	released := false
	release := func() {
		if !released {
			released = true
			for _, h := range slices.Backward(holds) {
				h.Release()
			}
		}
	}
	defer release()

	if expired && !s.timers.Due(timed.SessionKey(id), id) {
		// Restarted at full TTL by a new leader since its timer fired.
		return nil, errRestarted
	}
	for _, g := range st.Grants {
		held[sessionGrantName(g)].Frees(g.Token)
	}
	next, nextPermit := s.offerOne(how != sessionClosed, st, held)
	res, err := s.raft.Apply(how.endCommand(id, secret, next, nextPermit))
	if err != nil {
		for _, h := range holds {
			h.Failed()
		}
		if expired {
			return nil, endedAlready(err)
		}
		return nil, err
	}
	s.timers.Forget(timed.SessionKey(id), id)
	r := sessionEndResult(res)
	var extra []GrantName
	freed := map[GrantName]bool{}
	done := func(n GrantName, res any, token uint64) {
		if h := held[n]; h != nil {
			h.Done(res, token)
			freed[n] = true
		} else {
			extra = append(extra, n)
		}
	}
	// A lock whose shared grants the session held is handed over with the
	// last of them (fsm): its result is done first, so that the waiter
	// popped for the name gets what the entry handed it.
	locks := slices.Clone(r.Locks)
	slices.SortStableFunc(locks, func(a, b *fsm.ReleaseResult) int {
		return cmp.Compare(handedOver(b), handedOver(a))
	})
	for _, lr := range locks {
		done(GrantName{fsm.KindLock, lr.Freed.Name}, lr, lr.Freed.Token)
	}
	for _, pr := range r.Permits {
		done(GrantName{fsm.KindSemaphore, pr.Freed.Semaphore}, pr, pr.Freed.Token)
	}
	// A name whose grant ended before the entry (released meanwhile) was
	// not freed by it: a waiter popped for it was handed nothing and goes
	// back to the head of its queue (a popped waiter is owed an answer,
	// and would otherwise wait for it for good).
	for n, h := range held {
		if !freed[n] {
			h.Unfreed()
		}
	}
	release()
	// A grant the session got after its names were read (an acquire that
	// applied in between) was ended too: serve its name's waiters now.
	for _, n := range extra {
		_, hs := s.holdNames([]GrantName{n})
		hs[0].Unfreed()
		hs[0].Release()
	}
	return r, nil
}

// handedOver is 1 for a freed lock's result that says what its hand-off
// got, 0 otherwise.
func handedOver(r *fsm.ReleaseResult) int {
	if r.Next != nil || r.NextErr != nil {
		return 1
	}
	return 0
}

// sessionGrantName is the name of a session's grant, with its kind.
func sessionGrantName(g fsm.SessionGrant) GrantName {
	if g.Semaphore {
		return GrantName{fsm.KindSemaphore, g.Name}
	}
	return GrantName{fsm.KindLock, g.Name}
}

// offerOne returns the acquire of the head waiter of the first of the
// session's grants, by token, whose name its end frees for a waiter (an
// expiry or a revoke, delaying, with a lock-delay frees it for nobody):
// one entry mints one token.
func (s *Service) offerOne(delaying bool, st fsm.SessionState, held map[GrantName]Freeing) (*entry.Acquire, *entry.SemAcquire) {
	for _, g := range st.Grants {
		n := sessionGrantName(g)
		if delaying && s.delayedOnExpiry(n, g.Token) {
			continue
		}
		switch next := held[n].Next(true).(type) {
		case *entry.Acquire:
			return next, nil
		case *entry.SemAcquire:
			return nil, next
		}
	}
	return nil, nil
}

// delayedOnExpiry reports whether the grant token of n starts a lock-delay
// when it expires.
func (s *Service) delayedOnExpiry(n GrantName, token uint64) bool {
	g, ok := s.fsm.NameState(n.Kind, n.Name, "", "", "").Grant(token)
	return ok && g.LockDelayMillis > 0
}

// endedGrants lists the grants an end ended, in the order it ended them.
func endedGrants(r *fsm.SessionEndResult) []fsm.SessionGrant {
	var out []fsm.SessionGrant
	for _, l := range r.Locks {
		out = append(out, fsm.SessionGrant{Name: l.Freed.Name, Token: l.Freed.Token})
	}
	for _, p := range r.Permits {
		out = append(out, fsm.SessionGrant{Semaphore: true, Name: p.Freed.Semaphore, Token: p.Freed.Token})
	}
	slices.SortFunc(out, func(a, b fsm.SessionGrant) int {
		switch {
		case a.Token < b.Token:
			return -1
		case a.Token > b.Token:
			return 1
		}
		return 0
	})
	return out
}

// Session returns a live session and its grants; linearizable unless stale.
func (s *Service) Session(ctx context.Context, id uint64, stale bool) (SessionStatus, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return SessionStatus{}, err
		}
	}
	st, ok := s.fsm.Session(id)
	if !ok {
		return SessionStatus{}, s.sessionGone(id)
	}
	return s.sessionStatus(st), nil
}

// Sessions returns every live session; linearizable unless stale.
func (s *Service) Sessions(ctx context.Context, stale bool) ([]SessionStatus, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return nil, err
		}
	}
	var out []SessionStatus
	for _, st := range s.fsm.Sessions() {
		out = append(out, s.sessionStatus(st))
	}
	return out, nil
}

// remaining is the leader's view of a grant's time left: its own lease's
// (key, token), or its session's when it lives under one.
func (s *Service) remaining(key lease.Key, token, session uint64) (time.Duration, bool) {
	if session != 0 {
		return s.timers.Remaining(timed.SessionKey(session), session)
	}
	return s.timers.Remaining(key, token)
}

func (s *Service) sessionStatus(st fsm.SessionState) SessionStatus {
	out := SessionStatus{SessionState: st}
	out.Remaining, out.Known = s.timers.Remaining(timed.SessionKey(st.ID), st.ID)
	return out
}
