package fsm

import (
	"errors"
	"fmt"
)

// Domain errors returned as Apply results. They are shared by every layer so
// that errors.Is works from the FSM up to the HTTP edge, which alone maps them
// to status codes.
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
	// ErrTokenSpaceExhausted: the log index no longer fits below the epoch
	// bits, so no token could be ordered after the previous ones. Fail closed.
	ErrTokenSpaceExhausted = errors.New("token space exhausted for this epoch")
	// ErrMalformedCommand: a committed entry could not be decoded. Every
	// replica decodes the same bytes the same way, so each one skips it
	// identically; see FSM.Apply.
	ErrMalformedCommand = errors.New("malformed command")
)

// HeldError reports who holds a lock; it matches ErrLockHeld.
type HeldError struct {
	Lock   string
	Holder string
	Token  uint64
}

func (e *HeldError) Error() string {
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
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("token %d for key %q is not greater than its last token %d", e.Token, e.Key, e.LastToken)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleError) Is(target error) bool { return target == ErrStaleToken }
