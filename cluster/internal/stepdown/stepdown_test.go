package stepdown

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestBestIsTheMostUpToDateVoter(t *testing.T) {
	voters := []raft.Server{{ID: "n2", Address: "r2"}, {ID: "n3", Address: "r3"}, {ID: "n4", Address: "r4"}}
	for _, c := range []struct {
		last map[string]uint64
		want raft.ServerID
	}{
		{map[string]uint64{"n2": 5, "n3": 9, "n4": 7}, "n3"},
		{map[string]uint64{"n4": 1}, "n4"},
		{nil, "n2"}, // none answered: the first
		{map[string]uint64{"n2": 4, "n3": 4}, "n2"},
	} {
		if got := Best(voters, c.last).ID; got != c.want {
			t.Errorf("last %v: %s, want %s", c.last, got, c.want)
		}
	}
}

// transport is a fake whose TimeoutNow records its request and answers
// once release is closed.
type transport struct {
	got     chan *raft.TimeoutNowRequest
	release chan struct{}
	err     error
}

func (t *transport) LocalAddr() raft.ServerAddress { return "r1" }
func (t *transport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(string(id) + "@" + string(addr))
}

func (t *transport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, _ *raft.TimeoutNowResponse) error {
	t.got <- args
	<-t.release
	return t.err
}

// The request says who sends it, the answer comes back, and a transport
// that does not answer holds the hand-off only until its context ends.
func TestSend(t *testing.T) {
	refused := errors.New("refused")
	tr := &transport{got: make(chan *raft.TimeoutNowRequest, 1), release: make(chan struct{}), err: refused}
	close(tr.release)
	err := Send(context.Background(), tr, "n1", raft.Server{ID: "n2", Address: "r2"})
	req := <-tr.got
	if !errors.Is(err, refused) || string(req.ID) != "n1" || string(req.Addr) != "n1@r1" {
		t.Fatalf("Send: %v, request from %q at %q", err, req.ID, req.Addr)
	}

	stuck := &transport{got: make(chan *raft.TimeoutNowRequest, 1), release: make(chan struct{})}
	defer close(stuck.release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := Send(ctx, stuck, "n1", raft.Server{ID: "n2", Address: "r2"}); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("Send to a transport that does not answer: %v after %v", err, time.Since(start))
	}
}
