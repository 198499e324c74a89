package coord

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"iter"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
)

// AcquireRequest asks for a lock.
type AcquireRequest struct {
	Lock      string
	Holder    string
	TTL       time.Duration
	Wait      time.Duration // how long to queue if the lock is held
	RequestID string        // makes retries idempotent; generated when empty
	// Principal is the authenticated caller ("" without an ACL). Its
	// request ids are its own: another principal's replay is a new request.
	Principal string
	// LockDelay, when set, keeps the lock from anybody for that long after
	// this grant ends by expiry (delay.go). At most MaxLockDelay.
	LockDelay time.Duration
	// Value, when set, is published with the grant (elections).
	Value string
	// Session and SessionLease, when set, acquire under a live session
	// (sessions.go) instead of with a TTL of its own.
	Session      uint64
	SessionLease string
	// Shared asks for a shared grant: many may hold the lock in shared
	// mode at once, none while it is held exclusively (the default).
	Shared bool
	// Durable keeps the waiter's place in the log (durable.go): it needs a
	// request id and a wait, and survives a leader change.
	Durable bool
}

// newRequestID draws a request id for an acquire that came without one:
// wire.LeaseSecretLen random hex characters.
func newRequestID() string {
	var b [wire.LeaseSecretLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// principalRequestID is the request id an entry without a principal carries
// for principal's request id: a hash of both, in the form of a request id
// (wire.LeaseSecretLen hex characters).
func principalRequestID(principal, requestID string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + requestID))
	return hex.EncodeToString(sum[:wire.LeaseSecretLen/2])
}

