package fsm

import (
	"errors"
	"math"
	"testing"
)

// The epoch never moves past LastEpoch, the last one whose tokens fit in 64
// bits, and a backup whose epoch leaves no room above it is refused: before
// this, min_epoch 2^24-1 and a second restore left a cluster that refused
// every acquire for good, and a backup epoch of 2^64-1 wrapped to 0.
func TestEpochsStayUsable(t *testing.T) {
	if MakeToken(LastEpoch, MaxIndex) != math.MaxUint64 || LastEpoch != 16_777_215 {
		t.Fatalf("LastEpoch %d does not end the token space", uint64(LastEpoch))
	}
	for _, c := range []struct {
		backup, current, min uint64
		want                 uint64 // 0: refused
	}{
		{0, 0, 0, 1},
		{4, 2, 0, 5},
		{4, 9, 0, 10},
		{4, 9, 30, 30},
		{0, 0, LastEpoch, LastEpoch}, // the last epoch is usable
		{LastEpoch - 1, 0, 0, LastEpoch},
		{0, LastEpoch, 0, 0}, // a second restore after min_epoch=16777215
		{0, 0, LastEpoch + 1, 0},
		{LastEpoch, 0, 0, 0},
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
		{0, 1, 1}, {3, 5, 8}, {LastEpoch - 1, 1, LastEpoch},
		{LastEpoch, 1, 0}, {0, LastEpoch + 1, 0}, {5, math.MaxUint64, 0}, {0, 0, 0},
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
		{Header{Epoch: 2, LastToken: MakeToken(2, 9)}, true},
		{Header{Epoch: LastEpoch - 1, LastToken: MakeToken(LastEpoch-1, MaxIndex)}, true},
		{Header{Epoch: LastEpoch}, false},
		{Header{Epoch: math.MaxUint64}, false},
		{Header{Epoch: 1, LastToken: MakeToken(2, 1)}, false}, // a last token from the future
		{Header{Epoch: 0, LastToken: math.MaxUint64}, false},
		{Header{AppliedIndex: MaxIndex - 1}, true},
		{Header{AppliedIndex: MaxIndex}, false}, // no log index left for a token
		{Header{AppliedIndex: math.MaxUint64}, false},
	} {
		if err := CheckBackupHeader(c.h); (err == nil) != c.ok {
			t.Errorf("backup header epoch %d last token %d: %v, want ok %v", c.h.Epoch, c.h.LastToken, err, c.ok)
		}
	}
}
