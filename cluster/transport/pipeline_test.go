package transport

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A leader whose pipeline reader left (as Raft's does on a follower's
// Success=false) can still send on the pipeline, and Close ends it: the
// sends do not wait for a reader that will never come back. Against
// hashicorp/raft's own pipeline (MaxRPCsInFlight 2) the second send blocks
// for good: hashicorp/raft issue 612.
func TestPipelineSendsWithoutAReader(t *testing.T) {
	leader, follower := open(t), open(t)
	p, err := leader.AppendEntriesPipeline("follower", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	// The first answer is read, as Raft's decoder reads until it sees a
	// failure; then nobody reads Consumer again.
	if _, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 1}, new(raft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-p.Consumer():
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer on the pipeline")
	}
	sent := make(chan error, 1)
	go func() {
		for range 4 {
			if _, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 1}, new(raft.AppendEntriesResponse)); err != nil {
				sent <- err
				return
			}
		}
		sent <- p.Close()
	}()
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		p.Close()
		t.Fatal("a send on a pipeline whose reader left blocked: replication to the follower would stop for good")
	}
}

// With peer addresses given, Raft's lookup of this node's own id (in every
// request's header) finds its own address rather than warning each time.
func TestOwnIDResolvesWithPeerAddrs(t *testing.T) {
	var logs strings.Builder
	tr, err := Open(Config{Addr: "127.0.0.1:0", LocalID: "n1", PeerAddrs: map[string]string{"n2": "127.0.0.1:1"},
		RaftLogger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if got := string(tr.EncodePeer("n1", "fallback:1")); got != string(tr.LocalAddr()) {
		t.Errorf("own id encoded as %q, want %q", got, tr.LocalAddr())
	}
	if got := string(tr.EncodePeer("n2", "fallback:2")); got != "127.0.0.1:1" {
		t.Errorf("peer encoded as %q, want its proxy address", got)
	}
	if logs.Len() > 0 {
		t.Errorf("warned: %s", logs.String())
	}
}
