package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// An expiry of a grant that asked for a lock-delay records the delay and
// refuses every acquire until EndDelay; a release starts none.
func TestLockDelayAfterExpiryOnly(t *testing.T) {
	f := New(nil)
	delayed := func(holder, lease string) *entry.Acquire {
		a := acquire("a", holder, lease)
		a.LockDelayMillis = 5000
		return a
	}
	g := mustGrant(t, f, delayed("w1", "s1"), 1)
	if g.LockDelayMillis != 5000 {
		t.Fatalf("grant = %+v, want its lock-delay", g)
	}
	res, ok := f.ApplyCommand(&entry.Expire{Lock: "a", Token: g.Token}, 2).(*ReleaseResult)
	if !ok || res.Delay == nil || res.Delay.Since != 2 || res.Delay.Millis != 5000 {
		t.Fatalf("expire: %+v, want a delay since 2", res)
	}
	err, _ := f.ApplyCommand(acquire("a", "w2", "s2"), 3).(error)
	var de *refusal.DelayError
	if !errors.As(err, &de) || !errors.Is(err, refusal.ErrLockDelay) || de.Since != 2 {
		t.Fatalf("acquire during the delay: %v, want lock_delay", err)
	}
	if err, _ := f.ApplyCommand(&entry.EndDelay{Lock: "a", Since: 1}, 4).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("end of another delay: %v", err)
	}
	// Snapshots carry the running delay.
	var buf bytes.Buffer
	if _, err := f.View().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := snapshot.ReadImage(&buf)
	if err != nil || !reflect.DeepEqual(img.Delays, []entry.Delay{{Lock: "a", Since: 2, Millis: 5000}}) {
		t.Fatalf("snapshot delays: %+v (%v)", img, err)
	}
	end, ok := f.ApplyCommand(&entry.EndDelay{Lock: "a", Since: 2, Next: acquire("", "w3", "s3")}, 5).(*EndDelayResult)
	if !ok || end.Next == nil || end.Next.Token != 5 || end.Next.Holder != "w3" {
		t.Fatalf("end of the delay with a waiter: %+v", end)
	}
	if _, running := f.Delay("a"); running {
		t.Fatal("the delay is still recorded")
	}
	// Release of a grant with a delay: the lock is free at once.
	f.ApplyCommand(&entry.Release{Lock: "a", Token: 5, Lease: "s3"}, 6)
	g = mustGrant(t, f, delayed("w4", "s4"), 7)
	if res, _ := f.ApplyCommand(&entry.Release{Lock: "a", Token: g.Token, Lease: "s4"}, 8).(*ReleaseResult); res == nil || res.Delay != nil {
		t.Fatalf("release: %+v, want no delay", res)
	}
	mustGrant(t, f, acquire("a", "w5", "s5"), 9)
}

// An acquire with a lock-delay is never written for members that cannot
// read it: the binary form has no field for it, and JSON readers before
// LogFormatCoord would drop it.
func TestLockDelayNeedsLogFormatCoord(t *testing.T) {
	a := acquire("a", "w", "s")
	a.LockDelayMillis = 10
	a.Principal = "ci" // carried: every reader of the form reads it
	for _, cmd := range []entry.Command{a, &entry.Release{Lock: "a", Token: 1, Next: a}, &entry.Expire{Lock: "a", Token: 1, Next: a}} {
		if _, err := entry.EncodeFormat(cmd, entry.LogFormatPrincipal); !errors.Is(err, entry.ErrFormatTooOld) {
			t.Fatalf("%T for binary members: %v", cmd, err)
		}
		data, err := entry.EncodeFormat(cmd, entry.LogFormatCoord)
		if err != nil || entry.CommandType(data[0]) != cmd.Type() {
			t.Fatalf("%T: entry %q (%v), want JSON", cmd, data, err)
		}
		back, err := entry.Decode(data)
		if err != nil || !reflect.DeepEqual(back, cmd) {
			t.Fatalf("%T: decoded %+v (%v)", cmd, back, err)
		}
	}
	plain := acquire("a", "w", "s")
	if data, err := entry.EncodeFormat(plain, entry.LogFormatCoord); err != nil || entry.CommandType(data[0]) != entry.CmdAcquirePrincipal {
		t.Fatalf("an acquire without a delay: %q (%v), want binary", data, err)
	}
}
