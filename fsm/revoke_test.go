package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// A lock's revoke ends the grant as an expiry would and hands the lock to
// the waiter it carries in the same entry; the history says revoked, the
// events handed_off with reason revoked, the token is remembered, and a
// second revoke, a stale write and a revoke of a token never held are
// refused.
func TestRevokeLockHandsOffInTheSameEntry(t *testing.T) {
	l := newEntryLog(t)
	l.settings(entry.GrantHistorySettings{PerLock: 4, Global: 16})
	rec := &recorder{}
	l.f.Observe(rec)
	held := l.grantLock("a", "victim")
	put := func(token uint64) any {
		return l.apply(&entry.Put{Key: "k", Value: []byte("v"), Token: token, Lock: "a"})
	}
	if _, ok := put(held.Token).(*PutResult); !ok {
		t.Fatal("the holder's write refused before the revoke")
	}
	rec.events = nil
	r, ok := l.apply(&entry.Revoke{Lock: "a", Token: held.Token, Next: acquire("a", "next", "n")}).(*RevokeResult)
	if !ok || r.Lock == nil || r.Lock.Next == nil || r.Lock.Next.Token != l.index {
		t.Fatalf("revoke: %+v", r)
	}
	if !l.f.Revoked(held.Token) || l.f.Revoked(r.Lock.Next.Token) {
		t.Fatal("the revoked token is not remembered, or the next one is")
	}
	if got := rec.events; len(got) != 1 || got[0].Type != event.HandedOff || got[0].Reason != event.Revoked || got[0].PrevToken != held.Token {
		t.Fatalf("events %+v", got)
	}
	if g, _ := l.lookup(held.Token); g.Ended != entry.EndRevoked || g.EndedIndex != l.index {
		t.Fatalf("history of the revoked grant: %+v", g)
	}
	if err, _ := put(held.Token).(error); !errors.Is(err, refusal.ErrNotLockHolder) {
		t.Fatalf("the revoked holder's write: %v", err)
	}
	if err, _ := l.apply(&entry.Revoke{Lock: "a", Token: held.Token}).(error); !errors.Is(err, refusal.ErrRevoked) {
		t.Fatalf("a second revoke: %v", err)
	}
	if err, _ := l.apply(&entry.Revoke{Lock: "a", Token: 99}).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("a revoke of a token never held: %v", err)
	}
	for _, bad := range []*entry.Revoke{{Lock: "a"}, {Lock: "a", Semaphore: "s", Token: 1}, {Session: 1, Token: 1}, {}} {
		if err, _ := l.apply(bad).(error); !errors.Is(err, entry.ErrMalformedCommand) {
			t.Errorf("revoke %+v: %v", bad, err)
		}
	}
}

// A revoked grant with a lock-delay starts it, as an expiry: nobody gets
// the lock, not even a waiter offered in the entry; a permit's slot alike.
func TestRevokeStartsTheLockDelay(t *testing.T) {
	f := New(nil)
	delayed := acquire("a", "victim", "l")
	delayed.LockDelayMillis = 500
	g := mustGrant(t, f, delayed, 1)
	r, ok := f.ApplyCommand(&entry.Revoke{Lock: "a", Token: g.Token, Next: acquire("a", "next", "n")}, 2).(*RevokeResult)
	if !ok || r.Lock.Delay == nil || r.Lock.Next != nil || r.Lock.NextErr == nil {
		t.Fatalf("revoke of a delayed grant: %+v", r.Lock)
	}
	if _, delayedNow := f.Delay("a"); !delayedNow {
		t.Fatal("no lock-delay after the revoke")
	}
	p := semAcquire("w", 1)
	p.LockDelayMillis = 300
	if _, ok := f.ApplyCommand(p, 3).(*PermitResult); !ok {
		t.Fatal("permit refused")
	}
	pr, ok := f.ApplyCommand(&entry.Revoke{Semaphore: "s", Token: 3}, 4).(*RevokeResult)
	if !ok || pr.Permit == nil || pr.Permit.Delay == nil || len(f.Semaphore("s").Delays) != 1 {
		t.Fatalf("revoke of a delayed permit: %+v", pr)
	}
	if err, _ := f.ApplyCommand(semAcquire("x", 1), 5).(error); err == nil {
		t.Fatal("a permit granted in the revoked slot's delay")
	}
}

