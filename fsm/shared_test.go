package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

func shared(lock, holder, lease string) *entry.Acquire {
	c := acquire(lock, holder, lease)
	c.Mode = entry.ModeShared
	return c
}

// Shared grants of a lock are held at once, each with its own token (its
// entry's index); an exclusive acquire is refused while any is held, and
// a shared one while the exclusive grant is; an exclusive grant after the
// shared ones has a greater token than all of them.
func TestSharedGrantsCoexistExclusiveWaits(t *testing.T) {
	f := New(nil)
	r1 := mustGrant(t, f, shared("a", "r1", "s1"), 3)
	r2 := mustGrant(t, f, shared("a", "r2", "s2"), 4)
	if r1.Token != 3 || r2.Token != 4 || r1.Mode != entry.ModeShared {
		t.Fatalf("shared grants %+v %+v", r1, r2)
	}
	err, _ := f.ApplyCommand(acquire("a", "w", "x"), 5).(error)
	var held *refusal.HeldError
	if !errors.As(err, &held) || held.Shared != 2 || held.Token != 4 {
		t.Fatalf("exclusive acquire of a shared lock: %v", err)
	}
	if _, ok := f.Lock("a"); ok {
		t.Fatal("a shared lock reads as held exclusively")
	}
	if got := f.SharedLocks("a"); len(got) != 2 || got[0].Token != 3 || got[1].Token != 4 {
		t.Fatalf("shared grants read %+v", got)
	}
	// The last shared release hands the lock to the exclusive waiter in
	// its entry, above every shared token.
	if _, ok := f.ApplyCommand(&entry.Release{Lock: "a", Token: 3, Lease: "s1"}, 6).(*ReleaseResult); !ok {
		t.Fatal("release of a shared grant refused")
	}
	res, ok := f.ApplyCommand(&entry.Release{Lock: "a", Token: 4, Lease: "s2", Next: acquire("", "w", "x")}, 7).(*ReleaseResult)
	if !ok || res.Next == nil || res.Next.Token != 7 || res.Freed.Mode != entry.ModeShared {
		t.Fatalf("last shared release: %+v", res)
	}
	err, _ = f.ApplyCommand(shared("a", "r3", "s3"), 8).(error)
	if !errors.As(err, &held) || held.Shared != 0 || held.Holder != "w" {
		t.Fatalf("shared acquire of an exclusive lock: %v", err)
	}
}

// Only the exclusive grant writes under the lock: a shared grant's put is
// refused as not the holder, saying a shared grant cannot write.
func TestSharedGrantCannotWrite(t *testing.T) {
	f := New(nil)
	mustGrant(t, f, shared("a", "r", "s"), 2)
	err, _ := f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("v"), Token: 2, Lock: "a"}, 3).(error)
	var nh *refusal.NotHolderError
	if !errors.As(err, &nh) || !nh.Shared || !strings.Contains(err.Error(), "shared grant cannot write") {
		t.Fatalf("a shared grant's fenced put: %v", err)
	}
}

// A shared grant's expiry with a lock-delay delays the lock for every
// mode; a second one restarts the delay at its entry with the longer of
// the two lengths; a retried request gets its shared grant back.
func TestSharedExpiryDelaysEveryMode(t *testing.T) {
	f := New(nil)
	a := shared("a", "r1", "s1")
	a.LockDelayMillis, a.RequestID = 900, "q1"
	mustGrant(t, f, a, 2)
	b := shared("a", "r2", "s2")
	b.LockDelayMillis = 300
	mustGrant(t, f, b, 3)
	if again := mustGrant(t, f, a, 4); again.Token != 2 {
		t.Fatalf("retried shared request: %+v", again)
	}
	f.ApplyCommand(&entry.Expire{Lock: "a", Token: 2}, 5)
	if err, _ := f.ApplyCommand(shared("a", "r3", "s3"), 6).(error); !errors.Is(err, refusal.ErrLockDelay) {
		t.Fatalf("shared acquire in a shared grant's lock-delay: %v", err)
	}
	f.ApplyCommand(&entry.Expire{Lock: "a", Token: 3}, 7)
	if d, ok := f.Delay("a"); !ok || d.Since != 7 || d.Millis != 900 {
		t.Fatalf("delay after the second expiry: %+v %v", d, ok)
	}
	for _, c := range []*entry.Acquire{shared("a", "r3", "s3"), acquire("a", "w", "x")} {
		if err, _ := f.ApplyCommand(c, 8).(error); !errors.Is(err, refusal.ErrLockDelay) {
			t.Fatalf("acquire (mode %q) in a shared grant's lock-delay: %v", c.Mode, err)
		}
	}
	roundTrip(t, f)
}

