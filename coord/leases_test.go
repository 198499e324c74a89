package coord

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
func TestTimedLeasesCoverEveryPrimitive(t *testing.T) {
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
	got := slices.Collect(timedLeases(f, &held))
	want := []lease.Lease{
		{Key: "a", Token: 1, TTL: time.Second},
		{Key: delayKey("d"), Token: 3, TTL: 500 * time.Millisecond},
		{Key: permitKey("sem", 4), Token: 4, TTL: 3 * time.Second},
	}
	if !slices.Equal(got, want) || held != 2 {
		t.Fatalf("timed %+v (%d grants), want %+v (2)", got, held, want)
	}
}
