package fsm

import (
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
)

// MaxLockValue bounds the value a lock's holder publishes.
const MaxLockValue = 4096

// SetValueResult is the Apply result of an effective SetValue.
type SetValueResult struct {
	Grant entry.Lock
}

func applySetValue(s *state, c *entry.SetValue, _ uint64) any {
	cur, err := s.current(c.Lock, c.Token, c.Lease)
	if err != nil {
		return err
	}
	if len(c.Value) > MaxLockValue {
		return fmt.Errorf("%w: value of %d bytes for lock %q", entry.ErrMalformedCommand, len(c.Value), c.Lock)
	}
	// Entries are immutable (a snapshot may hold this one): replace it.
	l := cur.Lock()
	l.Value = c.Value
	e := locktable.NewEntry(&l)
	// The request table may still share the old entry's string; equal
	// content, so only memory is kept a little longer.
	s.locks.Replace(e)
	return &SetValueResult{Grant: e.Lock()}
}
