package test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/internal/acl"
	"github.com/fencer-io/fencer/internal/server"
	"github.com/fencer-io/fencer/internal/tlsutil"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// pki writes a development CA and node certificates into a temp dir.
func pki(t *testing.T, nodes ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if err := tlsutil.GenerateDevPKI(dir, nodes, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func peerTLS(t *testing.T, dir, id string) func(*cluster.Config) {
	return func(cfg *cluster.Config) {
		srv, cli, err := tlsutil.PeerConfig(filepath.Join(dir, id+".pem"), filepath.Join(dir, id+"-key.pem"), filepath.Join(dir, tlsutil.CAFile))
		if err != nil {
			t.Fatal(err)
		}
		cfg.PeerTLSServer, cfg.PeerTLSClient = srv, cli
	}
}

func httpTLS(t *testing.T, dir, id string) server.Options {
	cfg, err := tlsutil.ServerConfig(filepath.Join(dir, id+".pem"), filepath.Join(dir, id+"-key.pem"), filepath.Join(dir, tlsutil.CAFile), false)
	if err != nil {
		t.Fatal(err)
	}
	return server.Options{TLS: cfg}
}

// A cluster with mutual TLS between nodes works end to end; a node with a
// certificate from another CA cannot join; plaintext to the Raft port gets
// nothing.
func TestMutualTLSCluster(t *testing.T) {
	dir := pki(t, "n1", "n2", "n3", "n4")
	c := tc.New(t, 3, tc.Options{
		Configure: func(cfg *cluster.Config) { peerTLS(t, dir, cfg.ID)(cfg) },
		Server:    func(id string) server.Options { return httpTLS(t, dir, id) },
	})
	clientTLS, err := tlsutil.ClientConfig(filepath.Join(dir, tlsutil.CAFile), filepath.Join(dir, tlsutil.ClientFile), filepath.Join(dir, tlsutil.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(endpoints(c), client.WithTLS(clientTLS))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := cl.Acquire(ctx, "secure", client.TTL(5*time.Second), client.NoKeepAlive())
	if err != nil {
		t.Fatalf("acquire over TLS: %v", err)
	}
	// Through a follower: forwarding runs over https with the node's cert.
	var follower *tc.Node
	for _, n := range c.Running() {
		if !n.Inst.Node.IsLeader() {
			follower = n
		}
	}
	fc, _ := client.New([]string{follower.HTTPAddr}, client.WithTLS(clientTLS))
	if err := fc.PutFenced(ctx, "k", []byte("v"), lease.Token()); err != nil {
		t.Fatalf("fenced write via follower over TLS: %v", err)
	}

	rogue := pki(t, "n4")
	_, err = c.TryAdd("n4", func(cfg *cluster.Config) {
		peerTLS(t, rogue, "n4")(cfg)
		cfg.JoinTimeout = 3 * time.Second
	})
	if err == nil {
		t.Fatal("a node with a certificate from another CA joined")
	}
	if st, _ := c.WaitLeader(10 * time.Second).Inst.Node.Status(); len(st.Members) != 3 {
		t.Fatalf("membership changed: %+v", st.Members)
	}

	// Plaintext to the Raft port: the handshake fails and nothing answers.
	conn, err := net.DialTimeout("tcp", c.Nodes[0].RaftAddr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{0, 0x81, 0xa4, 'T', 'e', 'r', 'm', 0xcd, 0x03, 0xe8}) // rpcRequestVote, msgpack-ish
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err == nil && n > 0 && buf[0] != 0x15 { // 0x15: a TLS alert record is the only acceptable answer
		t.Fatalf("plaintext got an answer: %x", buf[:n])
	}
	if st, _ := c.Nodes[0].Inst.Node.Status(); st.Term > 100 {
		t.Fatal("plaintext moved the term")
	}
}

const aclFile = `{"tokens":[
 {"name":"jobs-client","secret":"client-secret-0123456789","role":"client","locks":["jobs."],"keys":["jobs."]},
 {"name":"dashboard","secret":"reader-secret-0123456789","role":"reader","keys":["*"]},
 {"name":"ops","secret":"operator-secret-012345678","role":"operator","keys":["*"]}
]}`

// aclServer writes file as an ACL file and returns server options that load
// it with opts, as fencer serve --acl-file does.
func aclServer(t *testing.T, file string, opts ...acl.StoreOption) func(string) server.Options {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl.json")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(string) server.Options {
		store, err := acl.Open(path, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return server.Options{ACL: store}
	}
}

// Each role against the endpoints that matter: allowed, 401, 403, prefixes.
func TestACLRoles(t *testing.T) {
	c := tc.New(t, 1, tc.Options{Server: aclServer(t, aclFile)})
	n := c.WaitLeader(10 * time.Second)
	as := func(secret, method, path, body string) int {
		t.Helper()
		var hdr []string
		if secret != "" {
			hdr = []string{"Authorization", "Bearer " + secret}
		}
		status, _, _ := tc.Do(t, method, n.URL()+path, body, hdr...)
		return status
	}
	const (
		client   = "client-secret-0123456789"
		reader   = "reader-secret-0123456789"
		operator = "operator-secret-012345678"
	)
	acquire := `{"holder":"w","ttl_ms":5000}`
	for _, tt := range []struct {
		who, method, path, body string
		want                    int
	}{
		{"", "POST", "/v1/locks/jobs.a/acquire", acquire, 401},
		{"wrong-secret-0123456789", "POST", "/v1/locks/jobs.a/acquire", acquire, 401},
		{client, "POST", "/v1/locks/jobs.a/acquire", acquire, 200},
		{client, "POST", "/v1/locks/other/acquire", acquire, 403},
		{reader, "POST", "/v1/locks/jobs.b/acquire", acquire, 403},
		{operator, "POST", "/v1/locks/other/acquire", acquire, 200},
		{reader, "GET", "/v1/locks/jobs.a", "", 200},
		{client, "GET", "/v1/locks/jobs.a", "", 200},
		{"", "GET", "/v1/locks/jobs.a", "", 401},
		{client, "GET", "/v1/cluster/snapshot", "", 403},
		{reader, "GET", "/v1/cluster/snapshot", "", 403},
		{operator, "GET", "/v1/cluster/snapshot", "", 200},
		{client, "DELETE", "/v1/cluster/members/n9", "", 403},
		{client, "POST", "/v1/cluster/leader/transfer", "{}", 403},
		{"", "GET", "/healthz", "", 200},
	} {
		if got := as(tt.who, tt.method, tt.path, tt.body); got != tt.want {
			who := tt.who
			if len(who) > 6 {
				who = who[:6]
			}
			t.Errorf("%s %s %s: %d, want %d", who, tt.method, tt.path, got, tt.want)
		}
	}
	// Reads are scoped too: the list leaves out locks beyond the client's
	// prefixes, and a write may not probe another lock's token.
	status, body, _ := tc.Do(t, "GET", n.URL()+"/v1/locks", "", "Authorization", "Bearer "+client)
	var list wire.LockList
	mustJSON(t, body, &list)
	if status != 200 || len(list.Locks) == 0 {
		t.Fatalf("client list: %d %s", status, body)
	}
	for _, l := range list.Locks {
		if !strings.HasPrefix(l.Lock, "jobs.") {
			t.Fatalf("a client limited to jobs. lists %q (holder %q, token %d)", l.Lock, l.Holder, l.Token)
		}
	}
	status, body, _ = tc.Do(t, "GET", n.URL()+"/v1/locks", "", "Authorization", "Bearer "+reader)
	if mustJSON(t, body, &list); status != 200 || !slices.ContainsFunc(list.Locks, func(l wire.LockStatus) bool { return l.Lock == "other" }) {
		t.Fatalf("an unscoped reader does not list other: %d %s", status, body)
	}
	if s := doAs(t, n, client, "PUT", "/v1/kv/jobs.k", "v", "Fencing-Token", "1", "Fencing-Lock", "other"); s != http.StatusForbidden {
		t.Fatalf("Fencing-Lock beyond the client's prefixes: %d, want 403", s)
	}

	// Renew and release still need the lease secret, whatever the role.
	status, body, _ = tc.Do(t, "POST", n.URL()+"/v1/locks/jobs.c/acquire", acquire, "Authorization", "Bearer "+client)
	if status != 200 {
		t.Fatalf("acquire: %d %s", status, body)
	}
	var g wire.Grant
	mustJSON(t, body, &g)
	wrong := fmt.Sprintf(`{"lease":"%s","token":%d}`, strings.Repeat("0", 32), g.Token)
	if s := as(operator, "POST", "/v1/locks/jobs.c/release", wrong); s != http.StatusGone {
		t.Fatalf("operator releasing without the lease secret: %d", s)
	}
}

// doAs sends a request with a bearer token and more headers; it returns the
// status.
func doAs(t *testing.T, n *tc.Node, secret, method, path, body string, headers ...string) int {
	t.Helper()
	status, _, _ := tc.Do(t, method, n.URL()+path, body, append([]string{"Authorization", "Bearer " + secret}, headers...)...)
	return status
}

// Limits refuse with clear codes and change nothing.
func TestLimitsRefuseWithoutChangingState(t *testing.T) {
	c := tc.New(t, 1, tc.Options{
		Server: func(string) server.Options {
			return server.Options{RateLimit: 20, Coord: coord.Config{MaxWaitersPerLock: 1, MaxLocksPerHolder: 2}}
		},
	})
	n := c.WaitLeader(10 * time.Second)
	held := mustAcquire(t, n, "busy", "w")

	// One waiter fits, a second is refused.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		acquire(t, n, "busy", "waiter-1", 5000, 3000)
	}()
	tc.Poll(t, 5*time.Second, "first waiter queued", func() bool { return n.Inst.Coord.Waiters("busy") == 1 })
	status, _, e := acquire(t, n, "busy", "waiter-2", 5000, 3000)
	if status != http.StatusTooManyRequests || e.Code != wire.CodeTooManyWaiters {
		t.Fatalf("second waiter: %d %+v", status, e)
	}
	wg.Wait()
	// A holder at its limit is refused.
	mustAcquire(t, n, "second", "w")
	if status, _, e := acquire(t, n, "third", "w", 5000, 0); status != http.StatusTooManyRequests || e.Code != wire.CodeTooManyLocks {
		t.Fatalf("holder over its limit: %d %+v", status, e)
	}
	// Oversized bodies: 413.
	big := strings.Repeat("x", 2<<20)
	if s, _, _ := tc.Do(t, "PUT", n.URL()+"/v1/kv/k", big, "Fencing-Token", "99"); s != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d", s)
	}
	// The rate limit: 429 with Retry-After.
	limited := 0
	for range 60 {
		resp, err := http.Get(n.URL() + "/v1/locks/busy?stale=true")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("60 requests in a burst were never rate limited at 20/s")
	}
	// Nothing refused changed the state: only the "second" grant happened.
	cur, _ := n.Inst.Coord.Lock(context.Background(), "busy", true)
	if cur.Token != held.Token {
		t.Fatalf("busy lock changed hands: %+v", cur)
	}
	if _, ok, _, _ := n.Inst.Coord.Get(context.Background(), "k", true); ok {
		t.Fatal("an oversized write was stored")
	}
}
