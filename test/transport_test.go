package test

import (
	"fmt"
	"testing"
	"time"

	tc "github.com/fencer-io/fencer/test/testcluster"
)

// A follower that was down for 6 s, long enough for hashicorp/raft's
// replication to back off to 5 s between tries, gets the entries it missed
// soon after it returns: the leader's transport held its call until the
// follower listened again (cluster/DESIGN.md). And a leader whose follower
// is down stops at once: the call it holds for the follower is released
// before Raft's Shutdown, which waits for the replication that holds it.
func TestFollowerIsReachedWhenItReturnsAndLeaderStopsPromptly(t *testing.T) {
	const outage = 6 * time.Second
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	f := c.Other(leader)
	c.Stop(f)
	down := time.Now()
	for i := 0; time.Since(down) < outage; i++ {
		mustAcquire(t, leader, fmt.Sprintf("down-%d", i), "w")
		time.Sleep(100 * time.Millisecond) // the outage's pace, not a wait for a state
	}
	if c.Leader() != leader {
		t.Skip("leadership moved during the outage; a new leader's replication starts without backoff")
	}
	mustAcquire(t, leader, "before-return", "w")
	st, err := leader.Inst.Node.Status()
	if err != nil {
		t.Fatal(err)
	}
	target := st.AppliedIndex

	c.Restart(f)
	back := time.Now()
	tc.Poll(t, 15*time.Second, "the follower to apply what it missed", func() bool {
		st, err := f.Inst.Node.Status()
		return err == nil && st.AppliedIndex >= target
	})
	if took := time.Since(back); took > 2500*time.Millisecond {
		t.Fatalf("the follower had the entries %v after its return; want within 2.5 s (the library's backoff alone waits until 10.24 s into the outage)", took)
	} else {
		t.Logf("the follower had the entries %v after its return", took)
	}

	// Down again for a second (the leader's calls to it now wait), then
	// the leader stops.
	c.Stop(f)
	down = time.Now()
	for i := 0; time.Since(down) < time.Second; i++ {
		mustAcquire(t, leader, fmt.Sprintf("down-again-%d", i), "w")
		time.Sleep(100 * time.Millisecond) // the outage's pace
	}
	start := time.Now()
	c.Stop(leader)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the leader took %v to stop with a follower down; its replication to the follower was not released", took)
	}
}
