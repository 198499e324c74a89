package leadership

import (
	"time"

	"github.com/hashicorp/raft"
)

// AwaitElection waits while state says this node is a candidate, up to d,
// waking on each change of leader (changed) and otherwise every 10 ms.
func AwaitElection(state func() raft.RaftState, changed func() <-chan struct{}, stop <-chan struct{}, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		ch := changed()
		wait := time.Until(deadline)
		if state() != raft.Candidate || wait <= 0 {
			return
		}
		select {
		case <-ch:
		case <-stop:
			return
		case <-time.After(min(wait, 10*time.Millisecond)):
		}
	}
}