// A session holding two shared grants of one lock hands it to the waiter
// its end carries with the last of them, once the lock has room.
func TestSessionEndHandsSharedLockOnceFree(t *testing.T) {
	f := New(nil)
	sess := openSession(t, f, 1, 0)
	for i, lease := range []string{"l1", "l2"} {
		c := shared("a", "svc", lease)
		c.Session, c.SessionLease = sess.ID, "sess-secret"
		mustGrant(t, f, c, uint64(2+i))
	}
	res, ok := f.ApplyCommand(&entry.SessionEnd{Session: sess.ID, Lease: "sess-secret", Next: []*entry.Acquire{acquire("a", "w", "x")}}, 4).(*SessionEndResult)
	if !ok || len(res.Locks) != 2 || res.Locks[0].Next != nil || res.Locks[0].NextErr != nil || res.Locks[1].Next == nil || res.Locks[1].NextErr != nil {
		t.Fatalf("session end: %+v", res)
	}
	if l, ok := f.Lock("a"); !ok || l.Holder != "w" || l.Token != 4 {
		t.Fatalf("lock after the session's end: %+v %v", l, ok)
	}
}

// goldenV6Shared is the state behind testdata/snapshot-v6-shared.golden:
// a lock held by two shared grants (one under a session), a shared grant
// released, and an exclusive lock, with a grant history.
func goldenV6Shared(t *testing.T) *FSM {
	l := newEntryLog(t)
	l.apply(&entry.SetClusterID{ID: "c6"})
	l.settings(entry.GrantHistorySettings{PerLock: 3, Global: 16, Permits: true})
	sess := l.apply(&entry.SessionCreate{Holder: "svc", Lease: "s-svc", TTLMillis: 4000, RequestID: "req-svc", NowMillis: 1700000000000}).(*SessionResult).Session
	l.apply(&entry.Acquire{Lock: "db", Holder: "r1", Lease: "l-r1", TTLMillis: 1000, RequestID: "q-r1", Mode: entry.ModeShared})
	gone := l.apply(&entry.Acquire{Lock: "db", Holder: "r2", Lease: "l-r2", TTLMillis: 1000, Mode: entry.ModeShared}).(*AcquireResult).Grant
	l.apply(&entry.Acquire{Lock: "db", Holder: "svc", Lease: "l-svc", Mode: entry.ModeShared, Session: sess.ID, SessionLease: sess.Lease})
	l.apply(&entry.Release{Lock: "db", Token: gone.Token, Lease: gone.Lease})
	l.grantLock("solo", "x")
	return l.f
}

// A version-6 snapshot of shared grants restores to the same state in
// later builds, which write it byte for byte. FENCER_WRITE_GOLDEN=1
// rewrites the file (only when the format is meant to change).
func TestSnapshotV6SharedGolden(t *testing.T) {
	f := goldenV6Shared(t)
	golden, g := checkGolden(t, f, "snapshot-v6-shared", `"version":6,`, `"shared_locks":2,`, `"shared_grants":3`, `"shared_lock":{"name":"db"`, `"mode":"shared"}}`)
	if st, ok := g.Session(3); !ok || len(st.Grants) != 1 {
		t.Fatalf("the restored session's grants: %+v", st)
	}
	// A lock held both ways, and a version-5 header over shared grants,
	// are refused.
	both := bytes.Replace(golden, []byte(`"shared_lock":{"name":"db"`), []byte(`"shared_lock":{"name":"solo"`), 1)
	v5 := bytes.Replace(golden, []byte(`"version":6,`), []byte(`"version":5,`), 1)
	for name, bad := range map[string][]byte{"held both ways": both, "version 5": v5} {
		if err := New(nil).Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
}

// A multi-acquire naming a lock held in shared mode is refused, naming its
// newest shared grant (a multi-grant is exclusive); a revoke ends one
// shared grant and hands the lock to an exclusive waiter only with the
// last, its lock-delay delaying every mode.
func TestSharedLocksBesideMultiLocksAndRevoke(t *testing.T) {
	f := New(nil)
	mustGrant(t, f, shared("a", "r1", "s1"), 2)
	c := shared("a", "r2", "s2")
	c.LockDelayMillis = 500
	mustGrant(t, f, c, 3)
	err, _ := f.ApplyCommand(&entry.MultiAcquire{Names: []string{"b", "a"}, Holder: "m", Lease: "lm", TTLMillis: 1000}, 4).(error)
	var held *refusal.HeldError
	if !errors.As(err, &held) || held.Lock != "a" || held.Shared != 2 || held.Token != 3 {
		t.Fatalf("multi-acquire over a shared lock: %v", err)
	}
	r, ok := f.ApplyCommand(&entry.Revoke{Lock: "a", Token: 2}, 5).(*RevokeResult)
	if !ok || r.Lock == nil || r.Lock.Freed.Mode != entry.ModeShared {
		t.Fatalf("revoke of a shared grant: %+v", f.ApplyCommand(&entry.Revoke{Lock: "a", Token: 2}, 5))
	}
	if got := f.SharedLocks("a"); len(got) != 1 || got[0].Token != 3 {
		t.Fatalf("shared grants after the revoke: %+v", got)
	}
	if _, ok := f.ApplyCommand(&entry.Revoke{Lock: "a", Token: 3}, 6).(*RevokeResult); !ok {
		t.Fatal("revoke of the last shared grant refused")
	}
	if err, _ := f.ApplyCommand(shared("a", "r3", "s3"), 7).(error); !errors.Is(err, refusal.ErrLockDelay) {
		t.Fatalf("shared acquire after a revoked shared grant's lock-delay started: %v", err)
	}
}
