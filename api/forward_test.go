package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/acl"
)

// followerOf is a follower whose leader serves at addr.
type followerOf struct {
	fakeCluster
	addr string
}

func (f *followerOf) ID() string               { return "n2" }
func (f *followerOf) Leader() (string, string) { return "n1", f.addr }

// A forwarded request reaches the leader with the headers that say who asks
// and what it means, even when the client names them in Connection (which
// makes a proxy drop them), and names the principal this node
// authenticated, never one the client chose.
func TestForwardKeepsEndToEndHeaders(t *testing.T) {
	var got http.Header
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		writeJSON(w, http.StatusOK, map[string]string{})
	}))
	defer leader.Close()
	f := &followerOf{addr: strings.TrimPrefix(leader.URL, "http://")}
	h := NewServer(f, f, nil).Handler()

	a, err := acl.Parse([]byte(`{"tokens":[{"name":"app","secret":"client-secret-0123456789","role":"client","keys":["*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	withACL := acl.Middleware(acl.NewStore(a))(h)
	send := func(h http.Handler, headers ...string) http.Header {
		t.Helper()
		got = nil
		req := httptest.NewRequest("PUT", "/v1/kv/k", strings.NewReader("v"))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Add(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || got == nil {
			t.Fatalf("forwarded: %d %s", rec.Code, rec.Body)
		}
		return got
	}

	hop := "Authorization, Content-Type, Fencing-Token, Fencing-Lock, Fencer-Log-Format"
	out := send(withACL, "Authorization", "Bearer client-secret-0123456789", "Connection", hop, "Content-Type", "application/json",
		"Fencing-Token", "5", "Fencing-Lock", "l", "Fencer-Log-Format", "1", wire.HeaderForwardedPrincipal, "node:n9")
	for h, want := range map[string]string{
		"Authorization": "Bearer client-secret-0123456789", "Content-Type": "application/json", "Fencing-Token": "5",
		"Fencing-Lock": "l", "Fencer-Log-Format": "1", wire.HeaderForwardedBy: "n2", wire.HeaderForwardedPrincipal: "app",
	} {
		if v := out.Values(h); len(v) != 1 || v[0] != want {
			t.Errorf("leader got %s %q, want %q", h, v, want)
		}
	}
	// Without an ACL there is no principal to name, and the client's claim
	// is not passed on.
	out = send(h, wire.HeaderForwardedPrincipal, "node:n9", "Fencing-Token", "5")
	if v := out.Get(wire.HeaderForwardedPrincipal); v != "" {
		t.Errorf("a client's %s %q reached the leader", wire.HeaderForwardedPrincipal, v)
	}
}

// Acquires and fenced writes carry the authenticated principal to the
// coordination layer, which binds request ids and counts store usage by it.
func TestPrincipalReachesCoord(t *testing.T) {
	f := &fakeCluster{leader: true}
	a, err := acl.Parse([]byte(`{"tokens":[{"name":"app","secret":"client-secret-0123456789","role":"client","keys":["*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := acl.Middleware(acl.NewStore(a))(NewServer(f, f, nil).Handler())
	for _, c := range []call{
		{"POST", "/v1/locks/a/acquire", `{"holder":"w","request_id":"0123456789abcdef"}`, map[string]string{"Authorization": "Bearer client-secret-0123456789"}},
		{"PUT", "/v1/kv/k", "v", map[string]string{"Authorization": "Bearer client-secret-0123456789", wire.HeaderToken: "7"}},
	} {
		f.principal = ""
		if status, e, _ := do(t, h, c); status != 200 || f.principal != "app" {
			t.Fatalf("%s %s: %d %s, principal %q", c.method, c.path, status, e.Code, f.principal)
		}
	}
}

// movingLeader is a member whose view of the leader a test moves.
type movingLeader struct {
	fakeCluster
	mu      sync.Mutex
	addr    string // the leader's address; "" when none is known
	self    bool   // this node leads
	changed chan struct{}
}

func newMovingLeader(addr string) *movingLeader {
	return &movingLeader{addr: addr, changed: make(chan struct{})}
}

func (m *movingLeader) ID() string { return "n2" }
func (m *movingLeader) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.self
}
func (m *movingLeader) Leader() (string, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.self:
		return "n2", "self:1"
	case m.addr == "":
		return "", ""
	}
	return "n1", m.addr
}
func (m *movingLeader) LeaderChanged() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// move makes addr the leader ("" none known), or this node when self.
func (m *movingLeader) move(addr string, self bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addr, m.self = addr, self
	close(m.changed)
	m.changed = make(chan struct{})
}

// fakeLeader is a leader's API that grants every acquire and counts them.
func fakeLeader(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		writeJSON(w, http.StatusOK, wire.Grant{Lock: "a", Token: 7})
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func hostOf(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

// send serves one acquire on h in the background.
func send(h http.Handler, headers ...string) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		req := httptest.NewRequest("POST", "/v1/locks/a/acquire", strings.NewReader(`{"holder":"w"}`))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		out <- rec
	}()
	return out
}

func answer(t *testing.T, got <-chan *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	t.Helper()
	select {
	case rec := <-got:
		return rec
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		return nil
	}
}

// A request that finds no leader waits for one and is forwarded to it, and
// the answer names the leader for the client.
func TestForwardWaitsForALeader(t *testing.T) {
	leader, hits := fakeLeader(t)
	m := newMovingLeader("")
	got := send(NewServer(m, m, nil, WithLeaderWait(10*time.Second)).Handler())
	select {
	case rec := <-got:
		t.Fatalf("answered %d %s while no leader was known", rec.Code, rec.Body)
	case <-time.After(100 * time.Millisecond):
	}
	m.move(hostOf(leader), false)
	rec := answer(t, got)
	if rec.Code != http.StatusOK || hits.Load() != 1 {
		t.Fatalf("after a leader appeared: %d %s, leader hit %d times", rec.Code, rec.Body, hits.Load())
	}
	if h := rec.Header().Get(wire.HeaderLeader); h != hostOf(leader) {
		t.Errorf("%s %q, want %q", wire.HeaderLeader, h, hostOf(leader))
	}
	// Without a leader for the whole wait: 503 no_leader with Retry-After.
	m.move("", false)
	rec = answer(t, send(NewServer(m, m, nil, WithLeaderWait(50*time.Millisecond)).Handler()))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), wire.CodeNoLeader) || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("no leader at all: %d %s %v", rec.Code, rec.Body, rec.Header())
	}
}

