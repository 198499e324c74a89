package fsm

import (
	"errors"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// A grant publishes its value; SetValue changes it for the current grant
// only, keeps the token, and never writes for members that cannot read it.
func TestLockValue(t *testing.T) {
	f := New(nil)
	a := acquire("leader", "n1", "s1")
	a.Value = "10.0.0.1:80"
	g := mustGrant(t, f, a, 1)
	if g.Value != "10.0.0.1:80" {
		t.Fatalf("grant %+v", g)
	}
	if err, _ := f.ApplyCommand(&entry.SetValue{Lock: "leader", Token: 1, Lease: "wrong", Value: "x"}, 2).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("set value with a wrong lease: %v", err)
	}
	res, _ := f.ApplyCommand(&entry.SetValue{Lock: "leader", Token: 1, Lease: "s1", Value: "10.0.0.2:80"}, 3).(*SetValueResult)
	if cur, _ := f.Lock("leader"); res == nil || cur.Value != "10.0.0.2:80" || cur.Token != 1 {
		t.Fatalf("after set value: %+v %+v", res, cur)
	}
	if _, err := entry.EncodeFormat(a, entry.LogFormatPrincipal); !errors.Is(err, entry.ErrFormatTooOld) {
		t.Fatalf("an acquire with a value for older members: %v", err)
	}
}

// The events carry an election's value, and a lock granted by the end of a
// lock-delay is an acquired event like any other grant.
func TestValueAndDelayEvents(t *testing.T) {
	set := eventsOf(&entry.SetValue{}, &SetValueResult{Grant: entry.Lock{Name: "l", Holder: "h", Token: 3, Value: "v2"}}, 9, false)
	if len(set) != 1 || set[0].Type != event.ValueSet || set[0].Value != "v2" || set[0].Token != 3 {
		t.Fatalf("set value events %+v", set)
	}
	got := eventsOf(&entry.EndDelay{}, &EndDelayResult{Next: &entry.Lock{Name: "l", Holder: "w", Token: 10, Value: "v"}}, 10, false)
	if len(got) != 1 || got[0].Type != event.Acquired || got[0].Token != 10 || got[0].Value != "v" {
		t.Fatalf("end of delay events %+v", got)
	}
	if none := eventsOf(&entry.EndDelay{}, &EndDelayResult{}, 11, false); len(none) != 0 {
		t.Fatalf("an end of delay granting nothing: %+v", none)
	}
}
