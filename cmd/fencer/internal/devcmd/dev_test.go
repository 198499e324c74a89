package devcmd

import (
	"strings"
	"testing"
)

// A dev data dir remembers the layout it was made with and refuses another;
// one process at a time owns it.
func TestDevDataDir(t *testing.T) {
	dir := t.TempDir()
	three := devLayout{Nodes: 3, Host: "127.0.0.1", HTTPPort: 7001, RaftPort: 8001}
	if err := checkLayout(dir, three); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if err := checkLayout(dir, three); err != nil {
		t.Fatalf("same layout again: %v", err)
	}
	five := three
	five.Nodes = 5
	err := checkLayout(dir, five)
	if err == nil || !strings.Contains(err.Error(), "--nodes 3 --host 127.0.0.1 --http-port 7001 --raft-port 8001") {
		t.Fatalf("another layout: %v, want a refusal naming the flags to pass", err)
	}

	unlock, err := lockDevDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDevDir(dir); err == nil || !strings.Contains(err.Error(), "another fencer dev") {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	unlock, err = lockDevDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock()

	o := devOptions{layout: three, dataDir: dir, ephemeral: true}
	if err := o.validate(); err == nil {
		t.Fatal("--ephemeral with --data-dir accepted")
	}
}
