package test

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster/datadir"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

func twoFollowers(c *tc.Cluster, leader *tc.Node) (a, b *tc.Node) {
	for _, n := range c.Nodes {
		switch {
		case n == leader:
		case a == nil:
			a = n
		default:
			b = n
		}
	}
	return a, b
}

// A member's signature covers neither the body nor Fencer-Member-Key, so
// one of a's joins seen on the wire (a plaintext cluster) could be sent
// again within the signature's window with another body and key: the leader
// recorded the attacker's key for a, and the attacker, now "a", removed the
// voter a (found by a review). A node refuses a signed change it has seen
// before. Fails with acl's replays.first always true.
func TestReplayedMemberSignatureIsRefused(t *testing.T) {
	c, leader := secretCluster(t)
	a, _ := twoFollowers(c, leader)
	rec := memberRecord(t, leader, a.ID)
	keyA, err := datadir.LoadMemberKey(a.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	// What a sends when it registers (here: a dry run), as seen on the wire.
	captured := wire.MemberAuthorization(keyA, a.ID, leader.HTTPAddr, "POST", "/v1/cluster/join", time.Now())
	dry := `{"id":"` + a.ID + `","raft_addr":"` + rec.RaftAddr + `","http_addr":"` + rec.HTTPAddr + `","voter":true,"incarnation":"` + rec.Incarnation + `","dry_run":true}`
	if code, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/cluster/join", dry, "Authorization", captured, "Content-Type", "application/json"); code != 200 {
		t.Fatalf("a's own dry run: %d %s", code, body)
	}
	// The replay: the same Authorization, another body and another key.
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	evil := strings.Replace(dry, `,"dry_run":true`, ``, 1)
	code, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/cluster/join", evil, "Authorization", captured,
		"Content-Type", "application/json", wire.HeaderMemberKey, wire.MemberKeyString(pub), wire.HeaderLogFormat, "7")
	if code != 401 {
		t.Errorf("a replayed signature with a new body and key: %d %s, want 401", code, body)
	}
	if got := memberRecord(t, leader, a.ID).Key; got == wire.MemberKeyString(pub) {
		del := wire.MemberAuthorization(priv, a.ID, leader.HTTPAddr, "DELETE", "/v1/cluster/members/"+a.ID, time.Now())
		code, body, _ := tc.Do(t, "DELETE", leader.URL()+"/v1/cluster/members/"+a.ID, "", "Authorization", del)
		t.Errorf("a replayed signature recorded the attacker's key for %s; with it: DELETE %s -> %d %s", a.ID, a.ID, code, body)
	}
}

// An operator's routine add of an existing member (an address change, a
// promotion) keeps its key: it used to clear it, and until the member
// noticed, whoever held the cluster secret could register a key of its own
// for the id and lock the member out (found by a review). Fails with
// membership.memberRecord clearing the key on an operator's add.
func TestOperatorsAddKeepsTheMembersKey(t *testing.T) {
	c, leader := secretCluster(t)
	a, _ := twoFollowers(c, leader)
	rec := memberRecord(t, leader, a.ID)
	if rec.Key == "" {
		t.Fatalf("%s has no key recorded: %+v", a.ID, rec)
	}
	add := `{"id":"` + a.ID + `","raft_addr":"` + rec.RaftAddr + `","http_addr":"127.0.0.1:9"}`
	if code, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/cluster/members", add, "Authorization", operatorAuthorization, "Content-Type", "application/json"); code != 200 {
		t.Fatalf("members add: %d %s", code, body)
	}
	if got := memberRecord(t, leader, a.ID); got.Key != rec.Key || got.HTTPAddr != "127.0.0.1:9" {
		t.Fatalf("after an operator's add: %+v, want the new address and the key %s", got, rec.Key)
	}
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	join := `{"id":"` + a.ID + `","raft_addr":"` + rec.RaftAddr + `","http_addr":"` + rec.HTTPAddr + `","voter":true,"incarnation":"` + rec.Incarnation + `"}`
	code, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/cluster/join", join, "Authorization", wire.NodeAuthorization(a.ID, testClusterSecret),
		"Content-Type", "application/json", wire.HeaderMemberKey, wire.MemberKeyString(pub), wire.HeaderLogFormat, "7")
	if code != 401 {
		t.Fatalf("the cluster secret claiming %s after an operator's add: %d %s, want 401", a.ID, code, body)
	}
}
