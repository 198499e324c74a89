package snapshot

import (
	"errors"
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
)

// ErrNoEpochLeft: moving the epoch as asked would leave the cluster no token
// space (an epoch above entry.LastEpoch).
var ErrNoEpochLeft = errors.New("no epoch left")

// CheckBackupHeader refuses a backup whose header no log could have written,
// or that leaves a restore no room: its epoch must be below entry.LastEpoch, so
// that the restored epoch (at least one above it) still issues tokens, and
// its last token must belong to its epoch or an earlier one, as every
// state's does (a later one would stay above every token the restored
// cluster could issue, and refuse every grant). Its applied index must
// leave log indexes for tokens too: a restore continues the log after it.
func CheckBackupHeader(h Header) error {
	if h.Epoch >= entry.LastEpoch {
		return fmt.Errorf("backup epoch %d: the largest a restorable backup has is %d, so that the restored epoch, one above it, still issues tokens (at most %d)",
			h.Epoch, entry.LastEpoch-1, uint64(entry.LastEpoch))
	}
	if e := entry.TokenEpoch(h.LastToken); e > h.Epoch {
		return fmt.Errorf("backup last token %d belongs to epoch %d, above the backup's epoch %d", h.LastToken, e, h.Epoch)
	}
	if h.AppliedIndex >= entry.MaxIndex {
		return fmt.Errorf("backup applied index %d: a restore continues the log after it, and a token's log index is at most %d", h.AppliedIndex, uint64(entry.MaxIndex))
	}
	return nil
}

// RestoreEpoch is the epoch a restore moves to: max(backup+1, current+1,
// minEpoch), so that every later token exceeds every token of the backup's
// epoch and of the current one. It fails with ErrNoEpochLeft when that is
// above entry.LastEpoch (backup is checked by CheckBackupHeader first).
func RestoreEpoch(backup, current, minEpoch uint64) (uint64, error) {
	switch {
	case backup >= entry.LastEpoch:
		return 0, fmt.Errorf("%w: backup epoch %d leaves no epoch above it", ErrNoEpochLeft, backup)
	case current >= entry.LastEpoch:
		return 0, fmt.Errorf("%w: the cluster is at epoch %d, the last one that issues tokens; a restore must move above it", ErrNoEpochLeft, current)
	case minEpoch > entry.LastEpoch:
		return 0, fmt.Errorf("%w: min_epoch %d is above %d, the last epoch that issues tokens", ErrNoEpochLeft, minEpoch, uint64(entry.LastEpoch))
	}
	return max(backup+1, current+1, minEpoch), nil
}

// RecoveryEpoch is the epoch a forced recovery moves to: current+bump, with
// bump at least 1, at most entry.LastEpoch.
func RecoveryEpoch(current, bump uint64) (uint64, error) {
	if bump == 0 {
		return 0, errors.New("the epoch bump of a forced recovery is at least 1")
	}
	if current > entry.LastEpoch || bump > entry.LastEpoch-current {
		return 0, fmt.Errorf("%w: epoch %d bumped by %d is above %d, the last epoch that issues tokens", ErrNoEpochLeft, current, bump, uint64(entry.LastEpoch))
	}
	return current + bump, nil
}
