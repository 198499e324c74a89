package transport

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// answer responds to every RPC a transport receives, as a follower would.
func answer(t *Transport) {
	for rpc := range t.Consumer() {
		rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
	}
}

func open(t *testing.T) *Transport {
	t.Helper()
	tr, err := Open(Config{Addr: "127.0.0.1:0", RaftLogger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	go answer(tr)
	return tr
}

func heartbeat(from, to *Transport) error {
	var resp raft.AppendEntriesResponse
	return from.AppendEntries("peer", to.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp)
}

// A severed transport neither reaches its peers nor is reached by them, on
// pooled connections as on new ones.
func TestSeverCutsBothDirections(t *testing.T) {
	a, b := open(t), open(t)
	for _, pair := range [][2]*Transport{{a, b}, {b, a}} {
		if err := heartbeat(pair[0], pair[1]); err != nil {
			t.Fatalf("before sever: %v", err)
		}
	}
	a.Sever()
	if err := heartbeat(a, b); err == nil {
		t.Fatal("a severed node still sends")
	}
	if err := heartbeat(b, a); err == nil {
		t.Fatal("a severed node is still reached")
	}
	// b's pooled connection to a was closed; a fresh dial is refused too.
	if err := heartbeat(b, a); err == nil {
		t.Fatal("a severed node is reached on a new connection")
	}
	if err := heartbeat(b, open(t)); err != nil {
		t.Fatalf("others still talk: %v", err)
	}
}
