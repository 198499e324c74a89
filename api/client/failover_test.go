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