// newSecret returns the secret of a new grant of lock name,
// wire.LeaseSecretLen hex characters (fsm/secrets; tested).
func newSecret(name string) string {
	var random [secrets.RandomLen]byte
	if _, err := rand.Read(random[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return secrets.New(name, random)
}

// Acquire grants the lock, queueing for up to req.Wait if it is held. The
// token is the log index of the entry that granted it. A retry with the
// request id of an earlier grant gets that grant back (Existing); a request
// id is its principal's.
func (s *Service) Acquire(ctx context.Context, req AcquireRequest) (fsm.AcquireResult, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return fsm.AcquireResult{}, err
	}
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	if s.raft.EntryFormat() < entry.LogFormatPrincipal {
		// The entry will carry no principal (a member runs a build from
		// before it), yet a request id stays its principal's: the entry
		// carries one derived from both, so that another principal's
		// replay is a new request whatever the format, and the caller is
		// answered with its own.
		asked, principal := req.RequestID, req.Principal
		req.Principal = ""
		if principal != "" {
			req.RequestID = principalRequestID(principal, asked)
			res, err := s.acquire(ctx, req)
			if res.Grant.RequestID == req.RequestID {
				res.Grant.RequestID = asked
			}
			return res, err
		}
	}
	return s.acquire(ctx, req)
}

// acquire is Acquire once the request id is settled: the engine's acquire,
// after the format check, which refuses before anything could queue.
func (s *Service) acquire(ctx context.Context, req AcquireRequest) (fsm.AcquireResult, error) {
	if f := s.raft.EntryFormat(); (req.LockDelay > 0 || req.Value != "") && f < entry.LogFormatCoord {
		// Refused before it could queue: no entry could carry it.
		return fsm.AcquireResult{}, s.refuse(fmt.Errorf("%w: a lock-delay or a value needs log format %d, the members read %d; upgrade every member first",
			entry.ErrFormatTooOld, entry.LogFormatCoord, f))
	}
	mode := ""
	if req.Shared {
		if f := s.raft.EntryFormat(); f < entry.LogFormatLockModes {
			return fsm.AcquireResult{}, s.refuse(fmt.Errorf("%w: a shared lock needs log format %d, the members read %d; upgrade every member first",
				entry.ErrFormatTooOld, entry.LogFormatLockModes, f))
		}
		mode = entry.ModeShared
	}
	if err := s.durableFormat(req.Durable); err != nil {
		return fsm.AcquireResult{}, err
	}
	if err := s.checkUnderSession(req.Session, req.SessionLease); err != nil {
		return fsm.AcquireResult{}, err
	}
	return s.locks.acquire(ctx, ask[*entry.Acquire]{
		name: req.Lock, holder: req.Holder, requestID: req.RequestID, principal: req.Principal, wait: req.Wait, durable: req.Durable,
		cmd: &entry.Acquire{
			Lock:      req.Lock,
			Holder:    req.Holder,
			Lease:     newSecret(req.Lock),
			TTLMillis: req.TTL.Milliseconds(),
			RequestID: req.RequestID,
			NowMillis: s.nowMillis(),
			Principal: req.Principal,

			LockDelayMillis: req.LockDelay.Milliseconds(),
			Value:           req.Value,
			Session:         req.Session,
			SessionLease:    req.SessionLease,
			Mode:            mode,
		},
	})
}

// lockPolicy is a lock to the engine: one exclusive holder or any number
// of shared ones, kept from anybody during its lock-delay. Its FIFO keeps
// the order: a queued exclusive request blocks the shared ones behind it
// (no writer starvation), and the shared requests at the head are served
// one entry each, in consecutive entries under the lock's queue
// (engine.serve), so each has its own token and nobody comes between.
type lockPolicy struct{ s *Service }

func (lockPolicy) closed(st fsm.NameState, cmd *entry.Acquire) (taken, delayed bool) {
	return !admits(st, cmd), len(st.Delays) > 0
}

// admits reports whether st's holders admit cmd: none, or shared ones and
// a shared cmd.
func admits(st fsm.NameState, cmd *entry.Acquire) bool {
	if len(st.Holders) == 0 {
		return true
	}
	return cmd != nil && cmd.Mode == entry.ModeShared && st.Holders[0].Shared
}

// heldError is the refusal of a held lock: by its exclusive holder, or by
// its newest shared one with their count.
func heldError(st fsm.NameState) error {
	if len(st.Holders) > 0 && st.Holders[0].Shared {
		newest := st.Holders[len(st.Holders)-1]
		return &refusal.HeldError{Lock: st.Name, Holder: newest.Holder, Token: newest.Token, Shared: len(st.Holders)}
	}
	return &refusal.HeldError{Lock: st.Name, Holder: st.Lock.Holder, Token: st.Lock.Token}
}

func (p lockPolicy) refusal(st fsm.NameState, cmd *entry.Acquire, wait, ahead bool) error {
	switch {
	case wait:
		return nil // a held or delayed lock is waited for
	case len(st.Holders) > 0 && (!admits(st, cmd) || ahead):
		// A shared acquire does not pass the requests queued for a lock
		// held in shared mode (an exclusive one is at their head).
		return heldError(st)
	case len(st.Delays) > 0:
		return p.s.delayedFor(st.Delays[0])
	}
	return nil
}

// lapsed refuses a held lock, and a delayed one, after a quorum round: a
// leader deposed without knowing it must not say the lock is delayed, as
// its successor may have ended the delay and granted the lock since (it
// said so without a round until TestLapsedWaiterInDelayConfirmsLeadership).
func (p lockPolicy) lapsed(st fsm.NameState, cmd *entry.Acquire, ahead bool) (bool, error) {
	if len(st.Holders) > 0 && (!admits(st, cmd) || ahead) {
		return true, heldError(st)
	}
	if len(st.Delays) > 0 {
		return true, p.s.delayedFor(st.Delays[0])
	}
	return false, nil
}

func (lockPolicy) granted(r fsm.AcquireResult) timedGrant {
	return timedGrant{name: r.Grant.Name, token: r.Grant.Token, ttlMillis: r.Grant.TTLMillis, existing: r.Existing, session: r.Grant.Session,
		shared: r.Grant.Mode == entry.ModeShared}
}

// served answers a waiter with its grant alone: it queued as a new
// request, and is told so.
func (lockPolicy) served(r fsm.AcquireResult) fsm.AcquireResult {
	return fsm.AcquireResult{Grant: r.Grant}
}

func (lockPolicy) freed(res any) freedName[fsm.AcquireResult] {
	var next *entry.Lock
	var f freedName[fsm.AcquireResult]
	switch r := res.(type) {
	case *fsm.ReleaseResult:
		next, f.nextErr, f.delay = r.Next, r.NextErr, r.Delay
	case *fsm.EndDelayResult:
		next, f.nextErr = r.Next, r.NextErr
	}
	if next != nil {
		f.next = &fsm.AcquireResult{Grant: *next}
	}
	return f
}

func (lockPolicy) stamp(next *entry.Acquire, now int64) {
	if next != nil {
		next.NowMillis = now
	}
}

func (lockPolicy) holder(cmd *entry.Acquire) string { return cmd.Holder }

func (lockPolicy) release(name string, token uint64, secret string, next *entry.Acquire) entry.Command {
	return &entry.Release{Lock: name, Token: token, Lease: secret, Next: next}
}

func (lockPolicy) expire(name string, token uint64, next *entry.Acquire) entry.Command {
	return &entry.Expire{Lock: name, Token: token, Next: next}
}

func (lockPolicy) endDelay(name string, since uint64, next *entry.Acquire) entry.Command {
	return &entry.EndDelay{Lock: name, Since: since, Next: next}
}

func (lockPolicy) grantKey(name string, token uint64, shared bool) lease.Key {
	if shared {
		return timed.SharedKey(name, token)
	}
	return timed.LockKey(name)
}
func (lockPolicy) delayKey(name string, _ uint64) lease.Key { return timed.DelayKey(name) }

func (lockPolicy) notHeldError(st fsm.NameState, token uint64, secret string) error {
	return refusal.LeaseRefused(st.Name, st.Lock.Token, token, secret)
}

func (lockPolicy) expiredError(name string, token uint64) error {
	return fmt.Errorf("%w: lock %q's grant with token %d: its lease expired", refusal.ErrLeaseLost, name, token)
}

// Renew confirms leadership with a quorum round and extends the lease's
// deadline on the leader. It writes nothing to the log.
func (s *Service) Renew(ctx context.Context, name string, token uint64, secret string) (entry.Lock, error) {
	st, err := s.locks.renew(ctx, name, token, secret)
	if err != nil {
		return entry.Lock{}, err
	}
	return st.Lock, nil
}

// Release frees the lock and hands it to the head waiter in the same entry.
func (s *Service) Release(ctx context.Context, name string, token uint64, secret string) error {
	return s.locks.release(ctx, name, token, secret)
}

// LockStatus is a lock as reported to clients (never the grant's secret).
type LockStatus struct {
	entry.Lock
	Held bool
	// Remaining is the leader's view of the lease's time left; Known is
	// false on a stale read from a follower.
	Remaining time.Duration
	Known     bool
	// DelayRemaining is the time left of the lock's running lock-delay
	// (Delayed), as the leader times it.
	Delayed        bool
	DelayRemaining time.Duration
	// Waiters counts the acquires queued for the lock on this node (the
	// leader queues them).
	Waiters int
	// Shared are the lock's shared grants, oldest first (Held and the
	// grant above are its exclusive one's alone).
	Shared []SharedStatus
}

// SharedStatus is one shared grant of a lock as reported to clients.
type SharedStatus struct {
	entry.Lock
	Remaining time.Duration
	Known     bool // false on a stale read from a follower
}

// sharedStatus reads lock name's shared grants with their time left.
func (s *Service) sharedStatus(name string) []SharedStatus {
	var out []SharedStatus
	for _, l := range s.fsm.SharedLocks(name) {
		st := SharedStatus{Lock: l}
		st.Remaining, st.Known = s.remaining(s.lockLeaseKey(l), l.Token, l.Session)
		out = append(out, st)
	}
	return out
}

// Lock returns a lock's state; linearizable unless stale.
func (s *Service) Lock(ctx context.Context, name string, stale bool) (LockStatus, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return LockStatus{}, err
		}
	}
	cur, held := s.fsm.Lock(name)
	st := LockStatus{Lock: cur, Held: held, Waiters: s.locks.queues.QueuedFor(name)}
	st.Name = name
	if held {
		st.Remaining, st.Known = s.remaining(s.lockLeaseKey(cur), cur.Token, cur.Session)
	} else {
		st.Shared = s.sharedStatus(name)
		st.DelayRemaining, st.Delayed = s.DelayRemaining(name)
	}
	return st, nil
}

