package coord

import (
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

// A multi-lock is one grant over several lock names (DESIGN.md,
// "Multi-locks"): one entry grants every name or none, with one token and
// one secret, and each name is then held like any lock. It is built on
// the lock engine's queues: its acquire, release and expiry hold every
// name's queue through holdNames (by name, so that they never wait on a
// session's end or on each other), and its release serves each freed
// name's waiters in the entries right after, still holding the queues. Its
// one lease is timed under timed.MultiKey and renewed once for all names.

// MultiAcquireRequest asks for several locks at once.
type MultiAcquireRequest struct {
	Names  []string
	Holder string
	TTL    time.Duration
	// Mode is entry.ModeShared for every name in shared mode ("" or
	// entry.ModeExclusive: exclusive); it needs LogFormatMultiModes.
	Mode string
	// Wait, when set, queues the request in every name's FIFO for up to
	// that long while a name is held (multiwait.go).
	Wait      time.Duration
	RequestID string // makes retries idempotent; generated when empty
	Principal string
}

// lockNames are names as lock names of the engine's.
func lockNames(names []string) []GrantName {
	out := make([]GrantName, len(names))
	for i, n := range names {
		out[i] = GrantName{Kind: fsm.KindLock, Name: n}
	}
	return out
}

// holdLocks holds the queues of the lock names, in holdNames's order, and
// returns the function that lets them go (serving the waiters of those
// that an applied entry freed).
func (s *Service) holdLocks(names []string) ([]Freeing, func()) {
	_, holds := s.holdNames(lockNames(names))
	return holds, func() {
		for _, h := range slices.Backward(holds) {
			h.Release()
		}
	}
}

// multiReadable refuses multi-locks while a member reads no entries of
// LogFormatLockModes, and shared ones below LogFormatMultiModes (a
// rolling upgrade), after a quorum round.
func (s *Service) multiReadable(c *entry.MultiAcquire) error {
	need, what := entry.LogFormatLockModes, "multi-locks"
	if c.Mode != "" {
		need, what = entry.LogFormatMultiModes, "multi-locks in shared mode"
	}
	if f := s.raft.EntryFormat(); f < need {
		return s.refuse(fmt.Errorf("%w: %s need log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, what, need, f))
	}
	return nil
}

// MultiAcquire grants every name of req, or none, in one entry. Without a
// wait, the first name (in req's order) that is held, in its lock-delay or
// kept for a multi-acquire queued before refuses all, after a quorum
// round; with one, the request queues in every name's FIFO (multiwait.go)
// and is granted, in one entry, once it heads each and all are free. A
// retry with the request id of a live grant gets it back (Existing).
func (s *Service) MultiAcquire(ctx context.Context, req MultiAcquireRequest) (fsm.MultiResult, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return fsm.MultiResult{}, err
	}
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	c := &entry.MultiAcquire{
		Names: req.Names, Holder: req.Holder, Lease: newSecret(req.Names[0]), TTLMillis: req.TTL.Milliseconds(),
		RequestID: req.RequestID, Principal: req.Principal,
	}
	if req.Mode == entry.ModeShared {
		c.Mode = entry.ModeShared
	}
	if err := s.multiReadable(c); err != nil {
		return fsm.MultiResult{}, err
	}
	// Under every name's queue the leader's view of them is exact: a
	// proposal that frees a name serves its waiters (or keeps it for a
	// multi-waiter at their head) before letting the queue go.
	holds, release := s.holdMulti(req.Names)
	why := s.multiRefusal(holds, c)
	// A waiting request queues behind the waiters of a free name too (left
	// there by a leader that did not know an entry freed it, as a single
	// waiting acquire does), and they are served first as it lets go.
	ahead := req.Wait > 0 && slices.ContainsFunc(holds, func(h lockHold) bool { return h.q.Len() > 0 })
	switch {
	case why == nil && !ahead:
		defer release()
		return s.grantMulti(c)
	case why != nil && (req.Wait == 0 || errors.Is(why, ErrTooManyLocks)):
		defer release()
		return fsm.MultiResult{}, s.refuse(why)
	}
	m, err := s.queueMulti(holds, c)
	for _, h := range holds {
		h.applied = err == nil // serve what may be served ahead of it
	}
	release()
	if err != nil {
		return fsm.MultiResult{}, err
	}
	return s.waitMulti(ctx, m, req.Wait)
}

// RenewMulti confirms leadership with a quorum round and extends the
// multi-grant's one lease on the leader; it writes nothing to the log.
func (s *Service) RenewMulti(ctx context.Context, token uint64, secret string) (fsm.MultiGrant, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return fsm.MultiGrant{}, err
	}
	if err := s.raft.VerifyLeader(); err != nil {
		return fsm.MultiGrant{}, err
	}
	g, ok := s.fsm.MultiGrant(token)
	switch {
	case !ok:
		return fsm.MultiGrant{}, fmt.Errorf("%w: multi-grant %d is not held", refusal.ErrLeaseLost, token)
	case !secrets.Equal(g.Lease, secret):
		return fsm.MultiGrant{}, fmt.Errorf("%w: that is not multi-grant %d's lease", refusal.ErrLeaseLost, token)
	case !s.timers.Renew(timed.MultiKey(token), token):
		return fsm.MultiGrant{}, fmt.Errorf("%w: multi-grant %d: its lease expired", refusal.ErrLeaseLost, token)
	}
	s.metrics.Renewals.Inc()
	return g, nil
}

// ReleaseMulti ends every name of the multi-grant in one entry, then
// serves each freed name's waiters.
func (s *Service) ReleaseMulti(ctx context.Context, token uint64, secret string) (fsm.MultiGrant, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return fsm.MultiGrant{}, err
	}
	g, ok := s.fsm.MultiGrant(token)
	if !ok {
		return fsm.MultiGrant{}, s.refuse(fmt.Errorf("%w: multi-grant %d is not held", refusal.ErrLeaseLost, token))
	}
	if err := s.endMulti(g, secret, false); err != nil {
		return fsm.MultiGrant{}, err
	}
	s.metrics.Releases.Inc()
	return g, nil
}

