package test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/datadir"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// secretCluster is a 3-node cluster with an ACL and the cluster secret, no
// TLS, every member's key registered.
func secretCluster(t *testing.T) (*tc.Cluster, *tc.Node) {
	t.Helper()
	c := tc.New(t, 3, tc.Options{Configure: func(cfg *cluster.Config) {
		cfg.ClusterSecret = testClusterSecret
		cfg.JoinTimeout = 20 * time.Second
	}, Server: secretACL(t)})
	leader := c.WaitLeader(10 * time.Second)
	tc.Poll(t, 20*time.Second, "every member registers its key", func() bool {
		for _, n := range c.Nodes {
			if memberRecord(t, leader, n.ID).Key == "" {
				return false
			}
		}
		return true
	})
	return c, leader
}

// F7 of issue 26: a node sent the cluster secret (Fencer-Node n1:SECRET) to
// whatever http_addr a member record named, on any reader's members view,
// so an operator who added a fake member collected it; and each view
// opened new connections to every member (600 calls left 1,193 sockets in
// TIME-WAIT). Now the fake member receives only signatures made for its
// own address, which no real member accepts; the views reuse one
// connection; and a client past its share is answered 429 with
// Retry-After.
func TestMembersViewSendsNothingThatWorksElsewhere(t *testing.T) {
	c, leader := secretCluster(t)
	var (
		mu    sync.Mutex
		auths []string
		conns atomic.Int32
	)
	fake := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		json.NewEncoder(w).Encode(wire.ClusterStatus{Node: "rogue", State: "Follower"})
	}))
	fake.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	fake.Start()
	defer fake.Close()
	fakeAddr := strings.TrimPrefix(fake.URL, "http://")
	add := `{"id":"rogue","raft_addr":"` + freeAddr(t) + `","http_addr":"` + fakeAddr + `","voter":false}`
	if code, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/cluster/members", add, "Authorization", operatorAuthorization, "Content-Type", "application/json"); code != 200 {
		t.Fatalf("members add rogue: %d %s", code, body)
	}
	// A reader's members views, as many as its share allows, waiting out
	// each 429's Retry-After: every one asks the fake.
	const views = 20
	limited := 0
	for done := 0; done < views; {
		code, body, h := tc.Do(t, "GET", leader.URL()+"/v1/cluster/members", "", "Authorization", readerAuthorization)
		switch code {
		case 200:
			done++
		case 429:
			limited++
			secs, err := strconv.Atoi(h.Get("Retry-After"))
			if err != nil || secs < 1 || !strings.Contains(body, wire.CodeRateLimited) {
				t.Fatalf("429 without Retry-After or its code: %q %s", h.Get("Retry-After"), body)
			}
			time.Sleep(time.Duration(secs) * time.Second) // the pace the server asked for, not a wait for a state
		default:
			t.Fatalf("members view: %d %s", code, body)
		}
	}
	if limited == 0 {
		t.Errorf("%d members views in a row were never limited", views)
	}
	mu.Lock()
	got := append([]string(nil), auths...)
	mu.Unlock()
	if len(got) < views {
		t.Fatalf("the fake member was asked %d times in %d views", len(got), views)
	}
	t.Logf("%d members views (%d answered 429): the fake member was asked %d times over %d connections", views, limited, len(got), conns.Load())
	if n := conns.Load(); n > 2 {
		t.Errorf("%d members views opened %d connections to the fake member, want them reused", views, n)
	}
	for _, a := range got {
		if strings.Contains(a, testClusterSecret) {
			t.Fatalf("the fake member received the cluster secret: %q", a)
		}
		if _, secret, ok := wire.ParseNodeAuthorization(a); ok {
			t.Fatalf("the fake member received a node secret %q: %q", secret, a)
		}
	}
	// Whatever it received works nowhere else: replayed at every real
	// member, for the same request and for a removal, it is refused.
	for _, n := range c.Nodes {
		for _, a := range got[:1] {
			for _, req := range [][2]string{{"GET", "/v1/cluster"}, {"DELETE", "/v1/cluster/members/rogue"}} {
				if code, body, _ := tc.Do(t, req[0], n.URL()+req[1], "", "Authorization", a); code != 401 {
					t.Errorf("%s %s at %s with what the fake collected: %d %s, want 401", req[0], req[1], n.ID, code, body)
				}
			}
		}
	}
}

// With the cluster secret, every member held the one secret, so any member
// (or whoever copied its file) could claim any id and remove the others.
// Now a member's own credential is its key: n2's signature removes n2's
// own record only, joins only as n2, and a signature n2 made for one node
// is refused by another; the cluster secret speaks for no keyed member.
func TestOneMembersCredentialCannotActAsAnother(t *testing.T) {
	c, leader := secretCluster(t)
	var a, b *tc.Node // two members other than the leader
	for _, n := range c.Nodes {
		switch {
		case n == leader:
		case a == nil:
			a = n
		default:
			b = n
		}
	}
	key, err := datadir.LoadMemberKey(a.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	signed := func(to *tc.Node, method, path string) string {
		return wire.MemberAuthorization(key, a.ID, to.HTTPAddr, method, path, time.Now())
	}
	asA := func(to *tc.Node, method, path, body, auth string) (int, string) {
		code, resp, _ := tc.Do(t, method, to.URL()+path, body, "Authorization", auth, "Content-Type", "application/json")
		return code, resp
	}
	// a acts as itself.
	if code, body := asA(leader, "GET", "/v1/cluster", "", signed(leader, "GET", "/v1/cluster")); code != 200 {
		t.Fatalf("%s's own signature: %d %s", a.ID, code, body)
	}
	join := func(id string) string {
		return `{"id":"` + id + `","raft_addr":"127.0.0.1:9","http_addr":"127.0.0.1:9","voter":false,"dry_run":true}`
	}
	for _, tt := range []struct {
		name, method, path, body, auth string
		want                           int
	}{
		{"remove another", "DELETE", "/v1/cluster/members/" + b.ID, "", signed(leader, "DELETE", "/v1/cluster/members/"+b.ID), 403},
		{"join as another", "POST", "/v1/cluster/join", join(b.ID), signed(leader, "POST", "/v1/cluster/join"), 403},
		{"a signature made for another node", "GET", "/v1/cluster", "", signed(b, "GET", "/v1/cluster"), 401},
		{"a signature of another request", "DELETE", "/v1/cluster/members/" + b.ID, "", signed(leader, "GET", "/v1/cluster"), 401},
		{"an old signature", "GET", "/v1/cluster", "", wire.MemberAuthorization(key, a.ID, leader.HTTPAddr, "GET", "/v1/cluster", time.Now().Add(-time.Hour)), 401},
		{"another's id on a's signature", "GET", "/v1/cluster", "", strings.Replace(signed(leader, "GET", "/v1/cluster"), "id="+a.ID, "id="+b.ID, 1), 401},
		{"the cluster secret as another", "DELETE", "/v1/cluster/members/" + b.ID, "", wire.NodeAuthorization(b.ID, testClusterSecret), 401},
		{"the cluster secret as itself", "GET", "/v1/cluster", "", wire.NodeAuthorization(a.ID, testClusterSecret), 401},
	} {
		if code, body := asA(leader, tt.method, tt.path, tt.body, tt.auth); code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, code, body, tt.want)
		}
	}
	if st, err := leader.Inst.Node.Status(); err != nil || len(st.Members) != 3 {
		t.Fatalf("members after the attempts: %+v %v", st.Members, err)
	}
}
