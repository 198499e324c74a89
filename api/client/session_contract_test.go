package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// The Go client's sessions against a fake node that plays issue 27's
// contract in memory: the bodies it sends, the answers it believes, and
// the local deadline it keeps. The real server's tests are in
// session_test.go.

// fakeSessions is one node: sessions and the grants under them. Its clock
// runs 10% fast, the rate difference Margin absorbs, so a session's expiry
// comes a TTL of its own after it handled the creation or last renewal,
// TTL/1.1 of real time.
type fakeSessions struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	next     uint64 // the next index: session ids and tokens alike
	sessions map[uint64]*fakeSession
	bodies   map[string][]map[string]any // request bodies by route ("POST /v1/sessions", "renew lock", ...)
	// refuse, when set, answers every session renewal with it (status, code).
	refuse *[2]any
	// drop, when set, makes every session renewal hang up without an answer.
	drop bool
}

type fakeSession struct {
	wire.Session
	expires time.Time
	grants  map[uint64]wire.SessionGrant // by token
	secrets map[uint64]string            // the grants' own leases
	ended   bool
}

func newFakeSessions(t *testing.T) *fakeSessions {
	f := &fakeSessions{t: t, next: 100, sessions: map[uint64]*fakeSession{}, bodies: map[string][]map[string]any{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSessions) client(t *testing.T) *client.Client {
	c, err := client.New([]string{f.srv.URL}, client.WithTimeout(2*time.Second), client.WithRetry(client.Retry{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// fast is a TTL as the fake's fast clock measures it in real time.
func fast(ttlMillis int64) time.Duration {
	return time.Duration(ttlMillis) * time.Millisecond * 10 / 11
}

func (f *fakeSessions) seen(route string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies[route]...)
}

func (f *fakeSessions) set(fn func(f *fakeSessions)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// expiry is when the fake expires session id (zero once it has ended).
func (f *fakeSessions) expiry(id uint64) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.sessions[id]; s != nil && !s.ended {
		return s.expires
	}
	return time.Time{}
}

func (f *fakeSessions) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var body map[string]any
	json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	f.mu.Lock()
	defer f.mu.Unlock()
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	refuse := func(status int, code string) { answer(status, wire.Error{Code: code, Message: code}) }
	str := func(k string) string { v, _ := body[k].(string); return v }
	num := func(k string) uint64 { v, _ := body[k].(float64); return uint64(v) }
	// live finds session id for a call that presents secret, refusing it
	// as the contract says when it cannot.
	live := func(id uint64, secret string) *fakeSession {
		s := f.sessions[id]
		switch {
		case s == nil:
			refuse(http.StatusNotFound, wire.CodeUnknownSession)
		case s.ended || !now.Before(s.expires):
			s.ended = true
			refuse(http.StatusGone, wire.CodeSessionExpired)
		case secret != s.Lease:
			refuse(http.StatusConflict, wire.CodeSessionMismatch)
		default:
			return s
		}
		return nil
	}
	secret := func(n uint64) string { return fmt.Sprintf("%032x", n*7919) }

	route := r.Method + " " + r.URL.Path
	switch {
	case len(parts) == 1 && parts[0] == "sessions" && r.Method == http.MethodPost:
		route = "create"
	case len(parts) == 1 && parts[0] == "sessions":
		route = "list"
	case len(parts) == 2 && parts[0] == "sessions":
		route = "status"
	case len(parts) == 3 && parts[0] == "sessions":
		route = parts[2] + " session" // renew, close
	case len(parts) == 3:
		route = parts[2] + " " + strings.TrimSuffix(parts[0], "s") // acquire lock, renew semaphore, ...
	}
	f.bodies[route] = append(f.bodies[route], body)

	switch route {
	case "create":
		for _, s := range f.sessions {
			if s.RequestID == str("request_id") {
				old := s.Session
				old.Existing = true
				answer(http.StatusOK, old)
				return
			}
		}
		f.next++
		ttl := int64(num("ttl_ms"))
		s := &fakeSession{Session: wire.Session{Session: f.next, Holder: str("holder"), Lease: secret(f.next), TTLMillis: ttl,
			LockDelayMillis: int64(num("lock_delay_ms")), RequestID: str("request_id")},
			expires: now.Add(fast(ttl)), grants: map[uint64]wire.SessionGrant{}, secrets: map[uint64]string{}}
		f.sessions[s.Session.Session] = s
		answer(http.StatusOK, s.Session)
	case "renew session":
		if f.drop {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		if f.refuse != nil {
			refuse(f.refuse[0].(int), f.refuse[1].(string))
			return
		}
		id, _ := strconv.ParseUint(parts[1], 10, 64)
		if s := live(id, str("lease")); s != nil {
			s.expires = now.Add(fast(s.TTLMillis))
			answer(http.StatusOK, wire.SessionRenewResponse{Session: id, TTLMillis: s.TTLMillis})
		}
	case "close session":
		id, _ := strconv.ParseUint(parts[1], 10, 64)
		if s := live(id, str("lease")); s != nil {
			s.ended = true
			out := wire.SessionCloseResponse{Session: id, Released: []wire.SessionGrant{}}
			for _, tok := range sortedTokens(s.grants) {
				out.Released = append(out.Released, s.grants[tok])
			}
			answer(http.StatusOK, out)
		}
	case "status":
		id, _ := strconv.ParseUint(parts[1], 10, 64)
		s := f.sessions[id]
		if s == nil || s.ended {
			refuse(http.StatusNotFound, wire.CodeUnknownSession)
			return
		}
		answer(http.StatusOK, f.status(s, now))
	case "list":
		out := wire.SessionList{Sessions: []wire.SessionStatus{}}
		for _, s := range f.sessions {
			if !s.ended {
				out.Sessions = append(out.Sessions, f.status(s, now))
			}
		}
		answer(http.StatusOK, out)
	case "acquire lock", "acquire semaphore":
		if _, ok := body["ttl_ms"]; ok {
			refuse(http.StatusBadRequest, wire.CodeInvalidTTL) // the fake's reading: ttl_ms with a session is a mistake
			return
		}
		s := live(num("session"), str("session_lease"))
		if s == nil {
			return
		}
		f.next++
		tok := f.next
		kind := wire.GrantKindLock
		if route == "acquire semaphore" {
			kind = wire.GrantKindSemaphore
		}
		s.grants[tok] = wire.SessionGrant{Kind: kind, Name: parts[1], Token: tok}
		s.secrets[tok] = secret(tok)
		g := wire.Grant{Lock: parts[1], Holder: str("holder"), Token: tok, Lease: secret(tok), TTLMillis: s.TTLMillis,
			RequestID: str("request_id"), Value: str("value"), Session: s.Session.Session}
		if kind == wire.GrantKindLock {
			answer(http.StatusOK, g)
			return
		}
		answer(http.StatusOK, wire.PermitGrant{Semaphore: g.Lock, Holder: g.Holder, Token: tok, Lease: g.Lease, TTLMillis: g.TTLMillis,
			Limit: int(num("limit")), Held: 1, RequestID: g.RequestID, Session: g.Session})
	case "renew lock", "renew semaphore":
		refuse(http.StatusConflict, wire.CodeSessionGrant)
	case "release lock", "release semaphore":
		for _, s := range f.sessions {
			if g, ok := s.grants[num("token")]; ok && s.secrets[g.Token] == str("lease") && !s.ended {
				delete(s.grants, g.Token)
				answer(http.StatusOK, wire.ReleaseResponse{Lock: g.Name, Token: g.Token, Released: true})
				return
			}
		}
		refuse(http.StatusGone, wire.CodeLeaseLost)
	default:
		refuse(http.StatusNotFound, wire.CodeNotFound)
	}
}

func (f *fakeSessions) status(s *fakeSession, now time.Time) wire.SessionStatus {
	left := s.expires.Sub(now).Milliseconds()
	st := wire.SessionStatus{Session: s.Session.Session, Holder: s.Holder, TTLMillis: s.TTLMillis, RemainingMillis: &left, Grants: []wire.SessionGrant{}}
	for _, tok := range sortedTokens(s.grants) {
		st.Grants = append(st.Grants, s.grants[tok])
	}
	return st
}

func sortedTokens(m map[uint64]wire.SessionGrant) []uint64 { return slices.Sorted(maps.Keys(m)) }

// A session's bodies are the contract's; grants under it carry "session"
// and "session_lease" and no ttl_ms, have tokens and secrets of their own,
// and run no keep-alive: over two TTLs only the session is renewed, and
// every grant is still held. Releasing one keeps the rest; Close returns
// what it released and ends every grant's Done with the session's.
func TestSessionHoldsGrantsOnOneKeepAlive(t *testing.T) {
	f := newFakeSessions(t)
	c := f.client(t)
	ctx := context.Background()
	const ttl = 600 * time.Millisecond
	s, err := c.NewSession(ctx, client.SessionTTL(ttl), client.SessionHolder("svc-1"), client.SessionLockDelay(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	create := f.seen("create")
	if len(create) != 1 || create[0]["holder"] != "svc-1" || create[0]["ttl_ms"] != 600.0 || create[0]["lock_delay_ms"] != 2000.0 || len(create[0]["request_id"].(string)) != 32 {
		t.Fatalf("create bodies %v", create)
	}
	if s.ID() != 101 || s.Holder() != "svc-1" || s.TTL() != ttl || len(s.Secret()) != wire.LeaseSecretLen {
		t.Fatalf("session id %d holder %q ttl %v secret %q", s.ID(), s.Holder(), s.TTL(), s.Secret())
	}
	var leases []*client.Lease
	for _, name := range []string{"p-1", "p-2", "p-3"} {
		l, err := s.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	permit, err := s.AcquirePermit(ctx, "workers", 3, client.Holder("svc-1/w"))
	if err != nil {
		t.Fatal(err)
	}
	leader, err := s.Campaign(ctx, "sched", "10.0.0.7:8080")
	if err != nil {
		t.Fatal(err)
	}
	leases = append(leases, permit, leader)
	for i, b := range append(f.seen("acquire lock"), f.seen("acquire semaphore")...) {
		if _, ok := b["ttl_ms"]; ok || b["session"] != 101.0 || b["session_lease"] != s.Secret() {
			t.Errorf("acquire %d under the session sent %v", i, b)
		}
	}
	if b := f.seen("acquire lock")[0]; b["holder"] != "svc-1" {
		t.Errorf("a grant's holder defaults to the session's: %v", b)
	}
	if b := f.seen("acquire semaphore")[0]; b["holder"] != "svc-1/w" || b["limit"] != 3.0 {
		t.Errorf("permit body %v", b)
	}
	seenTokens := map[uint64]bool{}
	for _, l := range leases {
		if l.Session() != s || l.Deadline() != s.Deadline() || l.TTL() != ttl || l.Grant().Session != s.ID() || seenTokens[l.Token()] || l.Secret() == s.Secret() {
			t.Fatalf("lease %s token %d: session %p deadline %v (session's %v) ttl %v grant session %d", l.Name(), l.Token(), l.Session(), l.Deadline(), s.Deadline(), l.TTL(), l.Grant().Session)
		}
		seenTokens[l.Token()] = true
	}
	if leader.Grant().Value != "10.0.0.7:8080" || permit.Held() != 1 {
		t.Fatalf("leader value %q, permit held %d", leader.Grant().Value, permit.Held())
	}

	// Two TTLs: the keep-alive renews the session alone.
	tc.Poll(t, 5*time.Second, "two TTLs of session renewals", func() bool { return len(f.seen("renew session")) >= 5 })
	if n := len(f.seen("renew lock")) + len(f.seen("renew semaphore")); n != 0 {
		t.Fatalf("%d renewals of grants under the session (the server refuses them: session_grant)", n)
	}
	for _, l := range leases {
		if err := l.Err(); err != nil || closed(l.Done()) {
			t.Fatalf("%s after two TTLs: %v", l.Name(), err)
		}
	}
	// Renewing a grant under the session renews the session.
	before := len(f.seen("renew session"))
	if err := leases[0].Renew(ctx); err != nil || len(f.seen("renew session")) != before+1 {
		t.Fatalf("Renew of a grant under the session: %v, session renewals %d -> %d", err, before, len(f.seen("renew session")))
	}

	if err := leases[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rel := f.seen("release lock"); len(rel) != 1 || rel[0]["lease"] != leases[1].Secret() || rel[0]["token"] != float64(leases[1].Token()) {
		t.Fatalf("release bodies %v", rel)
	}
	if !errors.Is(leases[1].Err(), client.ErrReleased) || s.Err() != nil || leases[0].Err() != nil || permit.Err() != nil {
		t.Fatalf("after one release: it %v, session %v, others %v %v", leases[1].Err(), s.Err(), leases[0].Err(), permit.Err())
	}
	st, err := c.Session(ctx, s.ID())
	if err != nil || st.Holder != "svc-1" || len(st.Grants) != 4 || st.RemainingMillis == nil {
		t.Fatalf("session status %+v, %v", st, err)
	}
	list, err := c.Sessions(ctx)
	if err != nil || len(list) != 1 || list[0].Session != s.ID() {
		t.Fatalf("sessions %+v, %v", list, err)
	}

	released, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.SessionGrant{{Kind: "lock", Name: "p-1", Token: leases[0].Token()}, {Kind: "lock", Name: "p-3", Token: leases[2].Token()},
		{Kind: "semaphore", Name: "workers", Token: permit.Token()}, {Kind: "lock", Name: "sched", Token: leader.Token()}}
	if fmt.Sprint(released) != fmt.Sprint(want) {
		t.Fatalf("released %v, want %v", released, want)
	}
	if cl := f.seen("close session"); len(cl) != 1 || cl[0]["lease"] != s.Secret() {
		t.Fatalf("close bodies %v", cl)
	}
	for _, l := range append(leases, permit) {
		if !closed(l.Done()) || !errors.Is(l.Err(), client.ErrReleased) {
			t.Fatalf("%s after Close: %v", l.Name(), l.Err())
		}
	}
	if again, err := s.Close(ctx); again != nil || err != nil {
		t.Fatalf("second Close: %v, %v", again, err)
	}
	n := len(f.seen("renew session"))
	time.Sleep(ttl) // nothing to wait for: a closed session must stay quiet
	if got := len(f.seen("renew session")); got != n {
		t.Fatalf("%d renewals after Close", got-n)
	}
}

// A client that can no longer renew sees Done close before the server can
// expire the session, on a server whose clock runs 10% fast: and with it
// the Done of every grant under the session.
func TestSessionDoneBeforeServerExpiry(t *testing.T) {
	f := newFakeSessions(t)
	c := f.client(t)
	ctx := context.Background()
	s, err := c.NewSession(ctx, client.SessionTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	tc.Poll(t, 5*time.Second, "a confirmed renewal", func() bool { return len(f.seen("renew session")) >= 1 })
	f.set(func(f *fakeSessions) { f.drop = true })
	select {
	case <-s.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("Done never closed")
	}
	// Deadline is when Done was due (the timer may fire late on a busy
	// machine, but Done and Err read the clock themselves).
	if due, exp := s.Deadline(), f.expiry(s.ID()); !due.Before(exp) {
		t.Fatalf("Done was due %v after the server expired the session", due.Sub(exp))
	} else {
		t.Logf("Done was due %v before the server's expiry (ttl 1s, server clock 10%% fast)", exp.Sub(due).Round(time.Millisecond))
	}
	if !closed(l.Done()) || !errors.Is(l.Err(), client.ErrLeaseExpired) || !errors.Is(s.Err(), client.ErrLeaseExpired) {
		t.Fatalf("grant %v, session %v", l.Err(), s.Err())
	}
	if _, err := s.Lock(ctx, "other"); !errors.Is(err, client.ErrLeaseExpired) {
		t.Fatalf("Lock under a lost session: %v", err)
	}
}

// A refused renewal ends the session at once, with the server's reason.
func TestSessionRenewalRefused(t *testing.T) {
	f := newFakeSessions(t)
	c := f.client(t)
	s, err := c.NewSession(context.Background(), client.SessionTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeSessions) { f.refuse = &[2]any{http.StatusGone, wire.CodeSessionExpired} })
	start := time.Now()
	if err := s.Renew(context.Background()); !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("renew: %v", err)
	}
	if !closed(s.Done()) || !closed(l.Done()) || !errors.Is(l.Err(), client.ErrSessionExpired) {
		t.Fatalf("after a refusal: session %v, grant %v", s.Err(), l.Err())
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("the refusal took %v to end the session", d)
	}
}

// What the client refuses to believe, and what it refuses to send.
func TestSessionBadAnswersAndOptions(t *testing.T) {
	f := newFakeSessions(t)
	c := f.client(t)
	ctx := context.Background()
	if _, err := c.NewSession(ctx, client.SessionTTL(time.Millisecond)); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("ttl 1ms: %v", err)
	}
	if _, err := c.NewSession(ctx, client.SessionLockDelay(time.Hour)); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("lock-delay 1h: %v", err)
	}
	s, err := c.NewSession(ctx, client.SessionTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.Lock(ctx, "job", client.TTL(time.Second)); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a TTL under a session: %v", err)
	}
	if n := len(f.seen("acquire lock")); n != 0 {
		t.Fatalf("%d acquires sent with a refused option", n)
	}
	// A grant that does not name the session would live by a TTL of its
	// own that nobody renews.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/acquire") {
			f.srv.Config.Handler.ServeHTTP(w, r)
			return
		}
		var body wire.AcquireRequest
		json.NewDecoder(r.Body).Decode(&body)
		json.NewEncoder(w).Encode(wire.Grant{Lock: "job", Holder: body.Holder, Token: 9, Lease: strings.Repeat("a", 32), TTLMillis: 2000, RequestID: body.RequestID})
	}))
	defer bad.Close()
	bc, err := client.New([]string{bad.URL})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := bc.NewSession(ctx, client.SessionTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close(ctx)
	if _, err := bs.Lock(ctx, "job"); !errors.Is(err, client.ErrBadAnswer) || !strings.Contains(err.Error(), "names session 0") {
		t.Fatalf("a grant not under the session: %v", err)
	}
}

// A session created again with the caller's request id is the earlier
// one, whose time left only a renewal can tell: NewSession renews before
// it returns it.
func TestSessionRequestIDGetsTheEarlierSession(t *testing.T) {
	f := newFakeSessions(t)
	c := f.client(t)
	ctx := context.Background()
	first, err := c.NewSession(ctx, client.SessionRequestID("job-runner-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)
	renewals := len(f.seen("renew session"))
	again, err := c.NewSession(ctx, client.SessionRequestID("job-runner-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	if again.ID() != first.ID() || !again.Info().Existing || len(f.seen("create")) != 2 {
		t.Fatalf("again: id %d (first %d), existing %t", again.ID(), first.ID(), again.Info().Existing)
	}
	if got := len(f.seen("renew session")); got != renewals+1 {
		t.Fatalf("%d renewals confirmed the earlier session, want 1", got-renewals)
	}
}
