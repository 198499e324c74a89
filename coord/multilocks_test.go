package coord

import (
	"errors"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

func mustMulti(t *testing.T, s *Service, holder string, ttl time.Duration, names ...string) fsm.MultiGrant {
	t.Helper()
	r, err := s.MultiAcquire(bg, MultiAcquireRequest{Names: names, Holder: holder, TTL: ttl})
	if err != nil {
		t.Fatalf("multi-acquire %v: %v", names, err)
	}
	return r.Grant
}

// A multi-acquire is one entry granting every name; one that meets a held
// name is refused naming it, with no entry; its one lease is renewed once
// (directly or through any name) and expires in one entry, when its TTL
// runs out on the leader's clock and not before.
func TestMultiAcquireExpiresInOneEntry(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	mustAcquire(t, s, "x", "other", time.Minute)
	before := len(f.log())
	g := mustMulti(t, s, "w", 3*time.Second, "a", "b", "c")
	if len(f.log()) != before+1 {
		t.Fatalf("%d entries for one multi-acquire", len(f.log())-before)
	}
	before = len(f.log())
	_, err := s.MultiAcquire(bg, MultiAcquireRequest{Names: []string{"d", "x", "a"}, Holder: "v", TTL: time.Second})
	var held *refusal.HeldError
	if !errors.As(err, &held) || held.Lock != "x" || len(f.log()) != before || isHeld(f, "d") {
		t.Fatalf("multi-acquire over a held name: %v (%d entries)", err, len(f.log())-before)
	}
	if s.timers.Len() != 2 { // x's and the multi-grant's: one for a, b, c
		t.Fatalf("%d leases timed, want 2", s.timers.Len())
	}
	clock.Advance(2 * time.Second)
	if _, err := s.RenewMulti(bg, g.Token, g.Lease); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if _, err := s.Renew(bg, "b", g.Token, g.Lease); err != nil { // through a name
		t.Fatal(err)
	}
	if _, err := s.RenewMulti(bg, g.Token, "0123456789abcdef0123456789abcdef"); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("renewal with a wrong secret: %v", err)
	}
	st, _ := s.Lock(bg, "c", false)
	if !st.Known || st.Remaining != 3*time.Second {
		t.Fatalf("a name's lease: %v known %v, want the multi-grant's 3s", st.Remaining, st.Known)
	}
	clock.Advance(2999 * time.Millisecond)
	if !isHeld(f, "a") || !isHeld(f, "c") {
		t.Fatal("the multi-grant ended before its TTL")
	}
	clock.Advance(time.Millisecond)
	poll(t, "the expiry", func() bool { return !isHeld(f, "a") && !isHeld(f, "b") && !isHeld(f, "c") })
	end, ok := f.log()[len(f.log())-1].(*entry.MultiRelease)
	if !ok || !end.Expired || end.Token != g.Token {
		t.Fatalf("last entry %#v, want the multi-grant's expiry", f.log()[len(f.log())-1])
	}
}

// A release ends every name in one entry, then each freed name goes to its
// waiters in the entries right after, before anything else is written. A
// name cannot be released alone.
func TestMultiReleaseServesEachNamesWaiters(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	g := mustMulti(t, s, "w", time.Minute, "b", "a")
	if err := s.Release(bg, "a", g.Token, g.Lease); !errors.Is(err, refusal.ErrMultiGrant) {
		t.Fatalf("release of one name: %v", err)
	}
	waitA := enqueue(t, s, "a", "wa", time.Minute, 1)
	waitB := enqueue(t, s, "b", "wb", time.Minute, 1)
	before := len(f.log())
	if _, err := s.ReleaseMulti(bg, g.Token, g.Lease); err != nil {
		t.Fatal(err)
	}
	ga, gb := receive(t, waitA), receive(t, waitB)
	if ga.err != nil || gb.err != nil {
		t.Fatalf("waiters: %v %v", ga.err, gb.err)
	}
	log := f.log()[before:]
	if len(log) != 3 {
		t.Fatalf("%d entries after the release, want the release and two grants", len(log))
	}
	if r, ok := log[0].(*entry.MultiRelease); !ok || r.Token != g.Token {
		t.Fatalf("first entry %#v", log[0])
	}
	for _, e := range log[1:] {
		if a, ok := e.(*entry.Acquire); !ok || (a.Holder != "wa" && a.Holder != "wb") {
			t.Fatalf("entry after the release: %#v, want a waiter's grant", e)
		}
	}
	if _, err := s.ReleaseMulti(bg, g.Token, g.Lease); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("second release: %v", err)
	}
}