// Locks returns the log index of one moment (a watch from it continues the
// list with no gap) and every lock held then, sorted by name, as a sequence
// that builds each lock's status as it is read, so that a million locks can
// be streamed without a copy of the list; linearizable unless stale.
func (s *Service) Locks(ctx context.Context, stale bool) (iter.Seq[LockStatus], uint64, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return nil, 0, err
		}
	}
	index, locks := s.fsm.LocksAt()
	// The locks held in shared mode are read after the others (a moment
	// later: a watch from index may repeat a shared grant, never miss
	// one) and merged in by name; a name is never held both ways.
	shared := s.sharedLocks()
	return func(yield func(LockStatus) bool) {
		for l := range locks {
			for len(shared) > 0 && shared[0].Name < l.Name {
				if !yield(shared[0]) {
					return
				}
				shared = shared[1:]
			}
			st := LockStatus{Lock: l, Held: true, Waiters: s.locks.queues.QueuedFor(l.Name)}
			st.Remaining, st.Known = s.remaining(s.lockLeaseKey(l), l.Token, l.Session)
			if !yield(st) {
				return
			}
		}
		for _, st := range shared {
			if !yield(st) {
				return
			}
		}
	}, index, nil
}

// sharedLocks returns the status of every lock held in shared mode, by
// name.
func (s *Service) sharedLocks() []LockStatus {
	var out []LockStatus
	s.fsm.EachSharedLock(func(l entry.Lock) {
		if len(out) == 0 || out[len(out)-1].Name != l.Name {
			out = append(out, LockStatus{Lock: entry.Lock{Name: l.Name}, Waiters: s.locks.queues.QueuedFor(l.Name)})
		}
		g := SharedStatus{Lock: l}
		g.Remaining, g.Known = s.remaining(s.lockLeaseKey(l), l.Token, l.Session)
		last := &out[len(out)-1]
		last.Shared = append(last.Shared, g)
	})
	return out
}

