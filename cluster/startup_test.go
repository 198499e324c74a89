package cluster

import (
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

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
