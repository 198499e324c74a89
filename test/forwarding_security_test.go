package test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/internal/acl"
	"github.com/fencer-io/fencer/internal/server"
	"github.com/fencer-io/fencer/internal/tlsutil"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

const (
	goneSecret     = "gone-secret-0123456789"
	opsSecret      = "operator-secret-012345678"
	jobsSecret     = "client-secret-0123456789"
	readerSecret   = "reader-secret-0123456789"
	forwardACLFile = `{"tokens":[
 {"name":"gone","secret":"` + goneSecret + `","role":"operator","keys":["*"]},
 {"name":"ops","secret":"` + opsSecret + `","role":"operator","keys":["*"]},
 {"name":"jobs-client","secret":"` + jobsSecret + `","role":"client","locks":["jobs."],"keys":["jobs."]},
 {"name":"dashboard","secret":"` + readerSecret + `","role":"reader","keys":["*"]}
]}`
)

// secureCluster is a 3-node cluster (with a node certificate for a fourth) with mutual TLS between nodes, TLS on
// the API, each node its own copy of the ACL file, and each node's audit
// log kept.
type secureCluster struct {
	*tc.Cluster
	dir    string
	acl    map[string]*acl.Store
	files  map[string]string
	logs   map[string]*tc.SyncBuffer
	client *http.Client
}

func newSecureCluster(t *testing.T) *secureCluster {
	dir := pki(t, "n1", "n2", "n3", "n4")
	sc := &secureCluster{dir: dir, acl: map[string]*acl.Store{}, files: map[string]string{}, logs: map[string]*tc.SyncBuffer{}}
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		sc.files[id] = filepath.Join(t.TempDir(), id+"-acl.json")
		if err := os.WriteFile(sc.files[id], []byte(forwardACLFile), 0o600); err != nil {
			t.Fatal(err)
		}
		store, err := acl.Open(sc.files[id])
		if err != nil {
			t.Fatal(err)
		}
		sc.acl[id], sc.logs[id] = store, &tc.SyncBuffer{}
	}
	sc.Cluster = tc.New(t, 3, tc.Options{
		Configure: func(cfg *cluster.Config) {
			peerTLS(t, dir, cfg.ID)(cfg)
			cfg.Logger = slog.New(slog.NewTextHandler(sc.logs[cfg.ID], nil))
		},
		Server: func(id string) server.Options {
			o := httpTLS(t, dir, id)
			o.ACL = sc.acl[id]
			return o
		},
	})
	// A client that trusts the CA and presents no certificate. HTTP/1.1
	// only (a custom TLS config turns HTTP/2 off): Connection headers do not
	// exist in HTTP/2.
	cfg, err := tlsutil.ClientConfig(filepath.Join(dir, tlsutil.CAFile), "", "")
	if err != nil {
		t.Fatal(err)
	}
	sc.client = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	return sc
}

