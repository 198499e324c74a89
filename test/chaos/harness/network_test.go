package harness

import (
	"net"
	"testing"
	"time"

	"github.com/fencer-io/fencer/test/chaos/netfault"
)

// cut reports whether l refuses connections, by dialing it once: a cut
// link resets the connection on arrival, an open one accepts it (and then
// fails to reach a node that is not running).
func cut(t *testing.T, l *netfault.Link) bool {
	t.Helper()
	before := l.Stats()
	if conn, err := net.Dial("tcp", l.Addr()); err == nil { // the reset can beat connect's return
		defer conn.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := l.Stats()
		if s.Rejected > before.Rejected {
			return true
		}
		if s.Accepted > before.Accepted {
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s neither accepted nor refused a connection", l.Name())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A partition cuts what a real one would: Raft and HTTP between nodes on
// different sides, both ways, and a client's links to the nodes across;
// nothing within a side.
func TestPartitionCutsEveryLinkAcross(t *testing.T) {
	c, err := NewCluster(Options{Bin: "fencer", Dir: t.TempDir(), Nodes: 3, Clients: 2, Group: &Group{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Partition([]string{"n1", ClientName(0)}, []string{"n2", "n3", ClientName(1)})
	side := map[string]int{"n1": 0, ClientName(0): 0, "n2": 1, "n3": 1, ClientName(1): 1}
	for from, sf := range side {
		for _, to := range []string{"n1", "n2", "n3"} {
			if from == to {
				continue
			}
			want := sf != side[to]
			if got := cut(t, c.HTTP().Link(from, to)); got != want {
				t.Errorf("http %s->%s cut = %v, want %v", from, to, got, want)
			}
			if c.Node(from) != nil {
				if got := cut(t, c.Net().Link(from, to)); got != want {
					t.Errorf("raft %s->%s cut = %v, want %v", from, to, got, want)
				}
			}
		}
	}
	c.HealNetwork()
	for _, from := range []string{"n1", ClientName(0)} {
		if cut(t, c.HTTP().Link(from, "n2")) {
			t.Errorf("http %s->n2 still cut after HealNetwork", from)
		}
	}
}
