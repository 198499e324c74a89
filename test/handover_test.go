package test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// cyclers are clients that cycle their own locks (acquire, release) through
// every member with the Go client, recording the longest interval in which
// none of them completed a cycle, and every error.
type cyclers struct {
	mu      sync.Mutex
	last    time.Time
	longest time.Duration
	cycles  int
	errs    []error

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startCyclers(t *testing.T, c *tc.Cluster, n int) *cyclers {
	ctx, cancel := context.WithCancel(context.Background())
	cy := &cyclers{cancel: cancel}
	var addrs []string
	for _, node := range c.Nodes {
		addrs = append(addrs, node.HTTPAddr)
	}
	for i := range n {
		eps := append(append([]string(nil), addrs[i%len(addrs):]...), addrs[:i%len(addrs)]...)
		cl, err := client.New(eps)
		if err != nil {
			t.Fatal(err)
		}
		cy.wg.Add(1)
		go func() {
			defer cy.wg.Done()
			defer cl.Close()
			for gen := 0; ctx.Err() == nil; {
				name := fmt.Sprintf("cycle-%d-%d", i, gen)
				l, err := cl.Acquire(ctx, name, client.TTL(5*time.Second), client.NoKeepAlive())
				if err == nil {
					err = l.Release(ctx)
				}
				cy.record(ctx, err)
				if err != nil {
					gen++
				}
			}
		}()
	}
	t.Cleanup(cy.stop)
	tc.Poll(t, 10*time.Second, "cycles", func() bool { return cy.count() >= 20 })
	return cy
}

func (cy *cyclers) record(ctx context.Context, err error) {
	cy.mu.Lock()
	defer cy.mu.Unlock()
	switch {
	case err == nil:
		now := time.Now()
		if !cy.last.IsZero() {
			cy.longest = max(cy.longest, now.Sub(cy.last))
		}
		cy.last = now
		cy.cycles++
	case ctx.Err() == nil:
		cy.errs = append(cy.errs, err)
	}
}

func (cy *cyclers) count() int {
	cy.mu.Lock()
	defer cy.mu.Unlock()
	return cy.cycles
}

// reset forgets what was measured so far.
func (cy *cyclers) reset() {
	cy.mu.Lock()
	defer cy.mu.Unlock()
	cy.longest, cy.cycles, cy.errs = 0, 0, nil
}

func (cy *cyclers) stop() {
	cy.cancel()
	cy.wg.Wait()
}

// A leader stopped gracefully (SIGTERM) hands its leadership over first:
// clients cycling locks through every member see no error and no pause
// anywhere near an election's (the test cluster's heartbeat timeout is 1 s,
// so a stop without a handover costs at least that).
func TestGracefulStopHandsLeadershipOver(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	cy := startCyclers(t, c, 6)
	cy.reset()
	c.StopGracefully(leader)
	if l := c.Leader(); l == nil || l.ID == leader.ID {
		t.Fatalf("after the graceful stop of %s the leader is %v: it should have handed over before it stopped", leader.ID, l)
	}
	tc.Poll(t, 10*time.Second, "cycles after the stop", func() bool { return cy.count() >= 50 })
	cy.stop()
	if len(cy.errs) > 0 {
		t.Errorf("%d cycles failed, first: %v", len(cy.errs), cy.errs[0])
	}
	if cy.longest >= time.Second {
		t.Errorf("no cycle completed for %v across the stop: an election's worth", cy.longest)
	}
	t.Logf("longest interval without a cycle across the stop: %v", cy.longest)
}

// After a crash of the leader, a request sent to a follower at once, while
// the follower still names the dead leader, waits for the election and is
// served by the new leader instead of failing.
func TestRequestAtAFollowerWaitsOutAnElection(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	follower := c.Other(leader)
	c.Stop(leader) // no handover: the others learn of it as of a crash
	start := time.Now()
	status, body, _ := tc.Do(t, http.MethodPost, follower.URL()+"/v1/locks/after-crash/acquire",
		`{"holder":"w","ttl_ms":10000,"request_id":"after-crash-0123456789"}`, "Content-Type", "application/json")
	if status != http.StatusOK {
		t.Fatalf("acquire at follower %s after the crash: %d %s", follower.ID, status, body)
	}
	t.Logf("served after %v", time.Since(start).Round(time.Millisecond))
}

// Handing over where no other voter can take leadership does nothing, and
// the node stops as before.
func TestGracefulStopOfASingleNode(t *testing.T) {
	c := tc.New(t, 1)
	leader := c.WaitLeader(10 * time.Second)
	handed, err := leader.Inst.Node.Handover()
	if handed || err != nil {
		t.Fatalf("handover on a single node: handed %v, %v", handed, err)
	}
	if !leader.Inst.Node.IsLeader() {
		t.Fatal("a single node gave up leadership with nobody to take it")
	}
	mustAcquire(t, leader, "still-served", "w")
}

// A lease held across a graceful stop of the leader does not end early: the
// new leader restarts it at its full TTL, so what remains of it afterwards
// is at least what remained before.
func TestLeaseOutlivesAGracefulHandover(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	const ttl = 3 * time.Second
	sent := time.Now()
	status, g, e := acquire(t, leader, "across-handover", "w", ttl.Milliseconds(), 0)
	if status != http.StatusOK {
		t.Fatalf("acquire: %d %+v", status, e)
	}
	tc.Poll(t, 5*time.Second, "a second of the lease to pass", func() bool { return time.Since(sent) > time.Second })
	c.StopGracefully(leader)
	next := c.WaitNewLeader(leader.ID, 10*time.Second)
	status, body, _ := tc.Do(t, http.MethodGet, next.URL()+"/v1/locks/across-handover", "")
	read := time.Now()
	var st wire.LockStatus
	mustJSON(t, body, &st)
	if status != http.StatusOK || !st.Held || st.Token != g.Token || st.RemainingMillis == nil {
		t.Fatalf("after the handover: %d %s", status, body)
	}
	// The server's deadline was no earlier than sent+ttl before the stop.
	left := time.Duration(*st.RemainingMillis) * time.Millisecond
	if due := sent.Add(ttl); read.Add(left).Before(due) {
		t.Fatalf("the lease ends %v after the read, %v before its first deadline", left, due.Sub(read.Add(left)))
	}
	if left < ttl-time.Second {
		t.Errorf("%v left of a %v lease right after the handover: the new leader should restart it at its full TTL", left, ttl)
	}
}
