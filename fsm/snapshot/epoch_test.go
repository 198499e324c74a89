package snapshot

import (
	"errors"
	"math"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
)

// The epoch never moves past LastEpoch, the last one whose tokens fit in 64
// bits, and a backup whose epoch leaves no room above it is refused: before
// this, min_epoch 2^24-1 and a second restore left a cluster that refused
// every acquire for good, and a backup epoch of 2^64-1 wrapped to 0.
func TestEpochsStayUsable(t *testing.T) {
	if entry.MakeToken(entry.LastEpoch, entry.MaxIndex) != math.MaxUint64 || entry.LastEpoch != 16_777_215 {
		t.Fatalf("LastEpoch %d does not end the token space", uint64(entry.LastEpoch))
	}
	for _, c := range []struct {
		backup, current, min uint64
		want                 uint64 // 0: refused
	}{
		{0, 0, 0, 1},
		{4, 2, 0, 5},
		{4, 9, 0, 10},
		{4, 9, 30, 30},
		{0, 0, entry.LastEpoch, entry.LastEpoch}, // the last epoch is usable
		{entry.LastEpoch - 1, 0, 0, entry.LastEpoch},
		{0, entry.LastEpoch, 0, 0}, // a second restore after min_epoch=16777215
		{0, 0, entry.LastEpoch + 1, 0},
		{entry.LastEpoch, 0, 0, 0},
		{math.MaxUint64, 0, 0, 0}, // would wrap to 0
		{0, math.MaxUint64, 0, 0},
	} {
		got, err := RestoreEpoch(c.backup, c.current, c.min)
		if c.want == 0 {
			if !errors.Is(err, ErrNoEpochLeft) {
				t.Errorf("restore of epoch %d onto %d, min %d: %d, %v, want refused", c.backup, c.current, c.min, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("restore of epoch %d onto %d, min %d: %d, %v, want %d", c.backup, c.current, c.min, got, err, c.want)
		}
	}

	for _, c := range []struct {
		current, bump, want uint64 // want 0: refused
	}{
		{0, 1, 1}, {3, 5, 8}, {entry.LastEpoch - 1, 1, entry.LastEpoch},
		{entry.LastEpoch, 1, 0}, {0, entry.LastEpoch + 1, 0}, {5, math.MaxUint64, 0}, {0, 0, 0},
	} {
		got, err := RecoveryEpoch(c.current, c.bump)
		if (c.want == 0) != (err != nil) || got != c.want {
			t.Errorf("recovery of epoch %d by %d: %d, %v, want %d", c.current, c.bump, got, err, c.want)
		}
	}

	for _, c := range []struct {
		h  Header
		ok bool
	}{
		{Header{Epoch: 0, LastToken: 77}, true},
		{Header{Epoch: 2, LastToken: entry.MakeToken(2, 9)}, true},
		{Header{Epoch: entry.LastEpoch - 1, LastToken: entry.MakeToken(entry.LastEpoch-1, entry.MaxIndex)}, true},
		{Header{Epoch: entry.LastEpoch}, false},
		{Header{Epoch: math.MaxUint64}, false},
		{Header{Epoch: 1, LastToken: entry.MakeToken(2, 1)}, false}, // a last token from the future
		{Header{Epoch: 0, LastToken: math.MaxUint64}, false},
		{Header{AppliedIndex: entry.MaxIndex - 1}, true},
		{Header{AppliedIndex: entry.MaxIndex}, false}, // no log index left for a token
		{Header{AppliedIndex: math.MaxUint64}, false},
	} {
		if err := CheckBackupHeader(c.h); (err == nil) != c.ok {
			t.Errorf("backup header epoch %d last token %d: %v, want ok %v", c.h.Epoch, c.h.LastToken, err, c.ok)
		}
	}
}
