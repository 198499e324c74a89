package client_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
)

// member is a fake node: GET /v1/cluster names leader (an HTTP address, or
// none), and every other request is answered 200 with hint, when set, as
// wire.HeaderLeader.
func member(t *testing.T, leader func() string, hint string) (*httptest.Server, *atomic.Int32) {
	var served atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster" {
			st := wire.ClusterStatus{Node: "n2"}
			if addr := leader(); addr != "" {
				st.Leader = "n1"
				st.Members = []wire.Member{{ID: "n1", HTTPAddr: addr}}
			}
			json.NewEncoder(w).Encode(st)
			return
		}
		served.Add(1)
		if hint != "" {
			w.Header().Set(wire.HeaderLeader, hint)
		}
		json.NewEncoder(w).Encode(wire.LockStatus{Lock: "l"})
	}))
	t.Cleanup(s.Close)
	return s, &served
}

func host(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

// A member that forwarded a request names the leader; the client sends its
// next request there directly.
func TestClientFollowsTheLeaderAForwarderNames(t *testing.T) {
	leader, atLeader := member(t, func() string { return "" }, "")
	follower, atFollower := member(t, func() string { return "" }, host(leader))
	cl, err := client.New([]string{host(follower)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := cl.Lock(context.Background(), "l"); err != nil {
			t.Fatal(err)
		}
	}
	if cl.Leader() != leader.URL || atFollower.Load() != 1 || atLeader.Load() != 1 {
		t.Fatalf("leader %q; follower served %d, leader %d: want the second request at the leader it named",
			cl.Leader(), atFollower.Load(), atLeader.Load())
	}
}

// A node that is gone (a crashed leader, still named by the members until
// they elect another) costs no backoff: the request goes at once to
// another member, which forwards it.
func TestClientMovesOnAtOnceFromANodeThatIsGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	live, served := member(t, func() string { return gone }, "")
	cl, err := client.New([]string{gone, host(live)}, client.WithRetry(client.Retry{MinBackoff: 3 * time.Second, MaxBackoff: 3 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := cl.Lock(context.Background(), "l"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second || served.Load() != 1 {
		t.Fatalf("took %v, served %d times: a refused connection should cost no backoff", took, served.Load())
	}
}

// A leader that stops answering without closing its connections (a frozen
// process or host) holds a request sent to it only until the other members
// name another leader, not for the attempt's whole timeout: the client asks
// them who leads once an attempt at the leader has run for a second, and
// sends the request again to the leader they name.
func TestClientLeavesALeaderThatHangsOnceAnotherLeads(t *testing.T) {
	release := make(chan struct{})
	var frozenAt atomic.Bool
	var frozen *httptest.Server
	frozen = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster" {
			json.NewEncoder(w).Encode(wire.ClusterStatus{Node: "n1", Leader: "n1", Members: []wire.Member{{ID: "n1", HTTPAddr: host(frozen)}}})
			return
		}
		frozenAt.Store(true)
		select { // frozen: never answers
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(frozen.Close)
	t.Cleanup(func() { close(release) })
	next, served := member(t, func() string { return "" }, "")
	var leader atomic.Value
	leader.Store(host(frozen))
	follower, _ := member(t, func() string { return leader.Load().(string) }, "")
	cl, err := client.New([]string{host(frozen), host(follower), host(next)}, client.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := cl.Lock(context.Background(), "l")
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !frozenAt.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling for the request to reach the frozen leader
	}
	leader.Store(host(next)) // the others elect next
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer %v after the members named another leader: the request is held by the frozen one", time.Since(start).Round(time.Millisecond))
	}
	if served.Load() != 1 || cl.Leader() != next.URL {
		t.Fatalf("next leader served %d; client's leader %q, want %q", served.Load(), cl.Leader(), next.URL)
	}
	t.Logf("answered by the next leader %v after the request was sent", time.Since(start).Round(time.Millisecond))
}
