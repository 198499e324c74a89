package main

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/cmd/fencer/internal/opscmd"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// The operator commands against a real cluster: members list, cluster
// status (table and JSON), snapshot save, inspect and restore, and the
// leadership transfer.
func TestOperatorCommands(t *testing.T) {
	c := newTestCluster(t)
	out, _, err := fencer(t, "", "lock", "acquire", "ops-lock", "--ttl", "1m")
	if err != nil {
		t.Fatalf("lock acquire: %v", err)
	}
	if out, _, err = fencer(t, "", "kv", "put", "ops-key", "v", "--token", tokenOf(t, out)); err != nil {
		t.Fatalf("kv put: %v %s", err, out)
	}

	out, _, err = fencer(t, "", "members", "list")
	if err != nil || strings.Count(out, "127.0.0.1") < 6 || !strings.Contains(out, "n3") {
		t.Fatalf("members list: %v\n%s", err, out)
	}
	// Like "lock list -o json", an object holding the list.
	out, _, err = fencer(t, "", "members", "list", "-o", "json")
	var members map[string][]wire.Member
	if err := json.Unmarshal([]byte(out), &members); err != nil || len(members) != 1 || len(members["members"]) != 3 {
		t.Fatalf("members list -o json: %v\n%s", err, out)
	}

	// Pointed at a Raft port, or at an HTTP server that is not fencer, the
	// CLI says so.
	_, _, stderr := runFencer(t, "lock", "list", "--endpoints", c.Nodes[0].RaftAddr, "--timeout", "1s")
	if !strings.Contains(stderr, "this looks like a Raft port, not fencer's HTTP API") {
		t.Errorf("lock list against a Raft port: %q", stderr)
	}
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	_, _, stderr = runFencer(t, "lock", "list", "--endpoints", other.URL, "-o", "json")
	if !strings.Contains(stderr, `"code":"not_fencer"`) || !strings.Contains(stderr, other.URL+" is not a fencer node") {
		t.Errorf("lock list against a web server: %q", stderr)
	}
	out, _, err = fencer(t, "", "cluster", "status", "-o", "json")
	if err != nil {
		t.Fatalf("cluster status: %v", err)
	}
	var st opscmd.ClusterView
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Leader == "" || len(st.Members) != 3 {
		t.Fatalf("cluster status json: %v\n%s", err, out)
	}
	for _, m := range st.Members {
		if m.State == "" || m.State == "unreachable" {
			t.Fatalf("member %s state %q", m.ID, m.State)
		}
	}
	for _, m := range st.Members {
		if m.LogFormat != entry.LogFormat {
			t.Fatalf("member %s recorded log format %d, want this build's %d", m.ID, m.LogFormat, entry.LogFormat)
		}
	}
	if out, _, err = fencer(t, "", "cluster", "status"); err != nil || !strings.Contains(out, "LAST CONTACT") {
		t.Fatalf("cluster status table: %v\n%s", err, out)
	}

	file := filepath.Join(t.TempDir(), "backup.snap")
	if out, _, err = fencer(t, "", "snapshot", "save", file); err != nil || !strings.Contains(out, "1 locks, 1 keys") {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	// A backup holds every lease secret: only its owner may read it.
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("saved snapshot: %v, mode %v, want 0600", err, st.Mode())
	}
	out, _, err = fencer(t, "", "snapshot", "inspect", file, "-o", "json")
	if err != nil {
		t.Fatalf("snapshot inspect: %v", err)
	}
	var img struct {
		Header snapshot.Header
		Locks  []entry.Lock
		Keys   []entry.FencedKey
	}
	if err := json.Unmarshal([]byte(out), &img); err != nil || len(img.Locks) != 1 || img.Locks[0].Lease != "" || len(img.Keys) != 1 {
		t.Fatalf("inspect (lease secrets must be redacted): %v\n%s", err, out)
	}
	if out, _, err = fencer(t, "", "snapshot", "restore", file); err != nil || !strings.Contains(out, "epoch 1") {
		t.Fatalf("snapshot restore: %v\n%s", err, out)
	}
	out, _, err = fencer(t, "", "lock", "acquire", "after-restore")
	if err != nil {
		t.Fatalf("acquire after restore: %v", err)
	}
	if tok := tokenOf(t, out); len(tok) < 13 { // epoch 1 tokens are ≥ 2^40
		t.Fatalf("token after restore %s is not in epoch 1", tok)
	}

	old := c.WaitLeader(10 * time.Second)
	target := c.Nodes[0]
	if target == old {
		target = c.Nodes[1]
	}
	if out, _, err = fencer(t, "", "cluster", "transfer-leader", target.ID); err != nil {
		t.Fatalf("transfer-leader: %v\n%s", err, out)
	}
	tc.Poll(t, 15*time.Second, "leadership moved to "+target.ID, func() bool {
		l := c.Leader()
		return l != nil && l.ID == target.ID
	})
	if _, _, err = fencer(t, "", "members", "remove", "nobody"); err == nil {
		t.Fatal("removing an unknown member succeeded")
	}
}

