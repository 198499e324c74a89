package devcmd

import (
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
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

// A dev cluster whose ports are held says which ones, and names other ports
// that are free, with the flags that move it there: --ephemeral alone, the
// old advice, starts on the same ports and fails again.
func TestDevPortsTaken(t *testing.T) {
	// Hold the second HTTP port and the first Raft port of a layout, as a
	// running cluster would. The layout sits below the kernel's ephemeral
	// range, where the other tests' 127.0.0.1:0 listeners never land: ports
	// in that range could be taken by them between two checks here.
	l, held, raft := heldLayout(t)
	defer held.Close()
	defer raft.Close()
	httpPort := l.HTTPPort

	err := l.checkPorts()
	if err == nil {
		t.Fatal("ports held by another process: no refusal")
	}
	msg := err.Error()
	for _, p := range []int{httpPort + 1, l.RaftPort} {
		if !strings.Contains(msg, strconv.Itoa(p)) {
			t.Errorf("the refusal does not name taken port %d: %s", p, msg)
		}
	}
	m := regexp.MustCompile(`--http-port (\d+) --raft-port (\d+) --ephemeral`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("the refusal names no flags to move the ports: %s", msg)
	}
	moved := l
	moved.HTTPPort, _ = strconv.Atoi(m[1])
	moved.RaftPort, _ = strconv.Atoi(m[2])
	if err := moved.checkPorts(); err != nil || overlaps(moved, l) {
		t.Fatalf("the ports the refusal advises (%s) are not free of the held ones: %v", m[0], err)
	}
	if !strings.Contains(msg, "FENCER_ENDPOINTS="+moved.endpoints()) {
		t.Errorf("the refusal does not say how to point the CLI at the moved cluster: %s", msg)
	}

	held.Close()
	raft.Close()
	if err := l.checkPorts(); err != nil {
		t.Fatalf("free ports refused: %v", err)
	}
}

// heldLayout finds a 3-node layout in 20000-31999 (below Linux's default
// ephemeral range, 32768-60999) with every port free, and holds its second
// HTTP port and its first Raft port.
func heldLayout(t *testing.T) (devLayout, net.Listener, net.Listener) {
	t.Helper()
	for base := 20000 + rand.IntN(100)*100; base < 32000; base += 100 {
		l := devLayout{Nodes: 3, Host: "127.0.0.1", HTTPPort: base, RaftPort: base + 50}
		if len(l.takenPorts()) > 0 {
			continue
		}
		held, err := net.Listen("tcp", net.JoinHostPort(l.Host, strconv.Itoa(l.HTTPPort+1)))
		if err != nil {
			continue
		}
		raft, err := net.Listen("tcp", net.JoinHostPort(l.Host, strconv.Itoa(l.RaftPort)))
		if err != nil {
			held.Close()
			continue
		}
		return l, held, raft
	}
	t.Fatal("no free layout in 20000-31999")
	return devLayout{}, nil, nil
}
