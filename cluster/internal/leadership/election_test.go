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
	noLeader := func() bool { return false }
	won := time.AfterFunc(30*time.Millisecond, func() { st.Store(uint32(raft.Leader)) })
	defer won.Stop()
	AwaitElection(state, noLeader, changed, nil, 5*time.Second)
	if got := state(); got != raft.Leader {
		t.Fatalf("after waiting for the election: %v, want Leader", got)
	}
	st.Store(uint32(raft.Candidate))
	start := time.Now()
	AwaitElection(state, noLeader, changed, nil, 50*time.Millisecond)
	if took := time.Since(start); took < 50*time.Millisecond || took > 2*time.Second {
		t.Fatalf("an endless election held the stop for %v, want its bound of 50ms", took)
	}
}

// A leader whose lease ran out while it was frozen steps down to a follower
// that knows no leader, and is elected again moments later (its log is the
// longest). Stopped in between, it waits for that election too, rather than
// winning it as it closes and then stopping as a leader crashes (a
// graceful-stop run with the leader frozen 600 ms first: a 1.3 s outage
// instead of a handover).
func TestHandoverAwaitsTheElectionOfALeaderThatSteppedDown(t *testing.T) {
	var st atomic.Uint32
	st.Store(uint32(raft.Follower))
	state := func() raft.RaftState { return raft.RaftState(st.Load()) }
	var known atomic.Bool
	leaderKnown := known.Load
	changed := func() <-chan struct{} { return make(chan struct{}) }
	won := time.AfterFunc(30*time.Millisecond, func() {
		st.Store(uint32(raft.Leader))
		known.Store(true)
	})
	defer won.Stop()
	AwaitElection(state, leaderKnown, changed, nil, 5*time.Second)
	if got := state(); got != raft.Leader {
		t.Fatalf("a follower without a leader, stopped: %v after waiting, want Leader (it did not wait for the election)", got)
	}
	// A follower that knows its leader has nothing to wait for.
	st.Store(uint32(raft.Follower))
	start := time.Now()
	AwaitElection(state, leaderKnown, changed, nil, 5*time.Second)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a follower with a leader waited %v before stopping", took)
	}
}
