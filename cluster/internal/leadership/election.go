package leadership

import (
	"time"

	"github.com/hashicorp/raft"
)

// AwaitElection waits while an election this node may win is undecided, up
// to d, waking on each change of leader (changed) and otherwise every
// 10 ms. Undecided means a candidate, or a follower that knows no leader: a
// leader that lost its role to a stall (its lease ran out while it was
// frozen) steps down to a follower without a leader and, having the longest
// log, is often the next to be elected, moments later. A stop that did not
// wait for that would win the election as it closes and then stop as a
// leader crashes.
func AwaitElection(state func() raft.RaftState, leaderKnown func() bool, changed func() <-chan struct{}, stop <-chan struct{}, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		ch := changed()
		wait := time.Until(deadline)
		if !Undecided(state(), leaderKnown()) || wait <= 0 {
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

// Undecided reports whether a node in state, knowing a leader or not, may
// yet be elected in an election under way.
func Undecided(state raft.RaftState, leaderKnown bool) bool {
	return state == raft.Candidate || state == raft.Follower && !leaderKnown
}
