package leadership

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A node stopped while it stands for election waits for the outcome, so
// that, elected, it hands over rather than stopping as a leader crashes;
// and gives up waiting at its bound.
func TestHandoverAwaitsAnElectionInProgress(t *testing.T) {
	var st atomic.Uint32
	st.Store(uint32(raft.Candidate))
	state := func() raft.RaftState { return raft.RaftState(st.Load()) }
	changed := func() <-chan struct{} { return make(chan struct{}) }
	won := time.AfterFunc(30*time.Millisecond, func() { st.Store(uint32(raft.Leader)) })
	defer won.Stop()
	AwaitElection(state, changed, nil, 5*time.Second)
	if got := state(); got != raft.Leader {
		t.Fatalf("after waiting for the election: %v, want Leader", got)
	}

	st.Store(uint32(raft.Candidate))
	start := time.Now()
	AwaitElection(state, changed, nil, 50*time.Millisecond)
	if took := time.Since(start); took < 50*time.Millisecond || took > 2*time.Second {
		t.Fatalf("an endless election held the stop for %v, want its bound of 50ms", took)
	}
}
