package snapshot

import (
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
)

// checkShared refuses shared grants of locks that no log could have
// produced: a grant as checkLock refuses it, one whose mode is not shared,
// or one out of order (by lock name, then token). A lock held both in
// shared mode and exclusively is the caller's to find (a restore streams
// the exclusive grants).
func (img *Image) checkShared() error {
	for i, l := range img.Shared {
		if err := img.Header.checkLock(l.Name, l.Token, l.TTLMillis); err != nil {
			return err
		}
		if l.Mode != entry.ModeShared {
			return fmt.Errorf("shared grant %d of lock %q with mode %q", l.Token, l.Name, l.Mode)
		}
		if i > 0 {
			prev := img.Shared[i-1]
			if prev.Name > l.Name || (prev.Name == l.Name && prev.Token >= l.Token) {
				return fmt.Errorf("shared grant %d of lock %q out of order", l.Token, l.Name)
			}
		}
	}
	return nil
}

// sharedHeld reports whether lock holds a shared grant with token.
func (img *Image) sharedHeld(lock string, token uint64) bool {
	for _, l := range img.Shared {
		if l.Name == lock && l.Token == token {
			return true
		}
	}
	return false
}
