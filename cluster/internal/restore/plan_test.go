package restore

import (
	"errors"
	"math"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// A restore never moves the epoch past entry.LastEpoch, and refuses a backup
// whose header leaves it no room: before, min_epoch 16777215 followed by a
// second restore left a cluster that refused every acquire for good, and a
// backup epoch of 2^64-1 wrapped the new epoch to 0.
func TestPlanRestoreRefusesImpossibleEpochs(t *testing.T) {
	image := func(epoch, lastToken uint64) *snapshot.Image {
		return &snapshot.Image{Header: snapshot.Header{Format: snapshot.Format, Version: snapshot.Version, Epoch: epoch, LastToken: lastToken},
			Keys: []entry.FencedKey{{Key: "k", Value: []byte("v"), Token: lastToken}}}
	}
	for _, c := range []struct {
		name        string
		backup, cur *snapshot.Image
		minEpoch    uint64
		want        error
		epoch       uint64
	}{
		{"fresh", image(0, 7), image(0, 0), 0, nil, 1},
		{"min_epoch is the last epoch", image(0, 7), image(0, 0), entry.LastEpoch, nil, entry.LastEpoch},
		{"a restore after it", image(0, 7), image(entry.LastEpoch, entry.MakeToken(entry.LastEpoch, 9)), 0, ErrInvalidEpoch, 0},
		{"backup epoch 2^64-1", image(math.MaxUint64, 7), image(0, 0), 0, ErrInvalidSnapshot, 0},
		{"backup at the last epoch", image(entry.LastEpoch, 7), image(0, 0), 0, ErrInvalidSnapshot, 0},
		{"last token above the backup's epoch", image(0, math.MaxUint64), image(0, 0), 0, ErrInvalidSnapshot, 0},
	} {
		img, err := Plan(c.backup, c.cur, c.minEpoch, 10, 2)
		if c.want != nil {
			if !errors.Is(err, c.want) || img != nil {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
			continue
		}
		if err != nil || img.Header.Epoch != c.epoch || img.Header.AppliedIndex != 10 || len(img.Keys) != 1 {
			t.Errorf("%s: %+v, %v; want epoch %d", c.name, img, err, c.epoch)
		}
	}
}
