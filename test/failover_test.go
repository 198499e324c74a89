package test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster/logstore"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Tokens share one strictly increasing sequence across locks and across a
// leader failover; the old leader, once back, issues nothing stale.
func TestTokensIncreaseAcrossLocksAndFailover(t *testing.T) {
	eachLogStore(t, tokensIncreaseAcrossLocksAndFailover)
}

func tokensIncreaseAcrossLocksAndFailover(t *testing.T, kind logstore.Kind) {
	c := tc.New(t, 3, tc.Options{LogStore: kind})
	leader := c.WaitLeader(10 * time.Second)
	var last uint64
	next := func(n *tc.Node, lock string) wire.Grant {
		t.Helper()
		g := mustAcquire(t, n, lock, "w")
		if g.Token <= last {
			t.Fatalf("token %d after %d", g.Token, last)
		}
		last = g.Token
		return g
	}
	for i := range 5 {
		next(leader, fmt.Sprintf("lock-%d", i))
	}
	held := next(leader, "held-across-failover")

	c.Stop(leader)
	newLeader := c.WaitNewLeader(leader.ID, 15*time.Second)
	for i := range 5 {
		next(newLeader, fmt.Sprintf("after-%d", i))
	}
	// The lock held across the failover is still held by its grant.
	status, body, _ := tc.Do(t, http.MethodGet, newLeader.URL()+"/v1/locks/held-across-failover", "")
	var st wire.LockStatus
	mustJSON(t, body, &st)
	if status != http.StatusOK || !st.Held || st.Token != held.Token {
		t.Fatalf("held lock after failover: %d %+v", status, st)
	}

	c.Restart(leader)
	tc.Poll(t, 15*time.Second, "old leader caught up", func() bool {
		return lastToken(leader) == last
	})
	// Through the old leader (now a follower that forwards) tokens keep rising.
	for i := range 3 {
		next(leader, fmt.Sprintf("back-%d", i))
	}
}

// A full stop and restart of every node keeps the sequence: the next token is
// larger than every token issued before.
func TestFullRestartKeepsTokensIncreasing(t *testing.T) {
	eachLogStore(t, fullRestartKeepsTokensIncreasing)
}

func fullRestartKeepsTokensIncreasing(t *testing.T, kind logstore.Kind) {
	c := tc.New(t, 3, tc.Options{LogStore: kind})
	leader := c.WaitLeader(10 * time.Second)
	var last uint64
	for i := range 10 {
		last = mustAcquire(t, leader, fmt.Sprintf("l%d", i), "w").Token
	}
	mustPut := func(n *tc.Node, token uint64) {
		if s, e := put(t, n, "k", "v", "Fencing-Token", tok(token)); s != http.StatusOK {
			t.Fatalf("put %d: %d %+v", token, s, e)
		}
	}
	mustPut(leader, last)
	for _, n := range c.Nodes {
		c.Stop(n)
	}
	for _, n := range c.Nodes {
		c.Restart(n)
	}
	leader = c.WaitLeader(20 * time.Second)
	g := mustAcquire(t, leader, "after-restart", "w")
	if g.Token <= last {
		t.Fatalf("token after restart %d, not above %d", g.Token, last)
	}
	// The fenced key kept its high-water mark.
	if s, e := put(t, leader, "k", "old", "Fencing-Token", tok(last)); s != http.StatusConflict || e.Code != wire.CodeStaleToken {
		t.Fatalf("replay after restart: %d %+v", s, e)
	}
	mustPut(leader, g.Token)
}

