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
