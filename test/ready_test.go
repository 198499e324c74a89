package test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/coord"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// A follower restarted behind the leader answers /readyz 200 only once it
// has applied what the leader had committed: its own commit index starts at
// 0 after a restart and grows batch by batch as the leader catches it up,
// so "applied ≥ my commit index" held almost at once (a review found one
// ready at index 57 of 48,008), and an operator's rolling restart moved on
// to the next member while this one was still replaying. Every 200 seen from
// the restart on is checked against the leader's commit index before it.
// Fails with caughtUpOnce comparing the follower's own commit index alone.
func TestRestartedFollowerReadyOnlyOnceCaughtUp(t *testing.T) {
	c := tc.New(t, 3, tc.Options{})
	c.WaitReady(15 * time.Second)
	leader := c.WaitLeader(10 * time.Second)
	follower := c.Other(leader)
	c.Stop(follower)
	// Entries the follower misses: several thousand acquires, in parallel.
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				leader.Inst.Coord.Acquire(context.Background(), coord.AcquireRequest{Lock: fmt.Sprintf("behind-%d-%d", w, i), Holder: "w", TTL: time.Hour})
			}
		}()
	}
	wg.Wait()
	st, err := leader.Inst.Node.Status()
	if err != nil {
		t.Fatal(err)
	}
	before := st.CommitIndex
	c.Restart(follower)
	hc := &http.Client{Timeout: time.Second}
	tc.Poll(t, 30*time.Second, follower.ID+" ready after its restart", func() bool {
		resp, err := hc.Get(follower.URL() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		if st, err := follower.Inst.Node.Status(); err == nil && st.AppliedIndex < before {
			t.Fatalf("%s answered /readyz 200 at applied index %d, before the %d the leader had committed when it restarted", follower.ID, st.AppliedIndex, before)
		}
		return true
	})
}
