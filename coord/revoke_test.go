package coord

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// A revoke ends the grant now and hands the lock to the head waiter in
// the revoking entry; the lease is no longer timed, and the holder's
// renew and release are refused as revoked, as is a second revoke.
func TestRevokeHandsOffInTheRevokingEntry(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	a := mustAcquire(t, s, "l", "a", time.Minute)
	b := enqueue(t, s, "l", "b", time.Minute, 1)
	res, err := s.Revoke(bg, "l", a.Token)
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, b)
	log := f.log()
	rv, ok := log[len(log)-1].(*entry.Revoke)
	if got.err != nil || !ok || rv.Next == nil || got.res.Grant.Token != uint64(len(log)) || res.Next == nil || res.Next.Token != got.res.Grant.Token {
		t.Fatalf("last entry %#v, b's grant %+v (%v): want b granted by the revoke", log[len(log)-1], got.res.Grant, got.err)
	}
	if _, known := s.timers.Remaining(timed.LockKey("l"), a.Token); known {
		t.Fatal("the revoked grant's lease is still timed")
	}
	if _, err := s.Renew(bg, "l", a.Token, a.Lease); !errors.Is(err, refusal.ErrRevoked) {
		t.Fatalf("renewal of a revoked grant: %v, want revoked", err)
	}
	if err := s.Release(bg, "l", a.Token, a.Lease); !errors.Is(err, refusal.ErrRevoked) {
		t.Fatalf("release of a revoked grant: %v, want revoked", err)
	}
	if _, err := s.Revoke(bg, "l", a.Token); !errors.Is(err, refusal.ErrRevoked) {
		t.Fatalf("a second revoke: %v, want revoked", err)
	}
	if _, err := s.Revoke(bg, "l", 999); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("revoke of a token never granted: %v, want lease_lost", err)
	}
}

// A revoked grant with a lock-delay starts it and hands off to nobody;
// the waiter gets the lock in the delay's end, as after an expiry.
func TestRevokeHonoursTheLockDelay(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	res, err := s.Acquire(bg, AcquireRequest{Lock: "l", Holder: "a", TTL: time.Minute, LockDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := enqueue(t, s, "l", "b", time.Minute, 1)
	if _, err := s.Revoke(bg, "l", res.Grant.Token); err != nil {
		t.Fatal(err)
	}
	log := f.log()
	if rv := log[len(log)-1].(*entry.Revoke); rv.Next != nil {
		t.Fatalf("a revoke that starts a lock-delay offered %+v", rv.Next)
	}
	if isHeld(f, "l") || s.Waiters("l") != 1 {
		t.Fatal("the lock was granted in its lock-delay")
	}
	clock.Advance(time.Second)
	if got := receive(t, b); got.err != nil {
		t.Fatal(got.err)
	}
	if _, ok := f.log()[len(f.log())-1].(*entry.EndDelay); !ok {
		t.Fatalf("b not granted by the delay's end: %#v", f.log()[len(f.log())-1])
	}
}

// A permit's revoke frees its slot for the head waiter in that entry.
func TestRevokePermit(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	p, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: "a", Limit: 1, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.RevokePermit(bg, "s", p.Permit.Token)
	if err != nil || res.Freed.Token != p.Permit.Token {
		t.Fatalf("revoke: %+v %v", res, err)
	}
	if _, err := s.RenewPermit(bg, "s", p.Permit.Token, p.Permit.Lease); !errors.Is(err, refusal.ErrRevoked) {
		t.Fatalf("renewal of a revoked permit: %v, want revoked", err)
	}
	if st := f.fsm.Semaphore("s"); len(st.Permits) != 0 {
		t.Fatalf("permits after the revoke: %+v", st.Permits)
	}
}

// A session's revoke ends it and every grant under it in one entry, the
// first freed name going to its waiter there; its renewal is then
// refused as revoked, and its timer is gone.
func TestRevokeSessionEndsItsGrants(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	ss := mustSession(t, s, 3*time.Second)
	underSession(t, s, ss, "a")
	underSession(t, s, ss, "b")
	waitA := enqueue(t, s, "a", "wa", time.Minute, 1)
	rec, ended, err := s.RevokeSession(bg, ss.ID)
	if err != nil || rec.ID != ss.ID || len(ended) != 2 {
		t.Fatalf("revoke: %+v %+v %v", rec, ended, err)
	}
	if got := receive(t, waitA); got.err != nil {
		t.Fatal(got.err)
	}
	if isHeld(f, "b") {
		t.Fatal("b held after its session's revoke")
	}
	if _, err := s.RenewSession(bg, ss.ID, ss.Lease); !errors.Is(err, refusal.ErrRevoked) {
		t.Fatalf("renewal of a revoked session: %v, want revoked", err)
	}
	if _, known := s.timers.Remaining(timed.SessionKey(ss.ID), ss.ID); known {
		t.Fatal("the revoked session is still timed")
	}
	if _, _, err := s.RevokeSession(bg, ss.ID); !errors.Is(err, refusal.ErrRevoked) {
		t.Fatalf("a second revoke: %v", err)
	}
}

// While a member reads no revoke entries, a revoke is refused as
// upgrade_required, saying what to do, before anything is proposed (the
// encoder would refuse the entry too, without the advice), and writes
// nothing.
func TestRevokeNeedsTheLockModesFormat(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	a := mustAcquire(t, s, "l", "a", time.Minute)
	f.mu.Lock()
	f.format = entry.LogFormatSession
	f.mu.Unlock()
	before := len(f.log())
	if _, err := s.Revoke(bg, "l", a.Token); !errors.Is(err, entry.ErrFormatTooOld) || !strings.Contains(err.Error(), "upgrade every member first") {
		t.Fatalf("revoke at format 8: %v", err)
	}
	if _, _, err := s.RevokeSession(bg, 12345); !errors.Is(err, entry.ErrFormatTooOld) {
		t.Fatalf("session revoke at format 8: %v", err)
	}
	if len(f.log()) != before || !isHeld(f, "l") {
		t.Fatal("a refused revoke wrote the log")
	}
}

// One name of a multi-grant is not revoked alone: the others would stay
// held on its one lease, and a snapshot of a multi-grant missing a name is
// refused on restore. Refused multi_grant with no entry; every name still
// held. Fails with the engine's multi-grant check left out: the revoke
// frees x and leaves y held.
func TestRevokeRefusesOneNameOfAMultiGrant(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	m := mustMulti(t, s, "m", time.Minute, "x", "y")
	before := len(f.log())
	if _, err := s.Revoke(bg, "x", m.Token); !errors.Is(err, refusal.ErrMultiGrant) {
		t.Fatalf("revoke of one name of a multi-grant: %v", err)
	}
	if len(f.log()) != before || !isHeld(f, "x") || !isHeld(f, "y") {
		t.Fatal("a refused revoke wrote the log")
	}
}
