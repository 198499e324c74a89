package coord

import (
	"errors"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

func mustSession(t *testing.T, s *Service, ttl time.Duration) entry.Session {
	t.Helper()
	res, err := s.CreateSession(bg, SessionRequest{Holder: "svc", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return res.Session
}

func underSession(t *testing.T, s *Service, ss entry.Session, lock string) entry.Lock {
	t.Helper()
	res, err := s.Acquire(bg, AcquireRequest{Lock: lock, Holder: ss.Holder, Session: ss.ID, SessionLease: ss.Lease})
	if err != nil {
		t.Fatalf("acquire %s under session %d: %v", lock, ss.ID, err)
	}
	return res.Grant
}

// Grants under a session have no lease of their own: renewing one is
// refused, only the session's renewals keep them, past their TTL; when the
// session's TTL runs out on the leader's clock (not before) one entry ends
// every grant under it, hands the first freed name with a waiter over in
// that entry and the next right after, before anything else is written.
func TestSessionExpiryEndsEveryGrantInOneEntry(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	ss := mustSession(t, s, 3*time.Second)
	a := underSession(t, s, ss, "a")
	underSession(t, s, ss, "b")
	permit, err := s.AcquirePermit(bg, PermitRequest{Semaphore: "s", Holder: "svc", Limit: 1, Session: ss.ID, SessionLease: ss.Lease})
	if err != nil {
		t.Fatal(err)
	}
	if a.Session != ss.ID || a.TTLMillis != 3000 || permit.Permit.Session != ss.ID {
		t.Fatalf("grants under the session: %+v %+v", a, permit.Permit)
	}
	if _, err := s.Renew(bg, "a", a.Token, a.Lease); !errors.Is(err, refusal.ErrSessionGrant) {
		t.Fatalf("renewal of a grant under a session: %v, want session_grant", err)
	}
	if _, err := s.Acquire(bg, AcquireRequest{Lock: "c", Holder: "svc", Session: ss.ID, SessionLease: "0123456789abcdef0123456789abcdef"}); !errors.Is(err, refusal.ErrSessionMismatch) {
		t.Fatalf("acquire with a wrong session lease: %v", err)
	}
	// Renewed past the grants' TTL: they stay.
	for range 3 {
		clock.Advance(2 * time.Second)
		if _, err := s.RenewSession(bg, ss.ID, ss.Lease); err != nil {
			t.Fatal(err)
		}
	}
	if !isHeld(f, "a") || !isHeld(f, "b") {
		t.Fatal("a grant under a renewed session ended")
	}
	waitA := enqueue(t, s, "a", "wa", time.Minute, 1)
	waitB := enqueue(t, s, "b", "wb", time.Minute, 1)
	before := len(f.log())
	clock.Advance(2999 * time.Millisecond)
	if len(f.log()) != before {
		t.Fatal("the session ended before its TTL")
	}
	clock.Advance(time.Millisecond)
	ga, gb := receive(t, waitA), receive(t, waitB)
	if ga.err != nil || gb.err != nil {
		t.Fatalf("waiters: %v %v", ga.err, gb.err)
	}
	log := f.log()[before:]
	end, ok := log[0].(*entry.SessionEnd)
	if !ok || !end.Expired || len(end.Next) != 1 || end.Next[0].Lock != "a" {
		t.Fatalf("first entry after the TTL: %#v, want the session's end handing a over", log[0])
	}
	if ga.res.Grant.Token != uint64(before+1) || gb.res.Grant.Token != uint64(before+2) {
		t.Fatalf("a handed over with token %d, b with %d: want %d (the end) and %d (right after)", ga.res.Grant.Token, gb.res.Grant.Token, before+1, before+2)
	}
	if acq, ok := log[1].(*entry.Acquire); !ok || acq.Lock != "b" {
		t.Fatalf("second entry %#v: want b's waiter's acquire", log[1])
	}
	if st := f.fsm.Semaphore("s"); len(st.Permits) != 0 {
		t.Fatalf("the permit outlived its session: %+v", st)
	}
	if _, err := s.RenewSession(bg, ss.ID, ss.Lease); !errors.Is(err, refusal.ErrSessionExpired) {
		t.Fatalf("renewal of an ended session: %v", err)
	}
	if _, err := s.Acquire(bg, AcquireRequest{Lock: "z", Holder: "svc", Session: ss.ID, SessionLease: ss.Lease}); !errors.Is(err, refusal.ErrSessionExpired) {
		t.Fatalf("acquire under an ended session: %v", err)
	}
}

// Close releases every grant of the session and says which; a new leader
// restarts the session at its full TTL.
func TestSessionCloseAndFailover(t *testing.T) {
	s, f, clock := newTestService(t, Config{})
	ss := mustSession(t, s, 3*time.Second)
	underSession(t, s, ss, "a")
	clock.Advance(2 * time.Second)
	f.setLeader(false)
	f.setLeader(true)
	waitReady(t, s)
	clock.Advance(2 * time.Second) // 4 s after the last renewal, 2 s into the new view
	if st, err := s.Session(bg, ss.ID, false); err != nil || len(st.Grants) != 1 || !st.Known || st.Remaining != time.Second {
		t.Fatalf("session after a failover: %+v %v, want it restarted at its full TTL", st, err)
	}
	if lk, _ := s.Lock(bg, "a", false); !lk.Known || lk.Remaining != time.Second {
		t.Fatalf("a grant under the session: %+v, want its session's time left", lk)
	}
	ended, err := s.CloseSession(bg, ss.ID, ss.Lease)
	if err != nil || len(ended) != 1 || ended[0] != (fsm.SessionGrant{Name: "a", Token: 2}) {
		t.Fatalf("close: %+v %v", ended, err)
	}
	if isHeld(f, "a") {
		t.Fatal("a held after its session closed")
	}
	if _, err := s.CloseSession(bg, ss.ID, ss.Lease); !errors.Is(err, refusal.ErrSessionExpired) {
		t.Fatalf("second close: %v", err)
	}
}

// A grant released between a session end's read of its grants and its hold
// of their names is not freed by the end: the waiter the end popped for it
// goes back to the head of the queue and gets the lock later, rather than
// waiting for good for an answer nobody owes it (fails with the waiter
// left popped: the second waiter is never answered).
func TestSessionEndGivesBackAWaiterItCouldNotServe(t *testing.T) {
	s, _, _ := newTestService(t, Config{})
	ss := mustSession(t, s, 10*time.Second)
	a := underSession(t, s, ss, "a")
	w1 := enqueue(t, s, "a", "w1", time.Minute, 1)
	w2 := enqueue(t, s, "a", "w2", time.Minute, 2)
	read, released := make(chan struct{}), make(chan struct{})
	sessionRead = func() { close(read); <-released }
	t.Cleanup(func() { sessionRead = func() {} })
	closed := make(chan error, 1)
	go func() {
		_, err := s.CloseSession(bg, ss.ID, ss.Lease)
		closed <- err
	}()
	<-read // the end has read a as the session's
	if err := s.Release(bg, "a", a.Token, a.Lease); err != nil {
		t.Fatal(err)
	}
	g1 := receive(t, w1)
	if g1.err != nil {
		t.Fatal(g1.err)
	}
	close(released)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := s.Release(bg, "a", g1.res.Grant.Token, g1.res.Grant.Lease); err != nil {
		t.Fatal(err)
	}
	if g2 := receive(t, w2); g2.err != nil || g2.res.Grant.Holder != "w2" {
		t.Fatalf("the second waiter: %+v %v", g2.res.Grant, g2.err)
	}
}