// do sends a request as secret ("" for none), naming Authorization as a
// hop-by-hop header when hop is set, and returns the status.
func (sc *secureCluster) do(t *testing.T, n *tc.Node, method, path, body, secret string, hop bool, headers ...string) int {
	t.Helper()
	if secret != "" {
		headers = append(headers, "Authorization", "Bearer "+secret)
	}
	if hop {
		headers = append(headers, "Connection", "Authorization")
	}
	resp, err := sc.client.Do(tc.NewRequest(t, method, "https://"+n.HTTPAddr+path, body, headers...))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (sc *secureCluster) follower() *tc.Node {
	for _, n := range sc.Running() {
		if !n.Inst.Node.IsLeader() {
			return n
		}
	}
	return nil
}

// A client cannot shed its identity on the way through a follower and be
// served as the forwarding node: with a token the leader no longer knows,
// every path answers 401, including the one where the client names
// Authorization in Connection so that a proxy drops it; and the leader's
// audit log names the client, never the node that forwarded.
func TestForwardingKeepsTheClientsIdentity(t *testing.T) {
	sc := newSecureCluster(t)
	leader := sc.WaitLeader(10 * time.Second)
	follower := sc.follower()
	// The leader stops knowing "gone"; the follower still does.
	trimmed := strings.Replace(forwardACLFile, `{"name":"gone","secret":"`+goneSecret+`","role":"operator","keys":["*"]},`, "", 1)
	if err := os.WriteFile(sc.files[leader.ID], []byte(trimmed), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sc.acl[leader.ID].Reload(); err != nil {
		t.Fatal(err)
	}
	auditFrom := len(sc.logs[leader.ID].String())

	acquire := `{"holder":"intruder","ttl_ms":5000}`
	for _, r := range []struct {
		name string
		n    *tc.Node
		hop  bool
	}{{"direct", leader, false}, {"via follower", follower, false}, {"via follower, Connection: Authorization", follower, true}} {
		if s := sc.do(t, r.n, "POST", "/v1/locks/jobs.x/acquire", acquire, goneSecret, r.hop); s != http.StatusUnauthorized {
			t.Errorf("%s: acquire with a token the leader does not know: %d, want 401", r.name, s)
		}
		if s := sc.do(t, r.n, "PUT", "/v1/kv/report", "v", goneSecret, r.hop, "Fencing-Token", "1"); s != http.StatusUnauthorized {
			t.Errorf("%s: fenced write with a token the leader does not know: %d, want 401", r.name, s)
		}
		if s := sc.do(t, r.n, "POST", "/v1/cluster/leader/transfer", "{}", goneSecret, r.hop); s != http.StatusUnauthorized {
			t.Errorf("%s: transfer with a token the leader does not know: %d, want 401", r.name, s)
		}
	}
	if l := sc.Leader(); l == nil || l.ID != leader.ID {
		t.Fatal("leadership moved: a refused transfer was carried out")
	}
	if st, _ := leader.Inst.Coord.Lock(context.Background(), "jobs.x", true); st.Held {
		t.Fatal("a refused acquire was applied")
	}
	// A known operator through the follower, Authorization named hop-by-hop:
	// served as itself, and audited as itself.
	if s := sc.do(t, follower, "GET", "/v1/cluster/snapshot", "", opsSecret, true); s != http.StatusOK {
		t.Fatalf("operator snapshot via follower: %d", s)
	}
	audit := sc.logs[leader.ID].String()[auditFrom:]
	for _, line := range strings.Split(audit, "\n") {
		// A member's own registration (a join, retried while it starts)
		// is a node's request; anything else as a node was forwarded.
		if strings.Contains(line, "who=node:") && !strings.Contains(line, "action=join") {
			t.Fatalf("the leader served a forwarded request as the forwarding node:\n%s", audit)
		}
	}
	if !strings.Contains(audit, "who=ops action=snapshot") || !strings.Contains(audit, "via="+follower.ID) {
		t.Fatalf("the leader's audit log does not name the operator and the member that forwarded:\n%s", audit)
	}
	// Node identity still serves what nodes ask of each other, but only
	// at the node it was sent to: n4's certificate asking a follower
	// whether it could join (a dry run) is sent to the leader, named in
	// Fencer-Leader (the leader believes no member's word for another,
	// F8), and the leader itself answers n4 as n4; it may not take a
	// snapshot.
	asN4 := sc.asNode(t, "n4")
	dryRun := `{"id":"n4","raft_addr":"127.0.0.1:9","http_addr":"127.0.0.1:9","voter":true,"dry_run":true}`
	if s, h := asN4(follower, "POST", "/v1/cluster/join", dryRun); s != http.StatusServiceUnavailable || h.Get(wire.HeaderLeader) != leader.HTTPAddr {
		t.Fatalf("n4's dry-run join through a follower: %d, %s %q; want 503 naming the leader %s", s, wire.HeaderLeader, h.Get(wire.HeaderLeader), leader.HTTPAddr)
	}
	if s, _ := asN4(leader, "POST", "/v1/cluster/join", dryRun); s != http.StatusOK {
		t.Fatalf("n4's dry-run join at the leader: %d", s)
	}
	if s, _ := asN4(follower, "GET", "/v1/cluster/snapshot", ""); s != http.StatusForbidden {
		t.Fatalf("n4's snapshot through a follower: %d, want 403", s)
	}
	joined := false
	for _, line := range strings.Split(sc.logs[leader.ID].String(), "\n") {
		joined = joined || strings.Contains(line, "who=node:n4 action=join") && strings.Contains(line, "status=200")
	}
	if !joined {
		t.Fatalf("the leader did not see n4's join as n4's:\n%s", sc.logs[leader.ID].String())
	}
}

// asNode is a client presenting node id's certificate: it sends a request
// to a node, with headers, and returns the status and the answer's header.
func (sc *secureCluster) asNode(t *testing.T, id string) func(n *tc.Node, method, path, body string, headers ...string) (int, http.Header) {
	cfg, err := tlsutil.ClientConfig(filepath.Join(sc.dir, tlsutil.CAFile), filepath.Join(sc.dir, id+".pem"), filepath.Join(sc.dir, id+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	return func(n *tc.Node, method, path, body string, headers ...string) (int, http.Header) {
		t.Helper()
		resp, err := hc.Do(tc.NewRequest(t, method, "https://"+n.HTTPAddr+path, body, append(headers, "Content-Type", "application/json")...))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
}

// F8 of issue 26, with real nodes and TLS: a member's certificate named
// another member in Fencer-Forwarded-By / Fencer-Forwarded-Principal and
// was served as it (`curl --cert n2.pem -X DELETE -H 'Fencer-Forwarded-By:
// n2' -H 'Fencer-Forwarded-Principal: node:rogue' …/members/rogue` removed
// rogue, where a direct delete of n3 was 403). A forwarded principal is
// believed only from the member whose certificate sent it, as itself; and
// a member's certificate joins only as itself.
func TestForwardedPrincipalOnlyFromItsOwnNode(t *testing.T) {
	sc := newSecureCluster(t)
	leader := sc.WaitLeader(10 * time.Second)
	var member *tc.Node // a member that is not the leader, holding its own certificate
	for _, n := range sc.Running() {
		if n != leader {
			member = n
		}
	}
	// An operator adds a member "rogue" (any id will do: the victim).
	if s := sc.do(t, leader, "POST", "/v1/cluster/members", `{"id":"rogue","raft_addr":"127.0.0.1:9","http_addr":"127.0.0.1:9","voter":false}`, opsSecret, false,
		"Content-Type", "application/json"); s != http.StatusOK {
		t.Fatalf("add rogue: %d", s)
	}
	as := sc.asNode(t, member.ID)
	isMember := func(id string) bool {
		st, err := leader.Inst.Node.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range st.Members {
			if m.ID == id {
				return true
			}
		}
		return false
	}
	for _, tt := range []struct {
		name, method, path, body string
		headers                  []string
	}{
		{"the F8 curl", "DELETE", "/v1/cluster/members/rogue", "", []string{wire.HeaderForwardedBy, member.ID, wire.HeaderForwardedPrincipal, "node:rogue"}},
		{"another forwarder named", "DELETE", "/v1/cluster/members/rogue", "", []string{wire.HeaderForwardedBy, "rogue", wire.HeaderForwardedPrincipal, "node:rogue"}},
		{"a direct delete of another", "DELETE", "/v1/cluster/members/rogue", "", nil},
		{"a join as another", "POST", "/v1/cluster/join", `{"id":"rogue","raft_addr":"127.0.0.1:8","http_addr":"127.0.0.1:8","voter":false}`, nil},
		{"a forwarded join as another", "POST", "/v1/cluster/join", `{"id":"rogue","raft_addr":"127.0.0.1:8","http_addr":"127.0.0.1:8","voter":false}`,
			[]string{wire.HeaderForwardedBy, member.ID, wire.HeaderForwardedPrincipal, "node:rogue"}},
	} {
		if s, _ := as(leader, tt.method, tt.path, tt.body, tt.headers...); s == http.StatusOK {
			t.Errorf("%s with %s's certificate: %d, want refused", tt.name, member.ID, s)
		}
	}
	if !isMember("rogue") {
		t.Fatalf("%s's certificate removed another member", member.ID)
	}
	if rec := memberRecord(t, leader, "rogue"); rec.RaftAddr != "127.0.0.1:9" {
		t.Fatalf("%s's certificate moved another member: %+v", member.ID, rec)
	}
	// The member still acts as itself, forwarded by itself too.
	if s, _ := as(leader, "GET", "/v1/cluster", "", wire.HeaderForwardedBy, member.ID, wire.HeaderForwardedPrincipal, "node:"+member.ID); s != http.StatusOK {
		t.Fatalf("%s's own request, forwarded by itself: %d", member.ID, s)
	}
}

// Snapshots hold every lease secret: they never leave a node for anyone but
// an operator, whichever node is asked and however the request is dressed.
func TestSnapshotsOnlyForOperators(t *testing.T) {
	sc := newSecureCluster(t)
	leader := sc.WaitLeader(10 * time.Second)
	for _, n := range []*tc.Node{leader, sc.follower()} {
		for _, hop := range []bool{false, true} {
			for secret, want := range map[string]int{"": 401, "wrong-secret-0123456789": 401, readerSecret: 403, jobsSecret: 403, opsSecret: 200} {
				if s := sc.do(t, n, "GET", "/v1/cluster/snapshot", "", secret, hop); s != want {
					t.Errorf("snapshot from %s as %.6q (hop %v): %d, want %d", n.ID, secret, hop, s, want)
				}
			}
		}
	}
}
