// Package refusal is why the state machine refuses a valid command: the
// sentinel errors that every layer, from the FSM up to the HTTP edge,
// matches with errors.Is, and the typed errors that say more (who holds the
// lock, the key's last token, why a secret is not the grant's).
package refusal

import (
	"errors"
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/secrets"
)

// Domain errors returned as Apply results (and by coord for the same
// refusals seen on the leader). They are shared by every layer so that
// errors.Is works from the FSM up to the HTTP edge, which alone maps them to
// status codes.
var (
	// ErrLockHeld: the lock is held by another grant.
	ErrLockHeld = errors.New("lock is held")
	// ErrLeaseLost: the grant is no longer the lock's current one (its lease
	// expired, it was released or superseded) or the secret is wrong.
	ErrLeaseLost = errors.New("lease is no longer current")
	// ErrStaleToken: a fenced write carried a token not greater than the key's
	// last token. An equal token is a replay and is refused too.
	ErrStaleToken = errors.New("stale fencing token")
	// ErrNotLockHolder: a fenced write named a lock whose current token is not
	// the write's token.
	ErrNotLockHolder = errors.New("token is not the lock's current grant")
	// ErrUnissuedToken: a fenced write carried a token above every token
	// granted so far, which nobody can hold.
	ErrUnissuedToken = errors.New("fencing token was never issued")
	// ErrNoSuchKey: a key delete named a key that is not stored.
	ErrNoSuchKey = errors.New("no such key")
	// ErrLockDelay: the lock's last grant expired and its lock-delay is
	// still running; nobody can acquire it until the delay ends.
	ErrLockDelay = errors.New("lock is in its lock-delay")
	// ErrTokenSpaceExhausted: the log index no longer fits below the epoch
	// bits, so no token could be ordered after the previous ones. Fail closed.
	ErrTokenSpaceExhausted = errors.New("token space exhausted for this epoch")
	// ErrSemaphoreFull: every permit of the semaphore is held.
	ErrSemaphoreFull = errors.New("semaphore is full")
	// ErrLimitMismatch: an acquire named a limit other than the one of the
	// semaphore's held permits.
	ErrLimitMismatch = errors.New("semaphore limit mismatch")
	// ErrUnknownSession: no live session has the id, and no ended one is
	// remembered with it.
	ErrUnknownSession = errors.New("unknown session")
	// ErrSessionExpired: the session ended (expired or closed), and every
	// grant under it with it.
	ErrSessionExpired = errors.New("session expired")
	// ErrSessionMismatch: the session lease presented is not the
	// session's.
	ErrSessionMismatch = errors.New("session lease mismatch")
	// ErrSessionGrant: a renewal of a grant held under a session, which
	// lives as long as its session: renew the session.
	ErrSessionGrant = errors.New("grant held under a session")
	// ErrMultiGrant: a release or expiry of one name of a multi-grant,
	// whose names end together: release the multi-grant.
	ErrMultiGrant = errors.New("lock is one name of a multi-grant")
	// ErrRevoked: an operator revoked the grant or the session (or every
	// grant under it); its holder must stop and acquire again.
	ErrRevoked = errors.New("revoked by an operator")
)

// HeldError reports who holds a lock; it matches ErrLockHeld.
type HeldError struct {
	Lock   string
	Holder string
	Token  uint64
	// Shared counts the lock's shared grants when it is held in shared
	// mode (Holder and Token are then its newest one's), 0 when it is held
	// exclusively.
	Shared int
}

func (e *HeldError) Error() string {
	if e.Shared > 0 {
		return fmt.Sprintf("lock %q is held in shared mode by %d holders, the newest %q with token %d", e.Lock, e.Shared, e.Holder, e.Token)
	}
	return fmt.Sprintf("lock %q is held by %q with token %d", e.Lock, e.Holder, e.Token)
}

// Is makes errors.Is(err, ErrLockHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrLockHeld }

// StaleError reports the last token a fenced key accepted; it matches
// ErrStaleToken.
type StaleError struct {
	Key       string
	Token     uint64
	LastToken uint64
	// Floor, when set, is the epoch the token is before: the cluster was
	// restored or recovered since its grant, and every grant of an earlier
	// epoch is void whatever the key's mark.
	Floor uint64
}

func (e *StaleError) Error() string {
	if e.Floor != 0 {
		return fmt.Sprintf("token %d for key %q is from epoch %d, before the restore or recovery that began epoch %d: grants of earlier epochs are void (its last token is %d)",
			e.Token, e.Key, entry.TokenEpoch(e.Token), e.Floor, e.LastToken)
	}
	return fmt.Sprintf("token %d for key %q is not greater than its last token %d", e.Token, e.Key, e.LastToken)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleError) Is(target error) bool { return target == ErrStaleToken }

// LeaseError is a refused renewal or release: the token and secret are not
// the lock's current grant. It matches ErrLeaseLost, and says as precisely as
// the state allows why not.
type LeaseError struct {
	Lock    string
	Token   uint64 // the token presented
	Current uint64 // the lock's current grant; 0 when the lock is free
	Why     LeaseRefusal
}

// LeaseRefusal is why a LeaseError was refused.
type LeaseRefusal int

