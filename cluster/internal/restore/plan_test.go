package restore

import (
	"bytes"
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

// A restore keeps this cluster's durable waiters (issue 28: their clients
// wait now), not the backup's, and voids the grants durable waiters got
// with every other: the planned image reads back.
func TestPlanKeepsTheClustersDurableWaiters(t *testing.T) {
	waiter := func(index uint64, holder string) entry.Waiter {
		return entry.Waiter{Index: index, WaitMillis: 1000,
			Acquire: &entry.Acquire{Lock: "l", Holder: holder, Lease: "s", TTLMillis: 1000, RequestID: "r-" + holder}}
	}
	backup := &snapshot.Image{Header: snapshot.Header{Format: snapshot.Format, Version: snapshot.Version, LastToken: 3, AppliedIndex: 4, DurableWaiters: 1},
		DurableWaiters: []entry.Waiter{waiter(4, "old")}}
	cur := &snapshot.Image{Header: snapshot.Header{Format: snapshot.Format, Version: snapshot.Version, LastToken: 8, AppliedIndex: 9, Locks: 1, DurableWaiters: 2, Waited: 1},
		Locks:          []entry.Lock{{Name: "m", Holder: "w0", Token: 8, Lease: "s", TTLMillis: 1000}},
		DurableWaiters: []entry.Waiter{waiter(6, "now1"), waiter(7, "now2")}, Waited: []entry.Waited{{Token: 8, WaitIndex: 5}}}
	img, err := Plan(backup, cur, 0, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := snapshot.ReadImage(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if w := back.DurableWaiters; len(w) != 2 || w[0].Holder() != "now1" || w[1].Holder() != "now2" || len(back.Waited) != 0 || len(back.Voided) != 1 {
		t.Fatalf("planned waiters %+v, waited %+v, voided %+v", w, back.Waited, back.Voided)
	}
}
