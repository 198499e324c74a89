package grants

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/fencer-io/fencer/fsm/entry"
)

// fill grants locks l0..l(locks-1) in turn, n grants in all, tokens 1..n.
func fill(h *History, locks, n int) {
	for i := 1; i <= n; i++ {
		h.Granted(Grant{Token: uint64(i), Granted: uint64(i), Name: fmt.Sprintf("l%d", (i-1)%locks), Holder: "w"})
		if i > 1 {
			h.Ended(OfLock, fmt.Sprintf("l%d", (i-2)%locks), uint64(i-1), uint64(i), Released)
		}
	}
}

func TestBounds(t *testing.T) {
	h := New(entry.GrantHistorySettings{Global: 4, PerLock: 2}, 1)
	fill(h, 6, 30)
	c := h.Capture()
	if c.RingLen() != 4 || h.From() != 27 {
		t.Fatalf("ring of %d from %d, want 4 from 27", c.RingLen(), h.From())
	}
	if len(h.locks) != 4 {
		t.Fatalf("%d locks kept, want the 4 granted last", len(h.locks))
	}
	// l2..l5 were granted at 27..30; l1, last granted at 26, is forgotten,
	// and so are their grants before: four other locks came in between.
	if got := h.Last(OfLock, "l5", 9); len(got) != 1 || got[0].Token != 30 {
		t.Fatalf("l5: %+v", got)
	}
	if got := h.Last(OfLock, "l1", 9); got != nil {
		t.Fatalf("l1 kept: %+v", got)
	}
	if g := h.Find(28); g == nil || g.Name != "l3" || g.Way != Released || g.Ended != 29 {
		t.Fatalf("token 28: %+v", g)
	}
	if h.Find(26) != nil {
		t.Fatal("token 26 is older than the ring")
	}
	// Per lock: its last PerLock grants, beyond the ring.
	h = New(entry.GrantHistorySettings{Global: 4, PerLock: 2}, 1)
	fill(h, 2, 30)
	h.Granted(Grant{Token: 31, Name: "other"})
	h.Granted(Grant{Token: 32, Name: "other"})
	if got := h.Last(OfLock, "l1", 9); len(got) != 2 || got[0].Token != 30 || got[1].Token != 28 || got[1].Ended != entry.EndReleased || got[1].EndedIndex != 29 {
		t.Fatalf("l1: %+v", got)
	}
}

// A history rebuilt from its records is the history it was, and one
// resized keeps what its new settings keep of it.
func TestRebuildAndResize(t *testing.T) {
	cfg := entry.GrantHistorySettings{Global: 5, PerLock: 3}
	h := New(cfg, 1)
	fill(h, 3, 40)
	c := h.Capture()
	back := Rebuild(cfg, h.From(), c.Records(), c.RingLen(), nil)
	if !reflect.DeepEqual(back.Capture().Records(), h.Capture().Records()) || back.From() != h.From() {
		t.Fatal("rebuilt history differs")
	}
	for _, l := range []string{"l0", "l1", "l2"} {
		if !reflect.DeepEqual(back.Last(OfLock, l, 9), h.Last(OfLock, l, 9)) {
			t.Fatalf("%s: %+v, was %+v", l, back.Last(OfLock, l, 9), h.Last(OfLock, l, 9))
		}
	}
	small := h.Resize(entry.GrantHistorySettings{Global: 2, PerLock: 1})
	if c := small.Capture(); c.RingLen() != 2 || c.Len() != 2 || small.From() != 39 {
		t.Fatalf("resized: ring %d of %d from %d", c.RingLen(), c.Len(), small.From())
	}
	if got := small.Last(OfLock, "l0", 9); len(got) != 1 || got[0].Token != 40 {
		t.Fatalf("l0 resized: %+v", got)
	}
}