// A new leader restarts a multi-grant's one lease at full TTL; a member
// that reads no multi-locks' entries refuses them.
func TestMultiLeaseAcrossPromotionAndFormat(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	g := mustMulti(t, s, "w", 10*time.Second, "a", "b")
	clock.Advance(8 * time.Second)
	f.setLeader(false)
	poll(t, "demotion", func() bool { return s.timers.Len() == 0 })
	f.setLeader(true)
	waitReady(t, s)
	if s.timers.Len() != 1 {
		t.Fatalf("%d leases timed after the promotion, want the multi-grant's one", s.timers.Len())
	}
	clock.Advance(9999 * time.Millisecond)
	if !isHeld(f, "a") {
		t.Fatal("a multi-grant ended before a full TTL after the promotion")
	}
	clock.Advance(time.Millisecond)
	poll(t, "the expiry", func() bool { return !isHeld(f, "a") && !isHeld(f, "b") && !f.fsm.IsMulti(g.Token) })

	f.mu.Lock()
	f.format = entry.LogFormatSession
	f.mu.Unlock()
	if _, err := s.MultiAcquire(bg, MultiAcquireRequest{Names: []string{"a"}, Holder: "w", TTL: time.Second}); !errors.Is(err, entry.ErrFormatTooOld) {
		t.Fatalf("multi-acquire in format %d: %v", entry.LogFormatSession, err)
	}
}

// A shared multi-grant's names have its one lease, restarted once by a
// new leader (no shared grant's timer per name); a shared multi-acquire
// is refused below LogFormatMultiModes, before any entry, while an
// exclusive one is still written.
// Fails with timed.All's shared loop timing multi-grants' names too: three
// leases after the promotion. Fails with multiReadable ignoring the mode
// and fieldsFormat's MultiAcquire clause removed: the shared multi-acquire
// is granted in format 10 (with multiReadable's alone ignored, the
// encoder still refuses it, ErrFormatTooOld, and no entry is written).
func TestSharedMultiLeaseAndFormat(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	r, err := s.MultiAcquire(bg, MultiAcquireRequest{Names: []string{"a", "b"}, Holder: "w", TTL: 10 * time.Second, Mode: entry.ModeShared})
	if err != nil || r.Grant.Mode != entry.ModeShared {
		t.Fatalf("shared multi-acquire: %+v %v", r, err)
	}
	f.setLeader(false)
	poll(t, "demotion", func() bool { return s.timers.Len() == 0 })
	f.setLeader(true)
	waitReady(t, s)
	if s.timers.Len() != 1 {
		t.Fatalf("%d leases timed after the promotion, want the shared multi-grant's one", s.timers.Len())
	}
	f.mu.Lock()
	f.format = entry.LogFormatDurableWaits
	f.mu.Unlock()
	before := len(f.log())
	if _, err := s.MultiAcquire(bg, MultiAcquireRequest{Names: []string{"c"}, Holder: "w", TTL: time.Second, Mode: entry.ModeShared}); !errors.Is(err, entry.ErrFormatTooOld) {
		t.Fatalf("shared multi-acquire in format %d: %v", entry.LogFormatDurableWaits, err)
	}
	if len(f.log()) != before {
		t.Fatal("a refused shared multi-acquire wrote an entry")
	}
	if _, err := s.MultiAcquire(bg, MultiAcquireRequest{Names: []string{"c"}, Holder: "w", TTL: time.Second}); err != nil {
		t.Fatalf("exclusive multi-acquire in format %d: %v", entry.LogFormatDurableWaits, err)
	}
}
