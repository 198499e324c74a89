package test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Every node serves HTTP/2 over plain TCP (h2c, prior knowledge) beside
// HTTP/1.1, and the Go client speaks it with WithHTTP2: a lock cycle, a
// fenced write and a stale write's refusal go through a follower that
// forwards and through the leader, and the answers come over HTTP/2.
func TestNodesServeHTTP2Cleartext(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)

	h2 := &http.Client{Transport: &http.Transport{Protocols: client.Protocols(true)}, Timeout: 5 * time.Second}
	for _, n := range c.Running() {
		resp, err := h2.Get(n.URL() + "/readyz")
		if err != nil {
			t.Fatalf("%s over h2c: %v", n.ID, err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: /readyz over h2c answered %s %d, want HTTP/2.0 200", n.ID, resp.Proto, resp.StatusCode)
		}
	}
	// HTTP/1.1 is still served on the same port.
	resp, err := http.Get(leader.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz over HTTP/1.1 answered %s %d", resp.Proto, resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.New([]string{c.Other(leader).HTTPAddr}, client.WithHTTP2())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	first, err := cl.Acquire(ctx, "h2-lock", client.TTL(10*time.Second))
	if err != nil {
		t.Fatalf("acquire over h2c: %v", err)
	}
	if err := cl.PutFenced(ctx, "h2-key", []byte("one"), first.Token(), client.WithLock("h2-lock")); err != nil {
		t.Fatalf("fenced put over h2c: %v", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := cl.Acquire(ctx, "h2-lock", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(context.Background())
	if second.Token() <= first.Token() {
		t.Fatalf("tokens %d then %d", first.Token(), second.Token())
	}
	if err := cl.PutFenced(ctx, "h2-key", []byte("two"), second.Token(), client.WithLock("h2-lock")); err != nil {
		t.Fatal(err)
	}
	if err := cl.PutFenced(ctx, "h2-key", []byte("late"), first.Token()); !errors.Is(err, client.ErrStaleToken) {
		t.Fatalf("a stale write over h2c: %v, want ErrStaleToken", err)
	}
}