// A lock and a semaphore of one name keep histories of their own, counted
// together against Global; permits end in any order; a Grant stays in 64
// bytes with its kind.
func TestPermitsBesideLocks(t *testing.T) {
	if n := unsafe.Sizeof(Grant{}); n != 64 {
		t.Fatalf("a Grant takes %d bytes", n)
	}
	h := New(entry.GrantHistorySettings{Global: 3, PerLock: 2, Permits: true}, 1)
	h.Granted(Grant{Token: 1, Granted: 1, Name: "s", Holder: "a", Kind: OfPermit})
	h.Granted(Grant{Token: 2, Granted: 2, Name: "s", Holder: "b", Kind: OfPermit})
	h.Granted(Grant{Token: 3, Granted: 3, Name: "s", Holder: "w"})
	h.Ended(OfPermit, "s", 1, 4, Released) // the older permit ends first
	h.Ended(OfLock, "s", 2, 4, Released)   // not the lock's: nothing
	if got := h.Last(OfPermit, "s", 9); len(got) != 2 || got[1].Ended != entry.EndReleased || got[0].Ended != "" || got[0].Semaphore != "s" || got[0].Lock != "" {
		t.Fatalf("semaphore s: %+v", got)
	}
	if got := h.Last(OfLock, "s", 9); len(got) != 1 || got[0].Lock != "s" || got[0].Semaphore != "" {
		t.Fatalf("lock s: %+v", got)
	}
	if g := h.Find(1); g == nil || g.Record().Semaphore != "s" || g.Way != Released {
		t.Fatalf("token 1: %+v", g)
	}
	h.Granted(Grant{Token: 5, Name: "x"})
	h.Granted(Grant{Token: 6, Name: "y"})
	if got := h.Last(OfPermit, "s", 9); got != nil {
		t.Fatalf("semaphore s kept with 3 names granted since: %+v", got)
	}
	c := h.Capture()
	back := Rebuild(h.Settings(), h.From(), c.Records(), c.RingLen(), nil)
	if !reflect.DeepEqual(back.Capture().Records(), c.Records()) || back.Last(OfLock, "s", 9) == nil {
		t.Fatal("rebuilt history differs")
	}
}

// A multi-grant is one record in the ring and in a capture (under its
// first name, with its names), and every name's history shows it, ended
// as each name ends; a rebuild keeps it so; its names are forgotten with
// its last copy.
func TestMultiGrantInEveryNamesHistory(t *testing.T) {
	h := New(entry.GrantHistorySettings{Global: 4, PerLock: 2}, 1)
	h.Granted(Grant{Token: 1, Granted: 1, Name: "a", Holder: "x"})
	h.GrantedMulti(Grant{Token: 2, Granted: 2, Name: "b", Holder: "m"}, []string{"b", "a", "c"})
	for _, n := range []string{"b", "a", "c"} {
		h.Ended(OfLock, n, 2, 3, Released)
	}
	for _, n := range []string{"a", "b", "c"} {
		got := h.Last(OfLock, n, 9)
		if len(got) == 0 || got[0].Token != 2 || got[0].Lock != n || got[0].Ended != entry.EndReleased || !slices.Equal(got[0].Names, []string{"b", "a", "c"}) {
			t.Fatalf("%s's history: %+v", n, got)
		}
	}
	c := h.Capture()
	recs := c.Records()
	if c.RingLen() != 2 || len(recs) != 2 || recs[1].Lock != "b" || len(recs[1].Names) != 3 {
		t.Fatalf("captured %+v, want the multi-grant once", recs)
	}
	back := Rebuild(h.Settings(), h.From(), recs, c.RingLen(), nil)
	if !reflect.DeepEqual(back.Capture().Records(), recs) || !reflect.DeepEqual(back.Last(OfLock, "c", 9), h.Last(OfLock, "c", 9)) {
		t.Fatal("rebuilt history differs")
	}
	for tok := uint64(3); tok < 12; tok++ { // the ring and every name move past it
		h.Granted(Grant{Token: tok, Granted: tok, Name: []string{"a", "b", "c"}[tok%3]})
	}
	if len(h.multis) != 0 {
		t.Fatalf("names kept of %d multi-grants no longer kept", len(h.multis))
	}
}