func tokenOf(t *testing.T, out string) string {
	t.Helper()
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "token="); ok {
			return v
		}
	}
	t.Fatalf("no token in %q", out)
	return ""
}

// fencer recover rewrites a stopped survivor's data dir with a new
// membership and a bumped epoch.
// snapshot restore refuses, before it uploads anything, a backup whose
// epoch leaves no room above it (2^64-1 used to wrap the new epoch to 0) and
// a --min-epoch past the last epoch.
func TestSnapshotRestoreRefusesImpossibleEpochs(t *testing.T) {
	var buf bytes.Buffer
	img := &snapshot.Image{Header: snapshot.Header{Format: snapshot.Format, Version: snapshot.Version, Epoch: math.MaxUint64}}
	if _, err := img.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.snap")
	os.WriteFile(bad, buf.Bytes(), 0o600)
	// No server listens there: the refusals come first.
	if _, _, err := fencer(t, "", "snapshot", "restore", bad, "--endpoints", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "backup epoch 18446744073709551615") {
		t.Fatalf("restore of a backup at epoch 2^64-1: %v", err)
	}
	img.Header.Epoch = 0
	buf.Reset()
	img.WriteTo(&buf)
	good := filepath.Join(t.TempDir(), "good.snap")
	os.WriteFile(good, buf.Bytes(), 0o600)
	if _, _, err := fencer(t, "", "snapshot", "restore", good, "--min-epoch", "16777216", "--endpoints", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "16777215") {
		t.Fatalf("--min-epoch 16777216: %v", err)
	}
}

func TestRecoverCommand(t *testing.T) {
	c := tc.New(t, 1)
	n := c.Nodes[0]
	c.Stop(n)
	members := n.ID + "=" + n.RaftAddr + "@" + n.HTTPAddr
	// A bump past the last epoch is refused, and changes nothing.
	if _, _, err := fencer(t, "", "recover", "--id", n.ID, "--data-dir", n.DataDir, "--members", members, "--epoch-bump", "16777216"); err == nil || !strings.Contains(err.Error(), "16777215") {
		t.Fatalf("recover --epoch-bump 16777216: %v", err)
	}
	out, _, err := fencer(t, "", "recover", "--id", n.ID, "--data-dir", n.DataDir, "--members", members)
	if err != nil || !strings.Contains(out, "epoch 1") {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	if _, _, err := fencer(t, "", "recover", "--id", n.ID, "--data-dir", n.DataDir, "--members", "other=127.0.0.1:1@127.0.0.1:2"); err == nil {
		t.Fatal("recover accepted a member list without this node")
	}
	c.Restart(n)
	st, _ := c.WaitLeader(20 * time.Second).Inst.Node.Status()
	if st.Epoch != 1 {
		t.Fatalf("epoch after recovery %d", st.Epoch)
	}
}

// fencer migrate-log-store refuses a running node, converts a stopped one
// (which then starts only with the new --log-store) and back, and says
// when there is nothing to do.
func TestMigrateLogStoreCommand(t *testing.T) {
	c := tc.New(t, 1)
	n := c.Nodes[0]
	last := mustAcquireCLI(t, c, "before")
	if _, _, err := fencer(t, "", "migrate-log-store", "--data-dir", n.DataDir, "--to", "wal"); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("migrate a running node: %v", err)
	}
	if _, _, err := fencer(t, "", "migrate-log-store", "--data-dir", n.DataDir, "--to", "rocks"); err == nil || !strings.Contains(err.Error(), "want wal or bolt") {
		t.Fatalf("--to rocks: %v", err)
	}
	c.Stop(n)
	out, _, err := fencer(t, "", "migrate-log-store", "--data-dir", n.DataDir, "--to", "wal")
	if err != nil || !strings.Contains(out, "converted "+n.DataDir+" from bolt to wal") || !strings.Contains(out, "--log-store wal") {
		t.Fatalf("migrate to wal: %v\n%s", err, out)
	}
	if out, _, err := fencer(t, "", "migrate-log-store", "--data-dir", n.DataDir, "--to", "wal"); err != nil || !strings.Contains(out, "nothing to do") {
		t.Fatalf("migrate to wal again: %v\n%s", err, out)
	}
	c.Restart(n, func(cfg *cluster.Config) { cfg.LogStore = logstore.WAL })
	if next := mustAcquireCLI(t, c, "on-wal"); next <= last {
		t.Fatalf("token %d on wal, not above %d", next, last)
	}
}

// mustAcquireCLI takes a lock through the running node with fencer lock
// acquire and returns its token.
func mustAcquireCLI(t *testing.T, c *tc.Cluster, name string) uint64 {
	t.Helper()
	out := mustFencer(t, "lock", "acquire", name, "--ttl", "30s", "--endpoints", c.WaitLeader(20*time.Second).HTTPAddr)
	m := grantLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("acquire output %q", out)
	}
	token, _ := strconv.ParseUint(m[1], 10, 64)
	return token
}
