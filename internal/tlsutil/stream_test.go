package tlsutil

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// countFSM counts applied entries.
type countFSM struct {
	mu sync.Mutex
	n  int
}

func (f *countFSM) Apply(*raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.n
}
func (f *countFSM) count() int                          { f.mu.Lock(); defer f.mu.Unlock(); return f.n }
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("not supported") }
func (f *countFSM) Restore(io.ReadCloser) error         { return errors.New("not supported") }

type testNode struct {
	id    string
	layer *TLSStreamLayer
	raft  *raft.Raft
	fsm   *countFSM
}

func pkiDir(t *testing.T, nodes ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := GenerateDevPKI(dir, nodes, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newLayer(t *testing.T, dir, node string) *TLSStreamLayer {
	t.Helper()
	server, client, err := PeerConfig(filepath.Join(dir, node+".pem"), filepath.Join(dir, node+"-key.pem"), filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewTLSStreamLayer("127.0.0.1:0", nil, server, client)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// startNode runs raft with in-memory stores over the layer; servers, when
// given, bootstrap it.
func startNode(t *testing.T, id string, layer *TLSStreamLayer, servers []raft.Server) *testNode {
	t.Helper()
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	// fencer's own defaults: shorter timeouts lose the leader to a loaded
	// machine's scheduling pauses between waitForLeader and its use.
	c.HeartbeatTimeout = 400 * time.Millisecond
	c.ElectionTimeout = 400 * time.Millisecond
	c.LeaderLeaseTimeout = 400 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.Logger = hclog.NewNullLogger()
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: time.Second, Logger: hclog.NewNullLogger(),
	})
	store := raft.NewInmemStore()
	f := &countFSM{}
	r, err := raft.NewRaft(c, f, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Shutdown().Error()
		trans.Close()
	})
	if servers != nil {
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return &testNode{id: id, layer: layer, raft: r, fsm: f}
}

// startCluster runs a bootstrapped raft group of the given nodes over mTLS
// with certificates from dir.
func startCluster(t *testing.T, dir string, ids ...string) []*testNode {
	t.Helper()
	layers := make([]*TLSStreamLayer, len(ids))
	var servers []raft.Server
	for i, id := range ids {
		layers[i] = newLayer(t, dir, id)
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(layers[i].Addr().String())})
	}
	nodes := make([]*testNode, len(ids))
	for i, id := range ids {
		nodes[i] = startNode(t, id, layers[i], servers)
	}
	return nodes
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitForLeader(t *testing.T, nodes []*testNode) *testNode {
	t.Helper()
	var leader *testNode
	waitFor(t, "a leader", 10*time.Second, func() bool {
		for _, n := range nodes {
			if n.raft.State() == raft.Leader {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

func applyN(t *testing.T, leader *testNode, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := leader.raft.Apply([]byte(fmt.Sprint(i)), 5*time.Second).Error(); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
}

func TestRaftGroupOverMutualTLS(t *testing.T) {
	dir := pkiDir(t, "n1", "n2", "n3")
	nodes := startCluster(t, dir, "n1", "n2", "n3")
	leader := waitForLeader(t, nodes)
	applyN(t, leader, 5)
	for _, n := range nodes {
		waitFor(t, n.id+" to apply 5 entries", 5*time.Second, func() bool { return n.fsm.count() == 5 })
	}
	if err := leader.raft.VerifyLeader().Error(); err != nil {
		t.Fatalf("leader cannot reach a quorum over TLS: %v", err)
	}
}

func TestNodeFromAnotherCACannotConnectOrReplicate(t *testing.T) {
	dir := pkiDir(t, "n1", "n2", "n3")
	nodes := startCluster(t, dir, "n1", "n2", "n3")
	leader := waitForLeader(t, nodes)

	rogueLayer := newLayer(t, pkiDir(t, "n4"), "n4")
	rogue := startNode(t, "n4", rogueLayer, nil)

	if c, err := rogueLayer.Dial(raft.ServerAddress(leader.layer.Addr().String()), time.Second); err == nil {
		c.Close()
		t.Fatal("a node with another CA's certificate completed a handshake with the leader")
	}
	if c, err := leader.layer.Dial(raft.ServerAddress(rogueLayer.Addr().String()), time.Second); err == nil {
		c.Close()
		t.Fatal("the leader accepted a peer certificate from another CA")
	}

	// Even added to the configuration, the rogue node never receives an entry.
	if err := leader.raft.AddVoter("n4", raft.ServerAddress(rogueLayer.Addr().String()), 0, 5*time.Second).Error(); err != nil {
		t.Fatalf("add voter: %v", err)
	}
	applyN(t, leader, 3)
	for _, n := range nodes {
		waitFor(t, n.id+" to apply", 5*time.Second, func() bool { return n.fsm.count() == 3 })
	}
	// Many heartbeat intervals: replication to n4 is retried all along.
	time.Sleep(500 * time.Millisecond)
	if got := rogue.raft.LastIndex(); got != 0 || rogue.fsm.count() != 0 {
		t.Fatalf("the rogue node received entries: last index %d, applied %d", got, rogue.fsm.count())
	}
}

// A client-only certificate from the cluster CA (the CLI's) opens the API,
// never the Raft port.
func TestClientCertificateRefusedOnRaftPort(t *testing.T) {
	dir := pkiDir(t, "n1")
	layer := newLayer(t, dir, "n1")
	node := startNode(t, "n1", layer, []raft.Server{{ID: "n1", Address: raft.ServerAddress(layer.Addr().String())}})
	waitForLeader(t, []*testNode{node})

	cfg, err := ClientConfig(filepath.Join(dir, CAFile), filepath.Join(dir, ClientFile), filepath.Join(dir, ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", layer.Addr().String(), cfg)
	if err == nil {
		// In TLS 1.3 the server judges the client certificate after the
		// client's side of the handshake is done: its alert arrives on read.
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 1))
	}
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("client-only certificate not refused: %v", err)
	}
}

func TestPlaintextToRaftPortIsRejected(t *testing.T) {
	dir := pkiDir(t, "n1")
	layer := newLayer(t, dir, "n1")
	layer.HandshakeTimeout = 300 * time.Millisecond
	node := startNode(t, "n1", layer, []raft.Server{{ID: "n1", Address: raft.ServerAddress(layer.Addr().String())}})
	waitForLeader(t, []*testNode{node})
	term := node.raft.CurrentTerm()

	// A plain raft transport's vote request with a far higher term: if any
	// RPC were processed, the node would adopt the term and step down.
	plain, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 1, time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var resp raft.RequestVoteResponse
	err = plain.RequestVote("n1", raft.ServerAddress(layer.Addr().String()), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("intruder"), Addr: []byte(plain.LocalAddr())},
		Term:      term + 1000, LastLogIndex: 1 << 40, LastLogTerm: term + 999,
	}, &resp)
	if err == nil {
		t.Fatalf("a plaintext vote request got an answer: %+v", resp)
	}
	if got := node.raft.CurrentTerm(); got != term || node.raft.State() != raft.Leader {
		t.Fatalf("a plaintext RPC was processed: term %d → %d, state %s", term, got, node.raft.State())
	}

	// Plaintext bytes fail the handshake at once, well before the deadline.
	start := time.Now()
	conn, err := net.Dial("tcp", layer.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{0, 0x85, 0xa4, 'T', 'e', 'r', 'm'})
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.ReadAll(conn) // a TLS alert at most, then EOF
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("plaintext connection held for %v", d)
	}

	// A silent connection is dropped at the handshake deadline.
	start = time.Now()
	silent, err := net.Dial("tcp", layer.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = silent.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a silent connection was kept past the handshake timeout")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("silent connection held for %v", d)
	}
}

func TestNotAdvertisable(t *testing.T) {
	dir := pkiDir(t, "n1")
	server, client, err := PeerConfig(filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"), filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewTLSStreamLayer("0.0.0.0:0", nil, server, client); err == nil {
		t.Fatal("an unspecified address was accepted as advertisable")
	}
	l, err := NewTLSStreamLayer("127.0.0.1:0", nil, server, client)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept after close: %v", err)
	}
}