// A request that certainly did nothing at the leader it was sent to (it
// could not connect, or the node said it does not lead) goes to the next
// leader.
func TestForwardGoesToTheNextLeader(t *testing.T) {
	for _, c := range []struct {
		name string
		old  func(t *testing.T, tried *atomic.Int32) string
	}{
		{"unreachable", func(t *testing.T, _ *atomic.Int32) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close() // nothing listens: connection refused
			return addr
		}},
		{"not the leader", func(t *testing.T, tried *atomic.Int32) string {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tried.Add(1)
				w.Header().Set(wire.HeaderNotLeader, "n1")
				writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader, Message: "n1 does not lead"})
			}))
			t.Cleanup(s.Close)
			return hostOf(s)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, hits := fakeLeader(t)
			var tried atomic.Int32
			old := c.old(t, &tried)
			m := newMovingLeader(old)
			s := NewServer(m, m, nil, WithLeaderWait(10*time.Second))
			dial := s.fwd.Transport.DialContext
			s.fwd.Transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := dial(ctx, network, addr)
				if addr == old && err != nil {
					tried.Add(1)
				}
				return conn, err
			}
			got := send(s.Handler())
			poll(t, "an attempt at the old leader", func() bool { return tried.Load() > 0 })
			m.move(hostOf(next), false)
			rec := answer(t, got)
			if rec.Code != http.StatusOK || hits.Load() != 1 {
				t.Fatalf("%d %s, next leader hit %d times", rec.Code, rec.Body, hits.Load())
			}
		})
	}
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A request another node forwarded is never forwarded again: a node that
// does not lead refuses it at once, saying so, whatever leader it knows.
func TestForwardedRequestIsRefusedByANonLeader(t *testing.T) {
	leader, hits := fakeLeader(t)
	for _, addr := range []string{"", hostOf(leader)} {
		m := newMovingLeader(addr)
		start := time.Now()
		rec := answer(t, send(NewServer(m, m, nil, WithLeaderWait(10*time.Second)).Handler(), wire.HeaderForwardedBy, "n3"))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(wire.HeaderNotLeader) != "n2" || hits.Load() != 0 {
			t.Fatalf("leader %q: %d %s %v, leader hit %d times", addr, rec.Code, rec.Body, rec.Header(), hits.Load())
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("refused after %v: it waited for a leader", took)
		}
	}
}

// losingLeader leads until its first acquire, which finds it no longer
// does (having done nothing): the leader moves to next.
type losingLeader struct {
	*movingLeader
	next string
}

func (l *losingLeader) Acquire(context.Context, coord.AcquireRequest) (fsm.AcquireResult, error) {
	l.move(l.next, false)
	return fsm.AcquireResult{}, fmt.Errorf("%w: leadership transfer in progress", cluster.ErrNotLeader)
}

