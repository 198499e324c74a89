package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Issue 28, item 4: durable waiters keep their place across a leader
// change. Three durable waiters (the Go client's Durable) queue behind a
// holder whose lease nobody renews, and a fourth through plain HTTP whose
// client never comes back; the leader is killed; on the new leader the
// holder's lease ends, and the three, retrying with their request ids, are
// granted in enqueue order with increasing tokens (each grant saying where
// it queued); the fourth leaves the queue after its wait_ms and is never
// granted.
func TestDurableWaitersSurviveALeaderCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	oc := startOutside(t, 3)
	oc.awaitReady(t)
	var endpoints []string
	for _, m := range oc.members {
		endpoints = append(endpoints, m.httpAddr)
	}
	c, err := client.New(endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder, err := c.Acquire(ctx, "job", client.Holder("holder"), client.TTL(3*time.Second), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	leader := oc.leader(t)
	waiters := func() int {
		st, body := oc.do(t, "GET", leader, "/v1/locks/job", "")
		var ls wire.LockStatus
		if st != http.StatusOK || json.Unmarshal([]byte(body), &ls) != nil {
			t.Fatalf("GET /v1/locks/job: %d %s", st, body)
		}
		return ls.Waiters
	}
	type answer struct {
		who   string
		lease *client.Lease
		err   error
	}
	answers := make(chan answer, 3)
	names := []string{"w1", "w2", "w3"}
	for i, who := range names {
		go func() {
			l, err := c.Acquire(ctx, "job", client.Holder(who), client.TTL(20*time.Second), client.Wait(40*time.Second), client.Durable(), client.NoKeepAlive())
			answers <- answer{who, l, err}
		}()
		tc.Poll(t, 10*time.Second, who+" queued", func() bool { return waiters() == i+1 })
	}
	// The fourth asks once, to the leader, and is gone with it.
	const goneWait = 4 * time.Second
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		body := fmt.Sprintf(`{"holder":"gone","ttl_ms":20000,"wait_ms":%d,"durable":true,"request_id":"gone-0123456789abcdef"}`, goneWait.Milliseconds())
		req, _ := http.NewRequest("POST", "http://"+leader.httpAddr+"/v1/locks/job/acquire", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	tc.Poll(t, 10*time.Second, "gone queued", func() bool { return waiters() == 4 })

	leader.proc.Kill()
	var granted []*client.Lease
	for range names {
		select {
		case a := <-answers:
			if a.err != nil {
				t.Fatalf("%s after the leader's crash: %v", a.who, a.err)
			}
			granted = append(granted, a.lease)
			if len(granted) < len(names) {
				if err := a.lease.Release(ctx); err != nil {
					t.Fatalf("release by %s: %v", a.who, err)
				}
			}
		case <-ctx.Done():
			t.Fatal("the durable waiters were not all granted")
		}
	}
	last, lastIndex := holder.Token(), uint64(0)
	for i, l := range granted {
		g := l.Grant()
		if g.Holder != names[i] || g.Token <= last || g.WaitIndex <= lastIndex || g.WaitIndex >= g.Token {
			t.Fatalf("grant %d: %+v after token %d and wait index %d; want %s", i, g, last, lastIndex, names[i])
		}
		t.Logf("%s granted token %d, enqueued at %d", g.Holder, g.Token, g.WaitIndex)
		last, lastIndex = g.Token, g.WaitIndex
	}
	<-gone
	// w3 holds the lock while gone's wait runs out on the new leader.
	var newLeader *outsideMember
	for _, m := range oc.members {
		if m != leader {
			newLeader = m // any live member answers (it forwards)
			break
		}
	}
	tc.Poll(t, 3*goneWait, "gone to leave the queue", func() bool {
		st, body := oc.do(t, "GET", newLeader, "/v1/locks/job", "")
		var ls wire.LockStatus
		return st == http.StatusOK && json.Unmarshal([]byte(body), &ls) == nil && ls.Waiters == 0 && ls.Holder == "w3"
	})
	if err := granted[2].Release(ctx); err != nil {
		t.Fatal(err)
	}
	st, body := oc.do(t, "GET", newLeader, "/v1/locks/job", "")
	var ls wire.LockStatus
	if st != http.StatusOK || json.Unmarshal([]byte(body), &ls) != nil || ls.Held {
		t.Fatalf("after w3's release: %d %s, want free (gone never granted)", st, body)
	}
}

// What a durable wait costs a waiter: an acquire that waits 20 ms behind a
// holder and is answered lock_held, plain and durable (one Enqueue entry,
// one commit, more), median of 200 each, on three in-process nodes over
// real TCP with their disks. It runs only when asked:
// FENCER_MEASURE_DURABLE=1 go test ./test/ -run TestMeasureDurableEnqueue -v
func TestMeasureDurableEnqueue(t *testing.T) {
	if os.Getenv("FENCER_MEASURE_DURABLE") == "" {
		t.Skip("set FENCER_MEASURE_DURABLE=1 to measure")
	}
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)
	cl, err := client.New([]string{leader.HTTPAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := cl.Acquire(ctx, "m", client.TTL(time.Hour), client.Holder("holder")); err != nil {
		t.Fatal(err)
	}
	measure := func(opts ...client.AcquireOption) time.Duration {
		var took []time.Duration
		for range 200 {
			start := time.Now()
			_, err := cl.Acquire(ctx, "m", append([]client.AcquireOption{client.Wait(20 * time.Millisecond), client.Holder("w")}, opts...)...)
			took = append(took, time.Since(start))
			if !errors.Is(err, client.ErrLockHeld) {
				t.Fatalf("acquire behind the holder: %v", err)
			}
		}
		slices.Sort(took)
		return took[len(took)/2]
	}
	plain := measure()
	durable := measure(client.Durable())
	t.Logf("a 20 ms wait answered lock_held: plain median %v, durable median %v (+%v)", plain, durable, durable-plain)
}
