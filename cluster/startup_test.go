package cluster

import (
	"net"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/fencer-io/fencer/cluster/datadir"
	"github.com/fencer-io/fencer/cluster/internal/peers"
	"github.com/fencer-io/fencer/fsm"
)

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// raftGoroutines lists the goroutines running Raft or this node's loops.
func raftGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "hashicorp/raft") || strings.Contains(g, "cluster.(*Node)") {
			out = append(out, g)
		}
	}
	return out
}

// A start that fails once Raft runs (here BootstrapCluster refuses a
// configuration that lists one Raft address twice) leaves nothing behind:
// Raft and the leadership watcher stopped, the transport closed, the bolt
// store closed (it can be opened again at once).
func TestFailedBootstrapLeavesNothingRunning(t *testing.T) {
	dir := t.TempDir()
	raftAddr := freeAddr(t)
	cfg := Config{
		ID:       "n1",
		DataDir:  dir,
		RaftAddr: raftAddr,
		HTTPAddr: freeAddr(t),
		InitialCluster: []Peer{
			{ID: "n1", RaftAddr: raftAddr, HTTPAddr: freeAddr(t)},
			{ID: "n2", RaftAddr: raftAddr, HTTPAddr: freeAddr(t)},
		},
	}
	_, err := Open(cfg, fsm.New(nil))
	if err == nil || !strings.Contains(err.Error(), "bootstrap") {
		t.Fatalf("Open: %v; want a bootstrap error", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for left := raftGoroutines(); len(left) > 0; left = raftGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still run after a failed start, e.g.:\n%s", len(left), left[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	db, err := bbolt.Open(filepath.Join(dir, "raft.db"), 0o600, &bbolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("raft store still open: %v", err)
	}
	db.Close()
	ln, err := net.Listen("tcp", raftAddr)
	if err != nil {
		t.Fatalf("raft transport still bound: %v", err)
	}
	ln.Close()
}

func TestPlanStart(t *testing.T) {
	initial := []Peer{{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}, {ID: "n2", RaftAddr: "r2", HTTPAddr: "h2"}}
	self := raft.ServerAddress("r1")
	for _, tc := range []struct {
		name     string
		cfg      Config
		hasState bool
		ident    datadir.Identity
		view     peers.View
		want     startPlan
		wantErr  bool
	}{
		{name: "restart", cfg: Config{Bootstrap: true}, hasState: true},
		{name: "bootstrap alone", cfg: Config{ID: "n1", Bootstrap: true}, want: startPlan{bootstrap: []raft.Server{{ID: "n1", Address: self}}}},
		{name: "bootstrap the initial cluster", cfg: Config{ID: "n1", InitialCluster: initial},
			want: startPlan{bootstrap: []raft.Server{{ID: "n1", Address: "r1"}, {ID: "n2", Address: "r2"}}}},
		{name: "the initial cluster runs: join it", cfg: Config{ID: "n1", InitialCluster: initial}, view: peers.View{Running: true},
			want: startPlan{preJoin: true}},
		{name: "join", cfg: Config{ID: "n3", Join: []string{"h1"}}, want: startPlan{preJoin: true}},
		{name: "restart with state: no join", cfg: Config{ID: "n3", Join: []string{"h1"}}, hasState: true},
		{name: "neither", cfg: Config{ID: "n3"}},
		{name: "another cluster's data dir", cfg: Config{ID: "n1", Join: []string{"h1"}}, hasState: true,
			ident: datadir.Identity{ClusterID: "c1"}, view: peers.View{ClusterID: "c2"}, wantErr: true},
		{name: "its own cluster", cfg: Config{ID: "n1", Join: []string{"h1"}}, hasState: true,
			ident: datadir.Identity{ClusterID: "c1"}, view: peers.View{Running: true, ClusterID: "c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planStart(tc.cfg, tc.hasState, tc.ident, tc.view, self)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan %+v, want %+v", got, tc.want)
			}
		})
	}
}
