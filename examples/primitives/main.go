// Command primitives shows fencer's other primitives from Go: it campaigns
// in an election and leads (its term of office is a fencing token), takes
// one of three permits of a semaphore (each with a token of its own), and
// takes a lock with a lock-delay. FENCER_ENDPOINTS overrides the local dev
// cluster.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fencer-io/fencer/api/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "primitives:", err)
		os.Exit(1)
	}
}

func run() error {
	endpoints := "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
	if env := os.Getenv("FENCER_ENDPOINTS"); env != "" {
		endpoints = env
	}
	c, err := client.New(strings.Split(endpoints, ","))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// An election: Campaign blocks until elected. The token is the term of
	// office, which a resource fenced on it checks like any token.
	leader, err := c.Campaign(ctx, "exporter-leader", "10.0.0.9:8080", client.TTL(10*time.Second))
	if err != nil {
		return err
	}
	if err := leader.Proclaim(ctx, "10.0.0.9:9090"); err != nil { // publish a new value
		return err
	}
	st, err := c.ElectionLeader(ctx, "exporter-leader")
	if err != nil {
		return err
	}
	fmt.Printf("leading exporter-leader in term %d, publishing %s\n", st.Token, st.Value)
	if err := leader.Resign(ctx); err != nil {
		return err
	}

	// A semaphore: one of 3 permits, each with its own fencing token.
	permit, err := c.AcquirePermit(ctx, "exporters", 3, client.TTL(10*time.Second), client.Wait(5*time.Second))
	if err != nil {
		return err
	}
	fmt.Printf("holding a permit of exporters with token %d\n", permit.Token())
	if err := permit.Release(ctx); err != nil {
		return err
	}

	// A lock-delay: if this lease ever expires (a release starts none),
	// nobody can take the lock for 5s, so that a holder that stalled has
	// time to notice and stop before anybody else starts.
	lease, err := c.Acquire(ctx, "nightly-export", client.TTL(10*time.Second), client.LockDelay(5*time.Second))
	if err != nil {
		return err
	}
	fmt.Printf("holding nightly-export with token %d and a 5s lock-delay\n", lease.Token())
	return lease.Release(ctx)
}
