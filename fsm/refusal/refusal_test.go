package refusal

import (
	"errors"
	"testing"
)

// Each typed refusal matches its sentinel, and no other, so that the edge's
// one table maps it to its status.
func TestEachRefusalMatchesItsSentinel(t *testing.T) {
	sentinels := []error{ErrLockHeld, ErrLeaseLost, ErrStaleToken, ErrNotLockHolder, ErrUnissuedToken, ErrNoSuchKey,
		ErrLockDelay, ErrTokenSpaceExhausted, ErrSemaphoreFull, ErrLimitMismatch}
	for err, want := range map[error]error{
		&HeldError{}: ErrLockHeld, &StaleError{}: ErrStaleToken, &LeaseError{}: ErrLeaseLost,
		&NotHolderError{}: ErrNotLockHolder, &UnissuedError{}: ErrUnissuedToken, &DelayError{}: ErrLockDelay,
		&FullError{}: ErrSemaphoreFull, &LimitError{}: ErrLimitMismatch, &SlotDelayError{}: ErrLockDelay,
	} {
		for _, s := range sentinels {
			if errors.Is(err, s) != (s == want) {
				t.Errorf("%T: errors.Is(%v) = %v", err, s, !(s == want))
			}
		}
	}
}