// expireMulti is called by the timers when a multi-grant's deadline passes.
func (s *Service) expireMulti(token uint64) {
	if s.awaitLeader(context.Background()) != nil {
		return
	}
	key := timed.MultiKey(token)
	g, ok := s.fsm.MultiGrant(token)
	if !ok {
		s.timers.Forget(key, token) // released meanwhile
		return
	}
	if s.expired(s.endMulti(g, "", true), key, token, "multi-lock", fmt.Sprint(token)) {
		s.log.Debug("multi-lock expired", "token", token, "names", g.Names)
	}
}

// endMulti proposes the end of g (its release with secret, or its expiry)
// holding every name's queue. The entry hands no name over (one entry
// mints one token): each name's waiters are served, in the entries right
// after, as its queue is let go, the later names' queues still held.
func (s *Service) endMulti(g fsm.MultiGrant, secret string, expired bool) error {
	holds, release := s.holdLocks(g.Names)
	defer release()
	key := timed.MultiKey(g.Token)
	if expired && !s.timers.Due(key, g.Token) {
		return errRestarted // restarted at full TTL by a new leader since it fired
	}
	if _, err := s.raft.Apply(&entry.MultiRelease{Token: g.Token, Lease: secret, Expired: expired}); err != nil {
		return err
	}
	s.timers.Forget(key, g.Token)
	for _, h := range holds {
		h.Unfreed() // nothing popped; the waiters are served on Release
	}
	return nil
}

// MultiGrant returns the live multi-grant with token, as this node's
// state holds it.
func (s *Service) MultiGrant(token uint64) (fsm.MultiGrant, bool) { return s.fsm.MultiGrant(token) }

// lockLeaseKey is the timer key of lock grant l's lease: its own (as a
// shared grant's when l.Mode is shared), or its multi-grant's.
func (s *Service) lockLeaseKey(l entry.Lock) lease.Key {
	if s.fsm.IsMulti(l.Token) {
		return timed.MultiKey(l.Token)
	}
	return s.locks.p.grantKey(l.Name, l.Token, l.Mode == entry.ModeShared)
}
