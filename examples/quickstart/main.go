// Command quickstart takes the lock "report", writes the key "report" of
// fencer's fenced key-value store with the grant's fencing token, and
// releases the lock. FENCER_ENDPOINTS overrides the local dev cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fencer-io/fencer/api/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
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
	lease, err := c.Acquire(ctx, "report", client.TTL(10*time.Second), client.Wait(5*time.Second))
	if errors.Is(err, client.ErrLockHeld) {
		return errors.New("somebody else holds the lock \"report\"")
	} else if err != nil {
		return err
	}
	defer lease.Release(context.Background())

	// lease.Context() is cancelled the moment the lease is lost: do the work
	// under it, and send the token with every write.
	err = c.PutFenced(lease.Context(), "report", []byte("written from Go"), lease.Token(), client.WithLock("report"))
	if errors.Is(err, client.ErrStaleToken) || errors.Is(err, client.ErrNotLockHolder) {
		return fmt.Errorf("lost the lock to a newer holder: %w", err)
	} else if err != nil {
		return err
	}
	fmt.Printf("wrote \"report\" with fencing token %d\n", lease.Token())
	return nil
}