// A request this node was serving when it found it no longer leads goes to
// the new leader instead of failing.
func TestRequestToALeaderThatLostLeadershipIsForwarded(t *testing.T) {
	next, hits := fakeLeader(t)
	m := newMovingLeader("")
	m.self = true
	l := &losingLeader{movingLeader: m, next: hostOf(next)}
	rec := answer(t, send(NewServer(l, l, nil, WithLeaderWait(10*time.Second)).Handler()))
	if rec.Code != http.StatusOK || hits.Load() != 1 {
		t.Fatalf("%d %s, new leader hit %d times", rec.Code, rec.Body, hits.Load())
	}
	if ct := rec.Header().Values("Content-Type"); len(ct) != 1 {
		t.Errorf("Content-Type %q: the refused attempt's headers leaked", ct)
	}
}

// laggingLeader has just won an election: its first acquire finds the
// coordination layer not yet promoted (ErrNotLeader, having done nothing),
// and after a notice of the change, the next one is served.
type laggingLeader struct {
	*movingLeader
	tries atomic.Int32
}

func (l *laggingLeader) Acquire(_ context.Context, req coord.AcquireRequest) (fsm.AcquireResult, error) {
	if l.tries.Add(1) == 1 {
		l.move("", true)
		return fsm.AcquireResult{}, cluster.ErrNotLeader
	}
	return fsm.AcquireResult{Grant: entry.Lock{Name: req.Lock, Holder: req.Holder, Token: 9, Lease: strings.Repeat("a", 32), TTLMillis: 1000}}, nil
}

// A request a new leader refused before it was ready to serve is served
// here again, routed anew, rather than failed.
func TestRequestToANewLeaderIsServedOnceItIsReady(t *testing.T) {
	m := newMovingLeader("")
	m.self = true
	l := &laggingLeader{movingLeader: m}
	rec := answer(t, send(NewServer(l, l, nil, WithLeaderWait(10*time.Second)).Handler()))
	if rec.Code != http.StatusOK || l.tries.Load() != 2 || !strings.Contains(rec.Body.String(), `"token":9`) {
		t.Fatalf("%d %s after %d tries", rec.Code, rec.Body, l.tries.Load())
	}
}

// A request forwarded to a leader that stops answering without closing its
// connections (a frozen process or host) is answered 503 outcome_unknown
// soon after another leader is known, rather than held until the client's
// own timeout: with every client's request in flight at the freeze held
// this way, no cycle succeeded for the rest of a failover run, though the
// next leader was serving within a second. A leader that answers within
// the grace (one handing over forwards what it holds) is not cut.
func TestForwardedRequestToADeposedLeaderThatHangs(t *testing.T) {
	for _, c := range []struct {
		name  string
		after time.Duration // the old leader answers this long after the move; 0: never
		want  int
	}{
		{"frozen", 0, http.StatusServiceUnavailable},
		{"handing over", 100 * time.Millisecond, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			moved := make(chan struct{})
			release := make(chan struct{})
			var reached atomic.Int32
			old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached.Add(1)
				<-moved
				if c.after == 0 {
					<-release
					return
				}
				time.Sleep(c.after) // the old leader's own forward
				writeJSON(w, http.StatusOK, wire.Grant{Lock: "a", Token: 7})
			}))
			t.Cleanup(old.Close)
			t.Cleanup(func() { close(release) })
			next, _ := fakeLeader(t)
			m := newMovingLeader(hostOf(old))
			got := send(NewServer(m, m, nil, WithLeaderWait(10*time.Second)).Handler())
			poll(t, "the request at the old leader", func() bool { return reached.Load() > 0 })
			start := time.Now()
			m.move(hostOf(next), false)
			close(moved)
			rec := answer(t, got)
			took := time.Since(start)
			if rec.Code != c.want {
				t.Fatalf("%d %s after %v, want %d", rec.Code, rec.Body, took, c.want)
			}
			if c.want == http.StatusServiceUnavailable {
				if !strings.Contains(rec.Body.String(), wire.CodeOutcomeUnknown) || rec.Header().Get("Retry-After") != "0" {
					t.Fatalf("%d %s %v: want outcome_unknown, Retry-After 0", rec.Code, rec.Body, rec.Header())
				}
				if took > 5*time.Second {
					t.Fatalf("answered %v after the new leader was known", took)
				}
			}
			t.Logf("%s: %d after %v", c.name, rec.Code, took.Round(time.Millisecond))
		})
	}
}
