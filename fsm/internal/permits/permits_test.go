package permits

import (
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
)

// A semaphore is kept while a permit is held or a slot delayed, and no
// longer; the table counts the permits held in all.
func TestSemaphoreLivesWhileASlotIsTaken(t *testing.T) {
	tb := New()
	p1 := &entry.Permit{Semaphore: "s", Token: 1, Limit: 2}
	p2 := &entry.Permit{Semaphore: "s", Token: 2, Limit: 2}
	tb.Add(p1)
	tb.Add(p2)
	tb.Add(&entry.Permit{Semaphore: "t", Token: 3, Limit: 1})
	if tb.Held() != 3 || tb.Len() != 2 || tb.Get("s").Limit() != 2 || tb.Get("s").Held() != 2 {
		t.Fatalf("held %d in %d semaphores", tb.Held(), tb.Len())
	}
	tb.AddSlotDelay(entry.Delay{Semaphore: "s", Since: 4, Millis: 10, Limit: 2})
	tb.Remove(p1)
	tb.Remove(p2)
	if sem := tb.Get("s"); sem == nil || sem.InUse() != 1 || sem.Delayed() != 1 || tb.Held() != 1 {
		t.Fatalf("a delayed slot must keep its semaphore: %+v", sem)
	}
	if got := tb.Permits(); len(got) != 1 || got[0].Token != 3 {
		t.Fatalf("permits: %+v", got)
	}
	if _, ok := tb.EndSlotDelay("s", 5); ok {
		t.Fatal("ended a delay that does not exist")
	}
	if d, ok := tb.EndSlotDelay("s", 4); !ok || d.Millis != 10 {
		t.Fatalf("end: %+v %v", d, ok)
	}
	if tb.Get("s") != nil || tb.Len() != 1 || len(tb.SlotDelays()) != 0 {
		t.Fatalf("an empty semaphore is kept: %v", tb.Names())
	}
}
