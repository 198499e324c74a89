package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

func semAcquire(holder string, limit int) *entry.SemAcquire {
	return &entry.SemAcquire{Semaphore: "s", Holder: holder, Lease: "l-" + holder, TTLMillis: 1000, Limit: limit, RequestID: "r-" + holder}
}

// Permits up to the limit, each with its own token; then full; a limit
// that differs from the held permits' is refused; a release hands its
// permit to the next acquire in the same entry; an empty semaphore takes a
// new limit.
func TestSemaphorePermits(t *testing.T) {
	f := New(nil)
	a, _ := f.ApplyCommand(semAcquire("a", 2), 1).(*PermitResult)
	b, _ := f.ApplyCommand(semAcquire("b", 2), 2).(*PermitResult)
	if a == nil || b == nil || a.Permit.Token != 1 || b.Permit.Token != 2 || b.Held != 2 {
		t.Fatalf("permits %+v %+v", a, b)
	}
	var full *refusal.FullError
	if err, _ := f.ApplyCommand(semAcquire("c", 2), 3).(error); !errors.As(err, &full) || full.Held != 2 {
		t.Fatalf("third permit of 2: %v", err)
	}
	var mismatch *refusal.LimitError
	if err, _ := f.ApplyCommand(semAcquire("c", 3), 4).(error); !errors.As(err, &mismatch) || mismatch.Limit != 2 || !errors.Is(err, refusal.ErrLimitMismatch) {
		t.Fatalf("limit 3 while 2 are held: %v", err)
	}
	if again, _ := f.ApplyCommand(semAcquire("a", 2), 5).(*PermitResult); again == nil || !again.Existing || again.Permit.Token != 1 {
		t.Fatalf("retry of a's request: %+v", again)
	}
	rel, _ := f.ApplyCommand(&entry.SemRelease{Semaphore: "s", Token: 1, Lease: "l-a", Next: semAcquire("c", 2)}, 6).(*SemReleaseResult)
	if rel == nil || rel.Next == nil || rel.Next.Permit.Token != 6 || rel.Next.Permit.Holder != "c" {
		t.Fatalf("release with a handoff: %+v", rel)
	}
	var buf bytes.Buffer
	if _, err := f.View().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g := New(nil)
	if err := g.Restore(io.NopCloser(&buf)); err != nil || !reflect.DeepEqual(g.Semaphore("s"), f.Semaphore("s")) || g.Digest() != f.Digest() {
		t.Fatalf("snapshot round trip: %v\n%+v\n%+v", err, g.Semaphore("s"), f.Semaphore("s"))
	}
	f.ApplyCommand(&entry.SemExpire{Semaphore: "s", Token: 2}, 7)
	f.ApplyCommand(&entry.SemExpire{Semaphore: "s", Token: 6}, 8)
	if st := f.Semaphore("s"); st.Limit != 0 || len(st.Permits) != 0 {
		t.Fatalf("after every permit ended: %+v", st)
	}
	if r, _ := f.ApplyCommand(semAcquire("d", 5), 9).(*PermitResult); r == nil || r.Permit.Limit != 5 {
		t.Fatalf("an empty semaphore takes a new limit: %+v", r)
	}
}

// A permit with a lock-delay that expires delays its slot, not the whole
// semaphore: the other slot is granted, a third acquire is refused with
// lock_delay, the delay survives a snapshot (with the limit, though no
// permit is held), and its EndDelay hands the slot on. A release delays
// nothing. The fields need LogFormatPermitDelay.
func TestSemaphoreSlotDelay(t *testing.T) {
	f := New(nil)
	delayed := semAcquire("a", 2)
	delayed.LockDelayMillis = 5000
	a, _ := f.ApplyCommand(delayed, 1).(*PermitResult)
	if a == nil || a.Permit.LockDelayMillis != 5000 {
		t.Fatalf("permit %+v, want its lock-delay", a)
	}
	exp, _ := f.ApplyCommand(&entry.SemExpire{Semaphore: "s", Token: 1}, 2).(*SemReleaseResult)
	if exp == nil || exp.Delay == nil || exp.Delay.Since != 2 || exp.Held != 0 {
		t.Fatalf("expiry %+v, want a slot delay since 2", exp)
	}
	var buf bytes.Buffer
	if _, err := f.View().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g := New(nil)
	if err := g.Restore(io.NopCloser(&buf)); err != nil || !reflect.DeepEqual(g.Semaphore("s"), f.Semaphore("s")) || g.Digest() != f.Digest() {
		t.Fatalf("snapshot round trip: %v\n%+v\n%+v", err, g.Semaphore("s"), f.Semaphore("s"))
	}
	if st := g.Semaphore("s"); st.Limit != 2 || len(st.Delays) != 1 || len(st.Permits) != 0 {
		t.Fatalf("restored %+v, want the delayed slot and the limit", st)
	}
	if r, _ := f.ApplyCommand(semAcquire("b", 2), 3).(*PermitResult); r == nil {
		t.Fatal("the other slot was not granted")
	}
	var sd *refusal.SlotDelayError
	if err, _ := f.ApplyCommand(semAcquire("c", 2), 4).(error); !errors.As(err, &sd) || !errors.Is(err, refusal.ErrLockDelay) {
		t.Fatalf("acquire of the delayed slot: %v", err)
	}
	end, _ := f.ApplyCommand(&entry.EndDelay{Semaphore: "s", Since: 2, NextPermit: semAcquire("c", 2)}, 5).(*EndDelayResult)
	if end == nil || end.NextPermit == nil || end.NextPermit.Permit.Token != 5 || end.NextPermit.Held != 2 {
		t.Fatalf("end of the delay: %+v", end)
	}
	if err := f.ApplyCommand(&entry.SemRelease{Semaphore: "s", Token: 5, Lease: "l-c"}, 6); err == nil {
		t.Fatal("release result is nil")
	}
	if st := f.Semaphore("s"); len(st.Delays) != 0 {
		t.Fatalf("a release delayed its slot: %+v", st)
	}
	for _, cmd := range []entry.Command{delayed, &entry.EndDelay{Semaphore: "s", Since: 2}} {
		if _, err := entry.EncodeFormat(cmd, entry.LogFormatHistory); !errors.Is(err, entry.ErrFormatTooOld) {
			t.Fatalf("%T for members of format 4: %v", cmd, err)
		}
		data, err := entry.EncodeFormat(cmd, entry.LogFormatPermitDelay)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := entry.Decode(data); err != nil || !reflect.DeepEqual(back, cmd) {
			t.Fatalf("%T: decoded %+v (%v)", cmd, back, err)
		}
	}
}