const (
	// LeaseEnded: the secret was issued for this lock, and the grant is no
	// longer current: its lease expired, or it was released or superseded.
	LeaseEnded LeaseRefusal = iota
	// LeaseOtherLock: the secret was issued for another lock.
	LeaseOtherLock
	// LeaseWrongSecret: the token is the lock's current grant, the secret
	// is not that grant's.
	LeaseWrongSecret
	// LeaseNeverGranted: the token is above the lock's current grant, so it
	// was never a grant of this lock (each new grant of a lock has a token
	// above all of its earlier ones and becomes the current one).
	LeaseNeverGranted
	// LeaseUnknown: the grant is not current, and the secret, from a build
	// before secrets were marked, cannot tell whether it ever was.
	LeaseUnknown
)

func (e *LeaseError) Error() string {
	switch e.Why {
	case LeaseOtherLock:
		return fmt.Sprintf("lease does not belong to lock %q: its secret was issued for another lock", e.Lock)
	case LeaseWrongSecret:
		return fmt.Sprintf("the secret is not that of lock %q's grant with token %d", e.Lock, e.Token)
	case LeaseNeverGranted:
		return fmt.Sprintf("token %d was never a grant of lock %q: its current grant is token %d", e.Token, e.Lock, e.Current)
	case LeaseUnknown:
		return fmt.Sprintf("lock %q has no current grant with token %d and this secret: its lease ended, or it is another lock's", e.Lock, e.Token)
	}
	now := "the lock is free"
	if e.Current != 0 {
		now = fmt.Sprintf("its current grant is token %d", e.Current)
	}
	return fmt.Sprintf("lock %q's grant with token %d is no longer current (its lease expired, or it was released or superseded); %s", e.Lock, e.Token, now)
}

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseError) Is(target error) bool { return target == ErrLeaseLost }

// LeaseRefused explains why token and secret are not the current grant of
// lock name, whose current grant is token current (0: the lock is free).
// Call it only once the grant was found not to match.
func LeaseRefused(name string, current, token uint64, secret string) *LeaseError {
	e := &LeaseError{Lock: name, Token: token, Current: current}
	origin := secrets.OriginOf(secret, name)
	switch {
	case origin == secrets.OtherLock:
		e.Why = LeaseOtherLock
	case current != 0 && token == current:
		e.Why = LeaseWrongSecret
	case current != 0 && token > current:
		e.Why = LeaseNeverGranted
	case origin == secrets.Unknown:
		e.Why = LeaseUnknown
	default:
		e.Why = LeaseEnded
	}
	return e
}

// NotHolderError is a fenced write that named a lock whose current grant is
// not the write's token; it matches ErrNotLockHolder.
type NotHolderError struct {
	Lock  string
	Token uint64
	// Shared: the token is one of the lock's shared grants, which never
	// write under the lock.
	Shared bool
}

func (e *NotHolderError) Error() string {
	if e.Shared {
		return fmt.Sprintf("token %d is a shared grant of lock %q: a shared grant cannot write, only the lock's exclusive grant can", e.Token, e.Lock)
	}
	return fmt.Sprintf("token %d is not the current grant of lock %q", e.Token, e.Lock)
}

// Is makes errors.Is(err, ErrNotLockHolder) true.
func (e *NotHolderError) Is(target error) bool { return target == ErrNotLockHolder }

// UnissuedError is a fenced write whose token is above every token granted
// so far; it matches ErrUnissuedToken.
type UnissuedError struct {
	Key   string
	Token uint64
}

func (e *UnissuedError) Error() string {
	return fmt.Sprintf("token %d for key %q was never issued: it is above every token granted so far", e.Token, e.Key)
}

// Is makes errors.Is(err, ErrUnissuedToken) true.
func (e *UnissuedError) Is(target error) bool { return target == ErrUnissuedToken }

// DelayError is an acquire refused during a lock-delay; it matches
// ErrLockDelay. Millis is the delay's full length: the FSM cannot know how
// much is left (the leader times it, see coord).
type DelayError struct {
	Lock   string
	Since  uint64 // index of the expiry that started the delay
	Millis int64
}

func (e *DelayError) Error() string {
	return fmt.Sprintf("lock %q is in a lock-delay of %d ms since its grant expired at index %d", e.Lock, e.Millis, e.Since)
}

// Is makes errors.Is(err, ErrLockDelay) true.
func (e *DelayError) Is(target error) bool { return target == ErrLockDelay }

// FullError is an acquire of a full semaphore; it matches ErrSemaphoreFull.
type FullError struct {
	Semaphore string
	Held      int
	Limit     int
}

func (e *FullError) Error() string {
	return fmt.Sprintf("semaphore %q is full: %d of %d permits held", e.Semaphore, e.Held, e.Limit)
}

// Is makes errors.Is(err, ErrSemaphoreFull) true.
func (e *FullError) Is(target error) bool { return target == ErrSemaphoreFull }

// LimitError is an acquire whose limit differs from the semaphore's; it
// matches ErrLimitMismatch.
type LimitError struct {
	Semaphore string
	Limit     int // the semaphore's
	Asked     int
	Held      int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("semaphore %q has limit %d while %d permits are held; the acquire asked for %d", e.Semaphore, e.Limit, e.Held, e.Asked)
}

// Is makes errors.Is(err, ErrLimitMismatch) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimitMismatch }

// SlotDelayError is an acquire refused because every slot not held is in
// its lock-delay; it matches ErrLockDelay.
type SlotDelayError struct {
	Semaphore string
	Delayed   int
}

func (e *SlotDelayError) Error() string {
	return fmt.Sprintf("semaphore %q has %d permit slots in their lock-delay and none free", e.Semaphore, e.Delayed)
}

// Is makes errors.Is(err, ErrLockDelay) true.
func (e *SlotDelayError) Is(target error) bool { return target == ErrLockDelay }
