package locktable

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// An entry packs a lock's strings into one; every field comes back, with
// empty and NUL-containing strings too, and the value, lock-delay and
// session packed after the secret (fails with the last two read as 0
// whatever the string holds: the entries with them come back without).
func TestEntryRoundTrip(t *testing.T) {
	for _, l := range []entry.Lock{
		{Name: "a", Holder: "w", Token: 1, Lease: "s", TTLMillis: 2},
		{Name: "a\x00b", Holder: "\x00", Token: 1 << 50, Lease: strings.Repeat("f", 32), TTLMillis: 1 << 40, RequestID: "r\x00", GrantedAtMillis: -3},
		{Name: "n", Token: 9, TTLMillis: 1},
		{Name: "p", Holder: "w", Token: 3, Lease: "s", TTLMillis: 2, RequestID: "r", Principal: "ci"},
		{Name: "p", Token: 3, TTLMillis: 2, Principal: "\x00x"},
		{Name: "q", Holder: "h", Token: 4, Lease: "s", TTLMillis: 2, Principal: "c"},
		{Name: "v", Holder: "h", Token: 5, Lease: "s", TTLMillis: 2, Value: "\x00val\x00"},
		{Name: "d", Holder: "h", Token: 6, Lease: "s", TTLMillis: 2, LockDelayMillis: -1},
		{Name: "u", Holder: "h", Token: 7, Lease: "", TTLMillis: 2, Session: 1<<64 - 1, Value: strings.Repeat("\xff", 16)},
		{Name: "w", Holder: "h", Token: 8, Lease: "s", TTLMillis: 2, RequestID: "r", Principal: "p", LockDelayMillis: 1 << 62, Session: 3, Value: "v"},
	} {
		e := NewEntry(&l)
		if got := e.Lock(); got != l {
			t.Errorf("round trip of %+v: %+v", l, got)
		}
		if e.RequestKey() != RequestKey(l.Name, l.Holder, l.RequestID, l.Principal) {
			t.Errorf("request key of %+v: %q", l, e.RequestKey())
		}
	}
}

// A snapshot's record packs into the same entry as the lock it holds.
func TestEntryOfRecord(t *testing.T) {
	l := entry.Lock{Name: "p", Holder: "w", Token: 3, Lease: "s", TTLMillis: 2, RequestID: "r", GrantedAtMillis: 4, Principal: "ci", LockDelayMillis: 5, Value: "v"}
	r := snapshot.LockRecord{Name: []byte(l.Name), Holder: []byte(l.Holder), Lease: []byte(l.Lease), RequestID: []byte(l.RequestID),
		Principal: []byte(l.Principal), Value: []byte(l.Value), Token: l.Token, TTLMillis: l.TTLMillis, GrantedAtMillis: l.GrantedAtMillis, LockDelayMillis: l.LockDelayMillis}
	if got := EntryOf(&r).Lock(); got != l {
		t.Fatalf("%+v", got)
	}
}

// An entry is 64 bytes, the allocator's size class below the 96 it took
// with the lock-delay, session and value in fields of their own (fails
// with a field added back: 72 bytes).
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(Entry{}); n != 64 {
		t.Fatalf("Entry is %d bytes", n)
	}
}

// The table counts each holder's locks as grants come and go.
func TestTableCountsHolders(t *testing.T) {
	tb := New(0)
	a := NewEntry(&entry.Lock{Name: "a", Holder: "w", Token: 1})
	b := NewEntry(&entry.Lock{Name: "b", Holder: "w", Token: 2})
	tb.Add(a)
	tb.Add(b)
	tb.Replace(NewEntry(&entry.Lock{Name: "b", Holder: "w", Token: 2, Value: "x"}))
	if tb.Len() != 2 || tb.HeldBy("w") != 2 {
		t.Fatalf("%d locks, %d by w", tb.Len(), tb.HeldBy("w"))
	}
	tb.Remove(a)
	tb.Remove(b)
	if tb.Len() != 0 || tb.HeldBy("w") != 0 || len(tb.byHolder) != 0 {
		t.Fatalf("%d locks, %d by w, %d holders", tb.Len(), tb.HeldBy("w"), len(tb.byHolder))
	}
}

// An entry costs two allocations, its string and itself, from a Lock and
// from a record alike (a restore of a million locks makes a million).
func TestEntryAllocations(t *testing.T) {
	l := entry.Lock{Name: strings.Repeat("n", 80), Holder: strings.Repeat("h", 40), Token: 3, Lease: strings.Repeat("s", 32), TTLMillis: 2, RequestID: "r", Principal: "ci"}
	r := snapshot.LockRecord{Name: []byte(l.Name), Holder: []byte(l.Holder), Lease: []byte(l.Lease), RequestID: []byte(l.RequestID), Principal: []byte(l.Principal), Token: 3, TTLMillis: 2}
	var e *Entry
	if n := testing.AllocsPerRun(100, func() { e = NewEntry(&l) }); n > 2 {
		t.Errorf("NewEntry: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { e = EntryOf(&r) }); n > 2 {
		t.Errorf("EntryOf: %v allocations", n)
	}
	_ = e
}
