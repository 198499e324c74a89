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
		{Key: "a", Token: 1, TTL: time.Second},
		{Key: DelayKey("d"), Token: 3, TTL: 500 * time.Millisecond},
		{Key: PermitKey("sem", 4), Token: 4, TTL: 3 * time.Second},
	}
	if !slices.Equal(got, want) || held != 2 {
		t.Fatalf("timed %+v (%d grants), want %+v (2)", got, held, want)
	}
}

// Every key reads back as what it times, with its lock's or semaphore's
// name, even a name that looks like a number or a prefix.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		key  string
		kind Kind
		name string
	}{
		{"l", LockLease, "l"},
		{"sem", LockLease, "sem"},
		{PermitKey("s-1", 7), PermitLease, "s-1"},
		{DelayKey("12"), LockDelay, "12"},
		{SlotDelayKey("delay", 9), SlotDelay, "delay"},
	} {
		if kind, name := Parse(c.key); kind != c.kind || name != c.name {
			t.Errorf("Parse(%q) = %v %q, want %v %q", c.key, kind, name, c.kind, c.name)
		}
	}
}