// A follower forwards writes and linearizable reads to the leader.
func TestFollowerForwards(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	follower := c.Other(leader)
	g := mustAcquire(t, follower, "fwd", "w")
	status, body, _ := tc.Do(t, http.MethodGet, follower.URL()+"/v1/locks/fwd/check?token="+tok(g.Token), "")
	var ck wire.CheckResponse
	mustJSON(t, body, &ck)
	if status != http.StatusOK || !ck.Current || ck.Token != g.Token {
		t.Fatalf("check via follower: %d %s", status, body)
	}
	status, _, _ = tc.Do(t, http.MethodPost, follower.URL()+"/v1/locks/fwd/renew", fmt.Sprintf(`{"lease":%q,"token":%d}`, g.Lease, g.Token))
	if status != http.StatusOK {
		t.Fatalf("renew via follower: %d", status)
	}
	if release(t, follower, g) != http.StatusOK {
		t.Fatal("release via follower failed")
	}
	status, body, _ = tc.Do(t, http.MethodGet, follower.URL()+"/v1/locks/fwd/check?token="+tok(g.Token), "")
	mustJSON(t, body, &ck)
	if ck.Current || ck.Token != 0 {
		t.Fatalf("check after release: %s", body)
	}
	// A stale read is answered locally.
	tc.Poll(t, 5*time.Second, "follower applied release", func() bool {
		st, _ := follower.Inst.Coord.Lock(context.Background(), "fwd", true)
		return !st.Held
	})
	status, body, _ = tc.Do(t, http.MethodGet, follower.URL()+"/v1/locks/fwd?stale=true", "")
	var st wire.LockStatus
	mustJSON(t, body, &st)
	if status != http.StatusOK || st.Held {
		t.Fatalf("stale read: %d %s", status, body)
	}
}

// Waiters get a released lock in FIFO order, each in the entry that frees it.
func TestWaitersServedInFIFOOrder(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	first := mustAcquire(t, leader, "q", "holder-0")

	const waiters = 4
	grants := make(chan wire.Grant, waiters)
	var wg sync.WaitGroup
	for i := 1; i <= waiters; i++ {
		holder := fmt.Sprintf("holder-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, g, e := acquire(t, c.Nodes[i%3], "q", holder, 10_000, 30_000)
			if status != http.StatusOK {
				t.Errorf("%s: %d %+v", holder, status, e)
				return
			}
			grants <- g
		}()
		// Enqueue in a known order: wait until this waiter is queued.
		tc.Poll(t, 10*time.Second, holder+" queued", func() bool { return leader.Inst.Coord.Waiters("q") == i })
	}
	prev := first
	if release(t, leader, prev) != http.StatusOK {
		t.Fatal("release failed")
	}
	for i := 1; i <= waiters; i++ {
		var g wire.Grant
		select {
		case g = <-grants:
		case <-time.After(20 * time.Second):
			t.Fatalf("waiter %d never got the lock", i)
		}
		if want := fmt.Sprintf("holder-%d", i); g.Holder != want {
			t.Fatalf("grant %d went to %s, want %s", i, g.Holder, want)
		}
		if g.Token <= prev.Token {
			t.Fatalf("handoff token %d not above %d", g.Token, prev.Token)
		}
		if release(t, leader, g) != http.StatusOK {
			t.Fatalf("release by %s failed", g.Holder)
		}
		prev = g
	}
	wg.Wait()
}

// Regression: a linearizable read right after a failover, before any write,
// must answer. Waiting for the FSM to reach the commit index hung here,
// because the new leader's no-op entry counts in the commit index but never
// reaches the FSM.
func TestLinearizableReadRightAfterFailover(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	g := mustAcquire(t, leader, "r", "w")
	c.Stop(leader)
	next := c.WaitNewLeader(leader.ID, 15*time.Second)
	client := &http.Client{Timeout: 5 * time.Second}
	for _, path := range []string{"/v1/locks/r", "/v1/locks/r/check?token=" + tok(g.Token), "/v1/locks", "/v1/kv/absent"} {
		resp, err := client.Get(next.URL() + path)
		if err != nil {
			t.Fatalf("GET %s right after failover: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && !(path == "/v1/kv/absent" && resp.StatusCode == http.StatusNotFound) {
			t.Fatalf("GET %s right after failover: %s", path, resp.Status)
		}
	}
	if _, err := next.Inst.Node.Ready(); err != nil {
		t.Fatalf("the new leader is not ready before any write: %v", err)
	}
}
