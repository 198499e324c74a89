package timed

import (
	"slices"
	"testing"
	"time"

	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// A promoted leader times every held lock, running lock-delay and held
// permit at its full length, each under its own key.
func TestAllCoversEveryPrimitive(t *testing.T) {
	f := fsm.New(nil)
	for i, cmd := range []entry.Command{
		&entry.Acquire{Lock: "a", Holder: "h", Lease: "s", TTLMillis: 1000},
		&entry.Acquire{Lock: "d", Holder: "h", Lease: "s", TTLMillis: 2000, LockDelayMillis: 500},
		&entry.Expire{Lock: "d", Token: 2},
		&entry.SemAcquire{Semaphore: "sem", Holder: "h", Lease: "s", TTLMillis: 3000, Limit: 2},
	} {
		if err, _ := f.ApplyCommand(cmd, uint64(i+1)).(error); err != nil {
			t.Fatal(err)
		}
	}
	held := 0
	got := slices.Collect(All(f, &held))
	want := []lease.Lease{
		{Key: LockKey("a"), Token: 1, TTL: time.Second},
		{Key: DelayKey("d"), Token: 3, TTL: 500 * time.Millisecond},
		{Key: PermitKey("sem", 4), Token: 4, TTL: 3 * time.Second},
	}
	if !slices.Equal(got, want) || held != 2 {
		t.Fatalf("timed %+v (%d grants), want %+v (2)", got, held, want)
	}
}

// Every kind's key is its own: a lock, a permit, a lock-delay and a slot
// delay of one name never share a deadline, and neither do two permits.
func TestKeysOfOneNameDiffer(t *testing.T) {
	keys := []lease.Key{LockKey("x"), PermitKey("x", 7), PermitKey("x", 8), DelayKey("x"), SlotDelayKey("x", 7)}
	seen := map[lease.Key]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("key %+v made twice", k)
		}
		seen[k] = true
	}
}
