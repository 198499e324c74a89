package test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/internal/acl"
	"github.com/fencer-io/fencer/internal/server"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

const (
	testClusterSecret     = "cluster-secret-0123456789abcdef0123456789"
	readerAuthorization   = "Bearer reader-secret-0123456789"
	operatorAuthorization = "Bearer operator-secret-012345678"
)

// secretACL writes the ACL file and returns server options that load it
// with the cluster secret, as fencer serve --acl-file --cluster-secret-file
// does (no TLS).
func secretACL(t *testing.T) func(string) server.Options {
	return aclServer(t, aclFile, acl.WithClusterSecret(testClusterSecret))
}

// A cluster with ACLs and no TLS: members present the cluster secret to
// each other, so joins are admitted, each member records its incarnation
// and log format (the leader switches to binary entries, and a wiped member
// is refused under its old id), removing the leader works (it asks the new
// leader to remove it), and no node-to-node call is refused. A node without
// the secret, or with another, is refused at once with a message saying
// why (issue 13 item 3: the calls carried no credential and were refused
// forever).
func TestACLWithoutTLSMembersUseTheClusterSecret(t *testing.T) {
	var logs tc.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	withSecret := func(secret string) func(*cluster.Config) {
		return func(cfg *cluster.Config) {
			cfg.ClusterSecret = secret
			cfg.JoinTimeout = 20 * time.Second
			cfg.Logger = logger
		}
	}
	c := tc.New(t, 3, tc.Options{Configure: withSecret(testClusterSecret), Server: secretACL(t)})
	leader := c.WaitLeader(10 * time.Second)
	tc.Poll(t, 15*time.Second, "the leader writes this build's entries", func() bool {
		var st wire.ClusterStatus
		code, body, _ := tc.Do(t, "GET", leader.URL()+"/v1/cluster", "", "Authorization", readerAuthorization)
		return code == 200 && json.Unmarshal([]byte(body), &st) == nil && st.LogFormat == entry.LogFormat
	})
	for _, n := range c.Nodes {
		if m := memberRecord(t, leader, n.ID); m.Incarnation == "" || m.LogFormat != entry.LogFormat {
			t.Fatalf("member %s recorded as %+v", n.ID, m)
		}
	}
	// Every member registered its own key, and the secret no longer
	// speaks for it (a member could claim another's id with it)...
	tc.Poll(t, 15*time.Second, "every member registers its key", func() bool {
		for _, n := range c.Nodes {
			if m := memberRecord(t, leader, n.ID); m.Key == "" {
				return false
			}
		}
		return true
	})
	for _, n := range c.Nodes {
		code, body, _ := tc.Do(t, "GET", leader.URL()+"/v1/cluster", "", "Authorization", wire.NodeAuthorization(n.ID, testClusterSecret))
		if code != 401 || !strings.Contains(body, wire.CodeKeyedMember) {
			t.Fatalf("the cluster secret as keyed member %s: %d %s, want 401 %s", n.ID, code, body, wire.CodeKeyedMember)
		}
	}
	// ... but it is still a joiner's credential (an id with no key), for
	// what members ask of each other, and for nothing else.
	node := wire.NodeAuthorization("n9", testClusterSecret)
	for _, tt := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/v1/cluster", "", 200},
		{"POST", "/v1/locks/x/acquire", `{"holder":"w","ttl_ms":5000}`, 403},
		{"GET", "/v1/locks", "", 403},
		{"GET", "/v1/cluster/snapshot", "", 403},
		{"DELETE", "/v1/cluster/members/n3", "", 403},
		{"POST", "/v1/cluster/join", `{"id":"n3","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, 403},
		{"POST", "/v1/cluster/members", `{"id":"n9","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, 403},
	} {
		if code, body, _ := tc.Do(t, tt.method, leader.URL()+tt.path, tt.body, "Authorization", node, "Content-Type", "application/json"); code != tt.want {
			t.Errorf("%s %s with the cluster secret: %d %s, want %d", tt.method, tt.path, code, body, tt.want)
		}
	}
	code, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/locks/binary-lock/acquire", `{"holder":"w","ttl_ms":5000}`, "Authorization", operatorAuthorization)
	if code != 200 {
		t.Fatalf("acquire: %d %s", code, body)
	}

	// A wiped member is refused under its old id.
	victim := c.Nodes[2]
	if victim == leader {
		victim = c.Nodes[1]
	}
	tc.Poll(t, 10*time.Second, "the grant reached "+victim.ID, func() bool {
		st, _ := victim.Inst.Coord.Lock(context.Background(), "binary-lock", true)
		return st.Held
	})
	if before := logs.String(); strings.Contains(before, "status=401") {
		t.Fatalf("node-to-node calls were refused:\n%s", grepLines(before, "status=401"))
	}
	c.Stop(victim)
	c.Forget(victim)
	if got := lockCycleTypes(t, victim.DataDir)["binary-lock"]; got != "binary" {
		t.Fatalf("the acquire was written as %q", got)
	}
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatal(err)
	}
	// Its new data dir holds a new member key: it cannot prove it is the
	// member, and the cluster secret does not speak for a keyed one.
	if _, err := c.TryAdd(victim.ID, withSecret(testClusterSecret)); err == nil || !strings.Contains(err.Error(), "member key recorded") {
		t.Fatalf("wiped member under its old id: %v, want refused (its key is not the member's)", err)
	}

	refusedBefore := len(logs.String()) // the wiped member's refusals

	// Replace it with n4, then remove the leader: it hands leadership over
	// and asks the new leader, as a member, to remove it.
	if code, body, _ := tc.Do(t, "DELETE", leader.URL()+"/v1/cluster/members/"+victim.ID, "", "Authorization", operatorAuthorization); code != 200 {
		t.Fatalf("remove %s: %d %s", victim.ID, code, body)
	}
	c.Add("n4", withSecret(testClusterSecret))
	c.WaitMembers(3, 20*time.Second)
	if code, body, _ := tc.Do(t, "DELETE", leader.URL()+"/v1/cluster/members/"+leader.ID, "", "Authorization", operatorAuthorization); code != 200 {
		t.Fatalf("remove the leader %s: %d %s", leader.ID, code, body)
	}
	c.Stop(leader)
	c.Forget(leader)
	c.WaitMembers(2, 20*time.Second)
	if after := logs.String()[refusedBefore:]; strings.Contains(after, "status=401") {
		t.Fatalf("node-to-node calls were refused:\n%s", grepLines(after, "status=401"))
	}

	for _, secret := range []string{"", "another-secret-0123456789abcdef0123456"} {
		start := time.Now()
		_, err := c.TryAdd("n5", withSecret(secret))
		if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "cluster secret") {
			t.Fatalf("a node with secret %q: %v, want refused as unauthorized", secret, err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("a node with secret %q was refused only after %v", secret, took)
		}
	}
}

