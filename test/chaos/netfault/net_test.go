package netfault

import (
	"testing"
)

var nodes = []string{"n1", "n2", "n3"}

// newTestNet starts a line server per node and a Net over them.
func newTestNet(t *testing.T) *Net {
	t.Helper()
	targets := make(map[string]string)
	for _, id := range nodes {
		targets[id] = newLineServer(t, id).addr()
	}
	n, err := NewNet(targets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func mustReach(t *testing.T, n *Net, from, to string) {
	t.Helper()
	mustAsk(t, dial(t, n.Addr(from, to)), "ping", to+":ping")
}

func mustNotReach(t *testing.T, n *Net, from, to string) {
	t.Helper()
	mustBeRefused(t, n.Addr(from, to))
}

func TestNetReachesEveryPeer(t *testing.T) {
	n := newTestNet(t)
	for _, from := range nodes {
		peers := n.PeerAddrs(from)
		if len(peers) != len(nodes)-1 {
			t.Errorf("PeerAddrs(%s) has %d peers, want %d", from, len(peers), len(nodes)-1)
		}
		for _, to := range nodes {
			if from == to {
				continue
			}
			if peers[to] != n.Addr(from, to) {
				t.Errorf("PeerAddrs(%s)[%s] = %q, Addr = %q", from, to, peers[to], n.Addr(from, to))
			}
			mustReach(t, n, from, to)
		}
	}
}

func TestNetPartition(t *testing.T) {
	n := newTestNet(t)
	open := dial(t, n.Addr("n2", "n1"))
	mustAsk(t, open, "ping", "n1:ping")

	n.Partition([]string{"n1"}, []string{"n2", "n3"})

	mustBreak(t, open.conn)
	for _, peer := range []string{"n2", "n3"} {
		mustNotReach(t, n, "n1", peer)
		mustNotReach(t, n, peer, "n1")
	}
	mustReach(t, n, "n2", "n3")
	mustReach(t, n, "n3", "n2")

	n.HealAll()
	mustReach(t, n, "n1", "n2")
	mustReach(t, n, "n3", "n1")
}

func TestNetIsolate(t *testing.T) {
	n := newTestNet(t)
	n.Isolate("n3")

	for _, peer := range []string{"n1", "n2"} {
		mustNotReach(t, n, "n3", peer)
		mustNotReach(t, n, peer, "n3")
	}
	mustReach(t, n, "n1", "n2")
	mustReach(t, n, "n2", "n1")
}

func TestNetCutOneWay(t *testing.T) {
	n := newTestNet(t)
	n.CutOneWay("n1", "n2")

	// n1's request to n2 vanishes.
	req := dial(t, n.Addr("n1", "n2"))
	writeAll(t, req.conn, "ping\n")
	fwd := n.Link("n1", "n2")
	waitFor(t, "n1's request to be dropped", func() bool { return fwd.Stats().Dropped[Forward] == int64(len("ping\n")) })

	// n2's request to n1 arrives, but n1's reply vanishes.
	back := dial(t, n.Addr("n2", "n1"))
	writeAll(t, back.conn, "ping\n")
	rev := n.Link("n2", "n1")
	waitFor(t, "n1's reply to be dropped", func() bool { return rev.Stats().Dropped[Backward] == int64(len("n1:ping\n")) })
	mustStaySilent(t, back.conn)

	// Nothing else is touched.
	mustReach(t, n, "n1", "n3")
	mustReach(t, n, "n3", "n2")
	mustReach(t, n, "n2", "n3")
}

func TestNetAddNodeAndSetTarget(t *testing.T) {
	n := newTestNet(t)
	if err := n.AddNode("n4", newLineServer(t, "n4").addr()); err != nil {
		t.Fatal(err)
	}
	if err := n.AddNode("n4", "127.0.0.1:1"); err == nil {
		t.Error("adding n4 twice succeeded")
	}
	mustReach(t, n, "n1", "n4")
	mustReach(t, n, "n4", "n1")

	// n4 "restarts" on a new port; its peers keep dialing the same proxy.
	before := n.Addr("n2", "n4")
	restarted := newLineServer(t, "n4-restarted")
	n.SetTarget("n4", restarted.addr())
	if got := n.Addr("n2", "n4"); got != before {
		t.Errorf("proxy address changed from %s to %s", before, got)
	}
	mustAsk(t, dial(t, n.Addr("n2", "n4")), "ping", "n4-restarted:ping")
}

func TestNetPanicsOnUnknownNode(t *testing.T) {
	n := newTestNet(t)
	defer func() {
		if recover() == nil {
			t.Error("Addr to an unknown node did not panic")
		}
	}()
	n.Addr("n1", "n9")
}