// A session's revoke ends it and every grant under it in one entry, each
// grant's event revoked and the session's last; the session and its
// grants are remembered as revoked, and an acquire under it is refused.
func TestRevokeSessionEndsEveryGrant(t *testing.T) {
	f := New(nil)
	rec := &recorder{}
	f.Observe(rec)
	sess := openSession(t, f, 1, 0)
	a := mustGrant(t, f, &entry.Acquire{Lock: "a", Holder: "svc", Lease: "l-a", Session: sess.ID, SessionLease: "sess-secret"}, 2)
	if _, ok := f.ApplyCommand(&entry.SemAcquire{Semaphore: "s", Holder: "svc", Lease: "p", Limit: 2, Session: sess.ID, SessionLease: "sess-secret"}, 3).(*PermitResult); !ok {
		t.Fatal("permit under the session refused")
	}
	rec.events = nil
	r, ok := f.ApplyCommand(&entry.Revoke{Session: sess.ID, Next: acquire("a", "next", "n")}, 4).(*RevokeResult)
	if !ok || r.Session == nil || !r.Session.Revoked || len(r.Session.Locks) != 1 || len(r.Session.Permits) != 1 || r.Session.Locks[0].Next == nil {
		t.Fatalf("session revoke: %+v", r)
	}
	var types []string
	for _, e := range rec.events {
		types = append(types, e.Type+"/"+e.Reason)
	}
	if want := []string{"handed_off/revoked", "revoked/", "revoked/"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	if last := rec.events[2]; last.Session != sess.ID || last.Lock != "" || last.Semaphore != "" {
		t.Fatalf("the session's own event: %+v", last)
	}
	for _, tok := range []uint64{sess.ID, a.Token, 3} {
		if !f.Revoked(tok) {
			t.Errorf("token %d not remembered as revoked", tok)
		}
	}
	if err, _ := f.ApplyCommand(&entry.Acquire{Lock: "b", Holder: "svc", Lease: "l", Session: sess.ID, SessionLease: "sess-secret"}, 5).(error); !errors.Is(err, refusal.ErrSessionExpired) {
		t.Fatalf("acquire under a revoked session: %v", err)
	}
	if err, _ := f.ApplyCommand(&entry.Revoke{Session: sess.ID}, 6).(error); !errors.Is(err, refusal.ErrRevoked) {
		t.Fatalf("a second revoke of the session: %v", err)
	}
	if err, _ := f.ApplyCommand(&entry.Revoke{Session: 77}, 7).(error); !errors.Is(err, refusal.ErrUnknownSession) {
		t.Fatalf("revoke of an unknown session: %v", err)
	}
}

// goldenV6Revoke is the state behind testdata/snapshot-v6-revoke.golden:
// a lock revoked with a hand-off, a permit revoked with a lock-delay, and
// a session revoked with its lock, in a history that records them.
func goldenV6Revoke(t *testing.T) *FSM {
	l := newEntryLog(t)
	l.apply(&entry.SetClusterID{ID: "c6"})
	l.settings(entry.GrantHistorySettings{PerLock: 3, Global: 16, Permits: true})
	a := l.grantLock("a", "victim")
	l.apply(&entry.Revoke{Lock: "a", Token: a.Token, Next: &entry.Acquire{Lock: "a", Holder: "next", Lease: "l-next", TTLMillis: 1000}})
	p := l.apply(&entry.SemAcquire{Semaphore: "pool", Holder: "w", Lease: "p-w", TTLMillis: 1000, Limit: 2, LockDelayMillis: 400}).(*PermitResult)
	l.apply(&entry.Revoke{Semaphore: "pool", Token: p.Permit.Token})
	sess := l.apply(&entry.SessionCreate{Holder: "svc", Lease: "s-svc", TTLMillis: 4000, RequestID: "req-svc"}).(*SessionResult).Session
	l.apply(&entry.Acquire{Lock: "b", Holder: "svc", Lease: "l-b", Session: sess.ID, SessionLease: sess.Lease})
	l.apply(&entry.Revoke{Session: sess.ID})
	return l.f
}

// A version-6 snapshot with revokes restores to the same state and is
// written byte for byte; a revoked token that is live, or a grant ended
// revoked in a state that remembers none, is refused.
// FENCER_WRITE_GOLDEN=1 rewrites the file.
func TestSnapshotV6RevokeGolden(t *testing.T) {
	f := goldenV6Revoke(t)
	golden, g := checkGolden(t, f, "snapshot-v6-revoke", `"version":6,`, `"revoked":4`, `{"revoked":`, `"ended":"revoked"`)
	if !g.Revoked(3) {
		t.Fatal("the restored state forgot a revoke")
	}
	for name, bad := range map[string][]byte{
		"a live revoked token": bytes.Replace(golden, []byte(`{"revoked":3}`), []byte(`{"revoked":4}`), 1),
		"no revoke remembered": bytes.Replace(bytes.ReplaceAll(golden, []byte("{\"revoked\":"), []byte("{\"ended_session\":")), []byte(`"revoked":4`), []byte(`"ended_sessions":4`), 1),
	} {
		if bytes.Equal(bad, golden) {
			t.Fatalf("%s: the golden was not changed", name)
		}
		if err := New(nil).Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
}
