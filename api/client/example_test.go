package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/api/client"
)

func Example() {
	ctx := context.Background()
	c, err := client.New([]string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"})
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := c.Acquire(ctx, "report", client.TTL(10*time.Second), client.Wait(5*time.Second))
	if errors.Is(err, client.ErrLockHeld) {
		fmt.Println("somebody else holds the lock")
		return
	} else if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(context.Background())

	err = c.PutFenced(lease.Context(), "report-output", []byte("done"), lease.Token(), client.WithLock("report"))
	switch {
	case errors.Is(err, client.ErrStaleToken), errors.Is(err, client.ErrNotLockHolder):
		fmt.Println("lost the lock to a newer holder:", lease.Err())
	case err != nil:
		fmt.Println(err)
	}
}

// A service that owns partitions holds each one's lock under one session:
// one renewal keeps them all, and if the process dies they all end at
// once. Each lock still has its own fencing token.
func ExampleClient_NewSession() {
	ctx := context.Background()
	c, err := client.New([]string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := c.NewSession(ctx, client.SessionTTL(10*time.Second), client.SessionHolder("partition-owner-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(context.Background())

	for _, p := range []string{"partition-0", "partition-1", "partition-2"} {
		lease, err := s.Lock(ctx, p)
		if errors.Is(err, client.ErrLockHeld) {
			continue // another owner has it
		} else if err != nil {
			fmt.Println(err)
			return
		}
		// Work under lease.Context(): it ends with the session.
		_ = c.PutFenced(lease.Context(), p+"-state", []byte("owned"), lease.Token(), client.WithLock(p))
	}
	<-s.Done() // every lock under it can no longer be trusted
	fmt.Println("session lost:", s.Err())
}