// CheckResult is whether a token is a lock's live grant.
type CheckResult struct {
	Current bool
	// Token is the lock's exclusive grant's (0: free, or held in shared
	// mode); Shared says the token asked about is a live shared grant.
	Token  uint64
	Shared bool
}

// Check reports whether token is a live grant of the lock, exclusive or
// shared, and the current exclusive token.
func (s *Service) Check(ctx context.Context, name string, token uint64, stale bool) (CheckResult, error) {
	st, err := s.Lock(ctx, name, stale)
	if err != nil {
		return CheckResult{}, err
	}
	if st.Held {
		return CheckResult{Current: st.Token == token, Token: st.Token}, nil
	}
	for _, g := range st.Shared {
		if g.Token == token {
			return CheckResult{Current: true, Shared: true}, nil
		}
	}
	return CheckResult{}, nil
}

// Waiters returns how many callers are queued for a lock on this node.
func (s *Service) Waiters(name string) int {
	q := s.locks.queues.Get(name)
	defer s.locks.queues.Put(name, q)
	q.Lock()
	defer q.Unlock()
	return q.Len()
}

// Proclaim changes the value a held lock publishes (an election leader's
// address, say): a log write under the lock's queue; the token is
// unchanged. A grant that is not current is refusal.ErrLeaseLost.
func (s *Service) Proclaim(ctx context.Context, name string, token uint64, secret, value string) (entry.Lock, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return entry.Lock{}, err
	}
	q := s.locks.queues.Get(name)
	defer s.locks.queues.Put(name, q)
	q.Lock()
	defer q.Unlock()
	res, err := s.raft.Apply(&entry.SetValue{Lock: name, Token: token, Lease: secret, Value: value})
	if err != nil {
		return entry.Lock{}, err
	}
	return res.(*fsm.SetValueResult).Grant, nil
}
