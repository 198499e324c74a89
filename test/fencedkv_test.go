package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
	"github.com/fencer-io/fencer/internal/acl"
	"github.com/fencer-io/fencer/internal/server"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// backupWith is a backup holding keys, taken at epoch with last token last.
func backupWith(t *testing.T, epoch, last uint64, keys ...entry.FencedKey) []byte {
	t.Helper()
	img := &snapshot.Image{Header: snapshot.Header{Format: snapshot.Format, Version: snapshot.Version, Epoch: epoch, LastToken: last, AppliedIndex: 3, Term: 1, Keys: len(keys)}, Keys: keys}
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// restore uploads a backup and returns the status and the error code.
func restore(t *testing.T, n *tc.Node, backup []byte, query string, headers ...string) (int, string) {
	t.Helper()
	status, body, _ := tc.Do(t, "POST", n.URL()+"/v1/cluster/restore"+query, string(backup), headers...)
	var e wire.Error
	if status != http.StatusOK {
		mustJSON(t, body, &e)
	}
	return status, e.Code
}

// Issue 13, item 1: a token nobody was issued (2^64-1) no longer blocks a
// fenced key for good. It is refused with 409 unissued_token; a mark that
// got there anyway (one from before this rule, kept by a restore) blocks
// the real holder until an operator deletes the key, which only an
// operator may do.
func TestUnissuedTokenAndKeyDelete(t *testing.T) {
	c := tc.New(t, 3, tc.Options{Configure: withClusterSecret, Server: secretACL(t)})
	leader := c.WaitLeader(10 * time.Second)
	var follower *tc.Node
	for _, n := range c.Running() {
		if n != leader {
			follower = n
		}
	}
	const client, operator = "client-secret-0123456789", "operator-secret-012345678"
	auth := func(secret string) []string { return []string{"Authorization", "Bearer " + secret} }
	status, body, _ := tc.Do(t, "POST", follower.URL()+"/v1/locks/jobs.report/acquire", `{"holder":"w","ttl_ms":30000}`, auth(client)...)
	var g wire.Grant
	if mustJSON(t, body, &g); status != 200 {
		t.Fatalf("acquire: %d %s", status, body)
	}
	// Through a follower as through the leader.
	for _, n := range []*tc.Node{follower, leader} {
		s, e := put(t, n, "jobs.report", "x", append(auth(client), wire.HeaderToken, "18446744073709551615")...)
		if s != http.StatusConflict || e.Code != wire.CodeUnissuedToken {
			t.Fatalf("unissued token via %s: %d %+v", n.ID, s, e)
		}
	}
	if s, e := put(t, follower, "jobs.report", "real", append(auth(client), wire.HeaderToken, tok(g.Token))...); s != 200 {
		t.Fatalf("the holder's write: %d %+v", s, e)
	}

	// A mark set before the rule: restored from a backup, which keeps marks.
	backup := backupWith(t, 0, 5, entry.FencedKey{Key: "jobs.report", Value: []byte("blocked"), Token: math.MaxUint64})
	if s, code := restore(t, leader, backup, "", auth(operator)...); s != 200 {
		t.Fatalf("restore: %d %s", s, code)
	}
	leader = c.WaitLeader(10 * time.Second)
	g = mustAcquireAs(t, leader, client, "jobs.report2")
	if s, e := put(t, leader, "jobs.report", "real", append(auth(client), wire.HeaderToken, tok(g.Token))...); s != http.StatusConflict || e.Code != wire.CodeStaleToken {
		t.Fatalf("the holder against a mark of 2^64-1: %d %+v", s, e)
	}
	if s, _, _ := tc.Do(t, "DELETE", leader.URL()+"/v1/kv/jobs.report", "", auth(client)...); s != http.StatusForbidden {
		t.Fatalf("a client's key delete: %d, want 403", s)
	}
	status, body, _ = tc.Do(t, "DELETE", follower.URL()+"/v1/kv/jobs.report", "", auth(operator)...)
	var del wire.DeleteKeyResponse
	if mustJSON(t, body, &del); status != 200 || del != (wire.DeleteKeyResponse{Key: "jobs.report", Deleted: true, LastToken: math.MaxUint64}) {
		t.Fatalf("operator's key delete: %d %s", status, body)
	}
	if s, e := put(t, leader, "jobs.report", "real", append(auth(client), wire.HeaderToken, tok(g.Token))...); s != 200 {
		t.Fatalf("the holder after the delete: %d %+v", s, e)
	}
	// Every member removed it and applied the write alike.
	tc.Poll(t, 10*time.Second, "members agree", func() bool {
		_, d := leader.Inst.Node.Digest()
		for _, n := range c.Running() {
			if _, dn := n.Inst.Node.Digest(); dn != d {
				return false
			}
		}
		return true
	})
}

// withClusterSecret gives a node the members' credential, which an ACL
// without TLS needs.
func withClusterSecret(cfg *cluster.Config) { cfg.ClusterSecret = testClusterSecret }

// mustAcquireAs acquires lock with a bearer token.
func mustAcquireAs(t *testing.T, n *tc.Node, secret, lock string) wire.Grant {
	t.Helper()
	status, body, _ := tc.Do(t, "POST", n.URL()+"/v1/locks/"+lock+"/acquire", `{"holder":"w","ttl_ms":30000}`, "Authorization", "Bearer "+secret)
	var g wire.Grant
	if mustJSON(t, body, &g); status != 200 {
		t.Fatalf("acquire %s: %d %s", lock, status, body)
	}
	return g
}

// Issue 13, item 5: a request id is its principal's. Another client with
// the same lock prefix replaying holder and request id gets 409 lock_held,
// not the grant and its secret; the owner's retry still gets its grant.
func TestRequestIDReplayByAnotherPrincipal(t *testing.T) {
	const file = `{"tokens":[
 {"name":"alice","secret":"alice-secret-0123456789","role":"client","locks":["jobs."],"keys":["*"]},
 {"name":"bob","secret":"bob-secret-0123456789ab","role":"client","locks":["jobs."],"keys":["*"]}
]}`
	c := tc.New(t, 3, tc.Options{Configure: withClusterSecret, Server: aclServer(t, file, acl.WithClusterSecret(testClusterSecret))})
	n := c.WaitLeader(10 * time.Second)
	// Request ids are bound once every member reads LogFormatPrincipal.
	c.WaitReady(15 * time.Second)
	body := `{"holder":"w","ttl_ms":30000,"request_id":"alice-0123456789abcdef"}`
	as := func(secret string) (int, wire.Grant, wire.Error) {
		status, resp, _ := tc.Do(t, "POST", n.URL()+"/v1/locks/jobs.a/acquire", body, "Authorization", "Bearer "+secret)
		var g wire.Grant
		var e wire.Error
		if status == 200 {
			mustJSON(t, resp, &g)
		} else {
			mustJSON(t, resp, &e)
		}
		return status, g, e
	}
	status, first, _ := as("alice-secret-0123456789")
	if status != 200 {
		t.Fatalf("alice: %d", status)
	}
	status, stolen, e := as("bob-secret-0123456789ab")
	if status != http.StatusConflict || e.Code != wire.CodeLockHeld || stolen.Lease != "" {
		t.Fatalf("bob replaying alice's request: %d %+v %+v", status, e, stolen)
	}
	status, again, _ := as("alice-secret-0123456789")
	if status != 200 || !again.Existing || again.Lease != first.Lease {
		t.Fatalf("alice's retry: %d %+v", status, again)
	}
	short := `{"holder":"w","request_id":"r-123456789abcd"}`
	if s, resp, _ := tc.Do(t, "POST", n.URL()+"/v1/locks/jobs.b/acquire", short, "Authorization", "Bearer alice-secret-0123456789"); s != 400 || !strings.Contains(resp, wire.CodeInvalidRequestID) {
		t.Fatalf("a 15-character request id: %d %s", s, resp)
	}
}

// Issue 13, item 6: the fenced store is bounded. A put past --max-kv-bytes
// or --max-keys is 429 kv_full and changes nothing; an overwrite counts the
// difference; a delete frees space; /metrics shows the totals.
func TestFencedStoreIsBounded(t *testing.T) {
	c := tc.New(t, 1, tc.Options{Server: func(string) server.Options {
		return server.Options{Coord: coord.Config{MaxKVBytes: 1000, MaxKeys: 2}}
	}})
	n := c.WaitLeader(10 * time.Second)
	g := mustAcquire(t, n, "writer", "w")
	write := func(key string, size int) (int, wire.Error) {
		t.Helper()
		g = mustAcquire(t, n, fmt.Sprintf("writer-%s-%d", key, size), "w") // a fresh token for each write
		return put(t, n, key, strings.Repeat("v", size), wire.HeaderToken, tok(g.Token))
	}
	gauges := func() (bytes, keys float64) {
		fams := scrape(t, n)
		return value(t, fams, "fencer_fenced_value_bytes"), value(t, fams, "fencer_fenced_keys")
	}
	if s, e := write("a", 600); s != 200 {
		t.Fatalf("first put: %d %+v", s, e)
	}
	if s, e := write("b", 600); s != http.StatusTooManyRequests || e.Code != wire.CodeKVFull {
		t.Fatalf("past --max-kv-bytes: %d %+v", s, e)
	}
	if s, e := write("a", 900); s != 200 {
		t.Fatalf("an overwrite within the limit: %d %+v", s, e)
	}
	if s, e := write("b", 100); s != 200 {
		t.Fatalf("second key: %d %+v", s, e)
	}
	if s, e := write("c", 0); s != http.StatusTooManyRequests || e.Code != wire.CodeKVFull {
		t.Fatalf("past --max-keys: %d %+v", s, e)
	}
	if b, k := gauges(); b != 1000 || k != 2 {
		t.Fatalf("metrics: %v bytes, %v keys; want 1000 and 2", b, k)
	}
	if s, _, _ := tc.Do(t, "DELETE", n.URL()+"/v1/kv/a", ""); s != 200 {
		t.Fatalf("delete: %d", s)
	}
	if b, k := gauges(); b != 100 || k != 1 {
		t.Fatalf("metrics after the delete: %v bytes, %v keys", b, k)
	}
	if s, e := write("c", 800); s != 200 {
		t.Fatalf("after the delete freed space: %d %+v", s, e)
	}
}

// Issue 13, item 7: min_epoch 16777215, the last epoch, is accepted and
// acquires keep working; the restore after it is refused with 400
// invalid_epoch instead of leaving a cluster that refuses every acquire;
// a backup at epoch 2^64-1 is 400 invalid_snapshot, not a wrap to 0.
func TestRestoreRefusesImpossibleEpochs(t *testing.T) {
	c := tc.New(t, 1)
	n := c.WaitLeader(10 * time.Second)
	backup := backupWith(t, 0, 5)
	if s, code := restore(t, n, backupWith(t, math.MaxUint64, 5), ""); s != 400 || code != wire.CodeInvalidSnapshot {
		t.Fatalf("backup at epoch 2^64-1: %d %s", s, code)
	}
	if s, code := restore(t, n, backup, "?min_epoch=16777215"); s != 200 {
		t.Fatalf("min_epoch 16777215: %d %s", s, code)
	}
	n = c.WaitLeader(10 * time.Second)
	g := mustAcquire(t, n, "after-first", "w")
	if g.Token>>entry.EpochShift != entry.LastEpoch {
		t.Fatalf("token %d is not of the last epoch", g.Token)
	}
	s, code := restore(t, n, backup, "")
	if s != 400 || code != wire.CodeInvalidEpoch {
		t.Fatalf("a restore past the last epoch: %d %s", s, code)
	}
	if g2 := mustAcquire(t, n, "after-second", "w"); g2.Token <= g.Token {
		t.Fatalf("token %d after the refused restore, not above %d", g2.Token, g.Token)
	}
	if st, _ := n.Inst.Node.Status(); st.Epoch != entry.LastEpoch {
		t.Fatalf("epoch %d after the refused restore", st.Epoch)
	}
}

// A key delete is a new command: while a member's record says its build
// cannot read it (a rolling upgrade), the leader answers 409
// upgrade_required naming that member and proposes nothing; an unissued
// token is refused by the leader all the same, since the older member's put
// entries lack the FSM's rule. Once the member registers this build's
// format, the delete goes through.
func TestKeyDeleteWaitsForEveryMember(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	format := func() int {
		st, _ := leader.Inst.Node.Status()
		return st.LogFormat
	}
	tc.Poll(t, 15*time.Second, "every member recorded this build's format", func() bool { return format() == entry.LogFormat })
	status, g, e := acquire(t, leader, "l", "w", 120_000, 0) // no expiry entry during the test
	if status != 200 {
		t.Fatalf("acquire: %d %+v", status, e)
	}
	if s, e := put(t, leader, "k", "v", wire.HeaderToken, tok(g.Token)); s != 200 {
		t.Fatalf("put: %d %+v", s, e)
	}
	var old *tc.Node
	for _, n := range c.Running() {
		if n != leader {
			old = n
		}
	}
	// The member re-registers as a build that reads LogFormatBinary only.
	raw, err := os.ReadFile(filepath.Join(old.DataDir, "node.json"))
	var ident struct {
		Incarnation string `json:"incarnation"`
	}
	if err != nil || json.Unmarshal(raw, &ident) != nil {
		t.Fatalf("identity of %s: %v", old.ID, err)
	}
	join := fmt.Sprintf(`{"id":%q,"raft_addr":%q,"http_addr":%q,"voter":true,"incarnation":%q}`, old.ID, old.Inst.Node.RaftAddr(), old.HTTPAddr, ident.Incarnation)
	if s, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/cluster/join", join, wire.HeaderLogFormat, "1", "Content-Type", "application/json"); s != 200 {
		t.Fatalf("older build's join: %d %s", s, body)
	}
	tc.Poll(t, 10*time.Second, "the leader writes LogFormatBinary", func() bool { return format() == entry.LogFormatBinary })
	lastIndex := func() uint64 {
		st, _ := leader.Inst.Node.Status()
		return st.LastIndex
	}
	before := lastIndex()
	status, body, _ := tc.Do(t, "DELETE", leader.URL()+"/v1/kv/k", "")
	if status != http.StatusConflict || !strings.Contains(body, wire.CodeUpgradeRequired) || !strings.Contains(body, old.ID) {
		t.Fatalf("delete with a member on an older build: %d %s", status, body)
	}
	if s, e := put(t, leader, "k", "x", wire.HeaderToken, "18446744073709551615"); s != http.StatusConflict || e.Code != wire.CodeUnissuedToken {
		t.Fatalf("unissued token with a member on an older build: %d %+v", s, e)
	}
	if got := lastIndex(); got != before {
		t.Fatalf("refused requests wrote the log: last index %d, then %d", before, got)
	}
	if _, ok, _, _ := leader.Inst.Coord.Get(context.Background(), "k", true); !ok {
		t.Fatal("the key is gone")
	}
	// The member comes back on this build and registers its format.
	c.Stop(old)
	c.Restart(old)
	tc.Poll(t, 15*time.Second, "the upgraded member re-registered", func() bool { return format() == entry.LogFormat })
	if s, body, _ := tc.Do(t, "DELETE", leader.URL()+"/v1/kv/k", ""); s != 200 {
		t.Fatalf("delete once every member reads it: %d %s", s, body)
	}
}
