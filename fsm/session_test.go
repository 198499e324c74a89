package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/fsm/refusal"
)

func openSession(t *testing.T, f *FSM, index uint64, delay int64) entry.Session {
	t.Helper()
	res, ok := f.ApplyCommand(&entry.SessionCreate{Holder: "svc", Lease: "sess-secret", TTLMillis: 5000, LockDelayMillis: delay,
		RequestID: fmt.Sprint("r", index)}, index).(*SessionResult)
	if !ok {
		t.Fatalf("session create at %d refused", index)
	}
	return res.Session
}

// A session's grants have tokens of their own and its TTL; releasing one
// keeps the others; the session's expiry ends every remaining grant in one
// entry, hands each freed name to the waiter the entry carries, starts
// each lock-delay there, and emits each grant's event and the session's.
func TestSessionEndsAllItsGrantsInOneEntry(t *testing.T) {
	f := New(nil)
	rec := &recorder{}
	f.Observe(rec)
	sess := openSession(t, f, 1, 0)
	if sess.ID != 1 || f.LastToken() != 1 {
		t.Fatalf("session id %d, last token %d: want the entry's token", sess.ID, f.LastToken())
	}
	under := func(lock string) *entry.Acquire {
		return &entry.Acquire{Lock: lock, Holder: "svc", Lease: "l-" + lock, Session: sess.ID, SessionLease: "sess-secret"}
	}
	a := mustGrant(t, f, under("a"), 2)
	b := mustGrant(t, f, under("b"), 3)
	delayed := under("c")
	delayed.LockDelayMillis = 700
	c := mustGrant(t, f, delayed, 4)
	if a.Token != 2 || a.TTLMillis != 5000 || a.Session != sess.ID || c.LockDelayMillis != 700 {
		t.Fatalf("grant under the session: %+v, %+v", a, c)
	}
	permit := &entry.SemAcquire{Semaphore: "s", Holder: "svc", Lease: "p", Limit: 1, Session: sess.ID, SessionLease: "sess-secret"}
	if _, ok := f.ApplyCommand(permit, 5).(*PermitResult); !ok {
		t.Fatal("permit under the session refused")
	}
	wrong := under("d")
	wrong.SessionLease = "guess"
	if err, _ := f.ApplyCommand(wrong, 6).(error); !errors.Is(err, refusal.ErrSessionMismatch) {
		t.Fatalf("wrong session lease: %v", err)
	}
	if _, ok := f.ApplyCommand(&entry.Release{Lock: "b", Token: b.Token, Lease: "l-b"}, 7).(*ReleaseResult); !ok {
		t.Fatal("release of one grant refused")
	}
	if st, _ := f.Session(sess.ID); len(st.Grants) != 3 {
		t.Fatalf("after one release the session holds %+v, want a, c and the permit", st.Grants)
	}

	// One entry mints one token: two hand-offs are refused, and nothing
	// changes.
	two := &entry.SessionEnd{Session: sess.ID, Expired: true,
		Next: []*entry.Acquire{acquire("a", "next", "n")}, NextPermits: []*entry.SemAcquire{semAcquire("w2", 1)}}
	if err, _ := f.ApplyCommand(two, 8).(error); !errors.Is(err, entry.ErrMalformedCommand) {
		t.Fatalf("a session end with two hand-offs: %v", err)
	}
	// Expire: a goes to a waiter in the same entry, c starts its delay,
	// the permit's slot is free.
	rec.events = nil
	end := &entry.SessionEnd{Session: sess.ID, Expired: true, Next: []*entry.Acquire{acquire("a", "next", "n")}}
	r, ok := f.ApplyCommand(end, 8).(*SessionEndResult)
	if !ok {
		t.Fatalf("session end refused: %v", f.ApplyCommand(end, 9))
	}
	if len(r.Locks) != 2 || r.Locks[0].Next == nil || r.Locks[0].Next.Token != 8 || r.Locks[1].Next != nil || r.Locks[1].Delay == nil {
		t.Fatalf("session end: %+v", r)
	}
	if got, _ := f.Lock("a"); got.Holder != "next" || got.Token != 8 {
		t.Fatalf("a after the session's end: %+v", got)
	}
	if _, held := f.Lock("c"); held {
		t.Fatal("c held through its lock-delay")
	}
	if d, ok := f.Delay("c"); !ok || d.Since != 8 {
		t.Fatalf("c's delay: %+v %v", d, ok)
	}
	if st := f.Semaphore("s"); len(st.Permits) != 0 {
		t.Fatalf("s after the session's end: %+v", st)
	}
	var types []string
	for _, e := range rec.events {
		if e.Index != 8 {
			t.Errorf("event %+v not at the end's index", e)
		}
		types = append(types, e.Type)
	}
	if want := []string{event.HandedOff, event.Expired, event.PermitExpired, event.SessionExpired}; !reflect.DeepEqual(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	if _, ok := f.Session(sess.ID); ok {
		t.Fatal("session live after its end")
	}
	if err, _ := f.ApplyCommand(under("e"), 9).(error); !errors.Is(err, refusal.ErrSessionExpired) {
		t.Fatalf("acquire under an ended session: %v", err)
	}
	if err, _ := f.ApplyCommand(&entry.SessionEnd{Session: 99, Expired: true}, 10).(error); !errors.Is(err, refusal.ErrUnknownSession) {
		t.Fatalf("end of an unknown session: %v", err)
	}
	if err, _ := f.ApplyCommand(&entry.SessionCreate{Holder: "svc", Lease: "x", TTLMillis: 5000, RequestID: "r1"}, 11).(error); !errors.Is(err, refusal.ErrSessionExpired) {
		t.Fatalf("a retried create of an ended session: %v", err)
	}
}

// Close needs the session's secret; it releases (no lock-delay).
func TestSessionCloseNeedsItsLease(t *testing.T) {
	f := New(nil)
	sess := openSession(t, f, 1, 500)
	mustGrant(t, f, &entry.Acquire{Lock: "a", Holder: "svc", Lease: "l", Session: sess.ID, SessionLease: "sess-secret"}, 2)
	if err, _ := f.ApplyCommand(&entry.SessionEnd{Session: sess.ID, Lease: "guess"}, 3).(error); !errors.Is(err, refusal.ErrSessionMismatch) {
		t.Fatalf("close with a wrong lease: %v", err)
	}
	if again, ok := f.ApplyCommand(&entry.SessionCreate{Holder: "svc", Lease: "x", TTLMillis: 5000, RequestID: "r1"}, 4).(*SessionResult); !ok || !again.Existing || again.Session.ID != sess.ID {
		t.Fatalf("retried create: %+v", again)
	}
	if _, ok := f.ApplyCommand(&entry.SessionEnd{Session: sess.ID, Lease: "sess-secret"}, 5).(*SessionEndResult); !ok {
		t.Fatal("close refused")
	}
	if _, delayed := f.Delay("a"); delayed {
		t.Fatal("a close started a lock-delay")
	}
}

// Sessions, the grants under them and the ended ids survive a snapshot:
// the restored state is the same, and its session still ends its grants.
func TestSessionsSurviveASnapshot(t *testing.T) {
	src := New(nil)
	sess := openSession(t, src, 1, 0)
	mustGrant(t, src, &entry.Acquire{Lock: "a", Holder: "svc", Lease: "l", Session: sess.ID, SessionLease: "sess-secret"}, 2)
	src.ApplyCommand(&entry.SemAcquire{Semaphore: "s", Holder: "svc", Lease: "p", Limit: 2, Session: sess.ID, SessionLease: "sess-secret"}, 3)
	other := openSession(t, src, 4, 0)
	src.ApplyCommand(&entry.SessionEnd{Session: other.ID, Expired: true}, 5)
	var buf bytes.Buffer
	if _, err := src.Image().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"version":5,`)) {
		t.Fatalf("a snapshot with sessions is not version 5: %s", buf.Bytes())
	}
	dst := New(nil)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if src.Digest() != dst.Digest() {
		t.Fatal("restored state differs")
	}
	if st, ok := dst.Session(sess.ID); !ok || len(st.Grants) != 2 {
		t.Fatalf("restored session: %+v %v", st, ok)
	}
	if !dst.SessionEnded(other.ID) {
		t.Fatal("the ended session is forgotten")
	}
	if r, ok := dst.ApplyCommand(&entry.SessionEnd{Session: sess.ID, Expired: true}, 6).(*SessionEndResult); !ok || len(r.Locks) != 1 || len(r.Permits) != 1 {
		t.Fatalf("restored session's end: %+v", r)
	}
	// A lock under a session that is not live is refused.
	bad := bytes.Replace(buf.Bytes(), []byte(`"session":1}`), []byte(`"session":4}`), 1)
	if err := New(nil).Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
		t.Fatal("a lock under an ended session restored")
	}
}

// goldenV5 is the state behind testdata/snapshot-v5.golden: sessions with
// locks and permits under them, one closed, one expired with a lock-delay
// and a hand-off, one live with a lock, a permit and an election, beside a
// lock of its own lease; written through the log's encoding.
func goldenV5(t *testing.T) *FSM {
	l := newEntryLog(t)
	l.apply(&entry.SetClusterID{ID: "c5"})
	l.settings(entry.GrantHistorySettings{PerLock: 3, Global: 16, Permits: true})
	open := func(holder string, delay int64) entry.Session {
		return l.apply(&entry.SessionCreate{Holder: holder, Lease: "s-" + holder, TTLMillis: 4000, LockDelayMillis: delay,
			RequestID: "req-" + holder, NowMillis: 1700000000000}).(*SessionResult).Session
	}
	under := func(ss entry.Session, lock, value string) {
		l.apply(&entry.Acquire{Lock: lock, Holder: ss.Holder, Lease: "l-" + lock, RequestID: "r-" + lock, Value: value, Session: ss.ID, SessionLease: ss.Lease})
	}
	closed := open("closer", 0)
	under(closed, "c1", "")
	l.apply(&entry.SessionEnd{Session: closed.ID, Lease: closed.Lease})
	gone := open("sleeper", 750)
	under(gone, "e1", "")
	under(gone, "e2", "")
	l.apply(&entry.SemAcquire{Semaphore: "pool", Holder: "sleeper", Lease: "p-sleeper", Limit: 2, Session: gone.ID, SessionLease: gone.Lease})
	l.apply(&entry.SessionEnd{Session: gone.ID, Expired: true, NextPermits: []*entry.SemAcquire{{Semaphore: "pool", Holder: "w", Lease: "p-w", TTLMillis: 1000, Limit: 2}}})
	live := open("owner", 0)
	under(live, "p1", "")
	under(live, "leader", "10.0.0.1:80")
	l.apply(&entry.SemAcquire{Semaphore: "pool2", Holder: "owner", Lease: "p-owner", Limit: 2, Session: live.ID, SessionLease: live.Lease})
	l.grantLock("solo", "x")
	return l.f
}

// A version-5 snapshot of this build restores to the same state in later
// builds, which write it byte for byte. FENCER_WRITE_GOLDEN=1 rewrites the
// file (only when the format is meant to change).
func TestSnapshotV5Golden(t *testing.T) {
	f := goldenV5(t)
	checkGolden(t, f, "snapshot-v5", `"version":5,`, `"sessions":1,`, `"ended_sessions":2`, `"session":{"id":`, `"ended_session":`, `,"session":`, `"delay":{"lock":"e1"`)
}

// A session's expiry that ends two permits of one semaphore, each with a
// lock-delay, delays both slots, each ended by an EndDelay of its own.
// Both delays were once keyed by the end's index: the second overwrote
// the first, and its slot was free at once (the simulation's model of the
// log found the FSM one delay short).
func TestSessionExpiryDelaysEverySlotItFrees(t *testing.T) {
	f := New(nil)
	sess := openSession(t, f, 1, 500)
	permit := func(index uint64) {
		p := &entry.SemAcquire{Semaphore: "s", Holder: "svc", Lease: fmt.Sprint("p", index), Limit: 2, Session: sess.ID, SessionLease: "sess-secret"}
		if _, ok := f.ApplyCommand(p, index).(*PermitResult); !ok {
			t.Fatalf("permit at %d refused", index)
		}
	}
	permit(2)
	permit(3)
	if _, ok := f.ApplyCommand(&entry.SessionEnd{Session: sess.ID, Expired: true}, 4).(*SessionEndResult); !ok {
		t.Fatal("session expiry refused")
	}
	st := f.Semaphore("s")
	if len(st.Permits) != 0 || len(st.Delays) != 2 {
		t.Fatalf("after the expiry: permits %v, delays %+v; want no permit and both slots delayed", st.Permits, st.Delays)
	}
	other := &entry.SemAcquire{Semaphore: "s", Holder: "other", Lease: "o", TTLMillis: 1000, Limit: 2}
	if err, _ := f.ApplyCommand(other, 5).(error); !errors.Is(err, refusal.ErrLockDelay) {
		t.Fatalf("acquire with both slots delayed: %v, want lock_delay", err)
	}
	for i, d := range st.Delays {
		if _, ok := f.ApplyCommand(&entry.EndDelay{Semaphore: "s", Since: d.Since}, uint64(6+i)).(*EndDelayResult); !ok {
			t.Fatalf("end of the delay since %d refused", d.Since)
		}
	}
	if st := f.Semaphore("s"); len(st.Delays) != 0 {
		t.Fatalf("delays left after both ended: %+v", st.Delays)
	}
}

// A session holding two permits of one semaphore hands the slot over once:
// the end's one acquire is offered to the first freed permit's slot alone
// (it was offered to each, the second answered with the first's permit
// again, a second handed_off event naming it; fails without).
func TestSessionEndHandsOneSlotOverOnce(t *testing.T) {
	f := New(nil)
	rec := &recorder{}
	f.Observe(rec)
	sess := openSession(t, f, 1, 0)
	for i := range 2 {
		p := &entry.SemAcquire{Semaphore: "s", Holder: "svc", Lease: fmt.Sprint("p", i), Limit: 2, Session: sess.ID, SessionLease: "sess-secret"}
		if _, ok := f.ApplyCommand(p, uint64(2+i)).(*PermitResult); !ok {
			t.Fatal("permit under the session refused")
		}
	}
	rec.events = nil
	end := &entry.SessionEnd{Session: sess.ID, Lease: "sess-secret", NextPermits: []*entry.SemAcquire{semAcquire("w", 2)}}
	r, ok := f.ApplyCommand(end, 4).(*SessionEndResult)
	if !ok || len(r.Permits) != 2 || r.Permits[0].Next == nil || r.Permits[1].Next != nil || r.Permits[1].NextErr != nil {
		t.Fatalf("session end: %+v", r)
	}
	handed := 0
	for _, e := range rec.events {
		if e.Type == event.PermitHandedOff {
			handed++
		}
	}
	if st := f.Semaphore("s"); len(st.Permits) != 1 || st.Permits[0].Holder != "w" || handed != 1 {
		t.Fatalf("after the end: %+v, %d handed_off events", st, handed)
	}
}
