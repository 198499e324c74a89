package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// A node closed while proposals stream in answers every one of them: none
// is left waiting for ever in Raft's buffered apply channel (BatchApplyCh),
// which Raft does not drain when it shuts down.
func TestCloseAnswersEveryProposal(t *testing.T) {
	for round := 0; round < 5; round++ {
		raftAddr := freeAddr(t)
		n, err := Open(Config{
			ID:             "n1",
			DataDir:        t.TempDir(),
			RaftAddr:       raftAddr,
			HTTPAddr:       freeAddr(t),
			InitialCluster: []Peer{{ID: "n1", RaftAddr: raftAddr, HTTPAddr: freeAddr(t)}},
		}, fsm.New(nil))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !n.IsLeader() {
			if time.Now().After(deadline) {
				n.Close()
				t.Fatal("no leader within 10 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		var wg sync.WaitGroup
		var applied sync.WaitGroup
		applied.Add(64)
		for c := 0; c < 64; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				for i := 0; ; i++ {
					_, err := n.Apply(&entry.Acquire{Lock: fmt.Sprintf("l%d-%d", c, i), Holder: "h", Lease: "s", TTLMillis: 60000})
					if first {
						applied.Done()
						first = false
					}
					if err != nil {
						return
					}
				}
			}()
		}
		applied.Wait() // every proposer is in its loop
		closed := make(chan struct{})
		go func() { n.Close(); close(closed) }()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: proposals still unanswered 15 s after Close", round)
		}
		<-closed
	}
}