// Nodes started together (--initial-cluster) with ACLs and no TLS probe
// each other with the cluster secret: all register, and a member restarted
// with a wiped data dir learns that the cluster runs and is refused, where
// a refused probe made it bootstrap afresh under its old id.
func TestACLWithoutTLSInitialClusterProbesWithTheSecret(t *testing.T) {
	dir := t.TempDir()
	var peers []cluster.Peer
	for _, id := range []string{"n1", "n2", "n3"} {
		peers = append(peers, cluster.Peer{ID: id, RaftAddr: freeAddr(t), HTTPAddr: freeAddr(t)})
	}
	opts := secretACL(t)
	start := func(p cluster.Peer) (*server.Instance, error) {
		cfg := cluster.Config{ID: p.ID, DataDir: filepath.Join(dir, p.ID), RaftAddr: p.RaftAddr, HTTPAddr: p.HTTPAddr,
			InitialCluster: peers, ClusterSecret: testClusterSecret, JoinTimeout: 20 * time.Second, Logger: tc.Logger(t)}
		return server.Start(cfg, p.HTTPAddr, opts(p.ID))
	}
	nodes := map[string]*server.Instance{}
	t.Cleanup(func() {
		for _, in := range nodes {
			in.Close()
		}
	})
	for _, p := range peers {
		in, err := start(p)
		if err != nil {
			t.Fatalf("start %s: %v", p.ID, err)
		}
		nodes[p.ID] = in
	}
	var leader *server.Instance
	tc.Poll(t, 30*time.Second, "every member registered (this build's entries)", func() bool {
		for _, in := range nodes {
			if st, err := in.Node.Status(); err == nil && in.Node.IsLeader() && st.LogFormat == entry.LogFormat {
				leader = in
				return true
			}
		}
		return false
	})
	var victim cluster.Peer
	for _, p := range peers {
		if p.ID != leader.Node.ID() {
			victim = p
		}
	}
	nodes[victim.ID].Close()
	delete(nodes, victim.ID)
	if err := os.RemoveAll(filepath.Join(dir, victim.ID)); err != nil {
		t.Fatal(err)
	}
	in, err := start(victim)
	if err == nil {
		nodes[victim.ID] = in
	}
	if err == nil || !strings.Contains(err.Error(), "member key recorded") {
		t.Fatalf("wiped member restarted with the initial cluster: %v, want refused (its key is not the member's)", err)
	}
}

// A member whose credential the others refuse (here started with another
// secret in an initial cluster, so Raft counts it while the API refuses it)
// says so once and retries its registration every 10 s, not every 500 ms:
// the leader's audit log does not fill with refusals.
func TestRefusedMemberRetriesSlowly(t *testing.T) {
	dir := t.TempDir()
	var peers []cluster.Peer
	for _, id := range []string{"n1", "n2", "n3"} {
		peers = append(peers, cluster.Peer{ID: id, RaftAddr: freeAddr(t), HTTPAddr: freeAddr(t)})
	}
	var logs tc.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	opts := secretACL(t)
	for _, p := range peers {
		secret := testClusterSecret
		if p.ID == "n3" {
			secret = "another-secret-0123456789abcdef0123456"
		}
		cfg := cluster.Config{ID: p.ID, DataDir: filepath.Join(dir, p.ID), RaftAddr: p.RaftAddr, HTTPAddr: p.HTTPAddr,
			InitialCluster: peers, ClusterSecret: secret, Logger: logger.With("self", p.ID)}
		in, err := server.Start(cfg, p.HTTPAddr, opts(p.ID))
		if err != nil {
			t.Fatalf("start %s: %v", p.ID, err)
		}
		t.Cleanup(func() { in.Close() })
	}
	refusals := func() int { return strings.Count(logs.String(), "status=401") }
	tc.Poll(t, 30*time.Second, "n3's registration refused", func() bool { return refusals() > 0 })
	first := time.Now()
	tc.Poll(t, 10*time.Second, "n3 saying why", func() bool {
		return strings.Contains(logs.String(), "the cluster refuses this node's credential")
	})
	// Poll with a deadline for a state that must not come: a second
	// refusal within 4 s of the first.
	for time.Since(first) < 4*time.Second {
		if n := refusals(); n > 2 {
			t.Fatalf("%d refusals within %v:\n%s", n, time.Since(first), grepLines(logs.String(), "status=401"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
