package harness

import (
	"context"
	"time"
)

// Within runs fn with a deadline of d.
func Within(ctx context.Context, d time.Duration, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(ctx)
}

// Retry calls fn every 200ms until it succeeds or ctx ends.
func Retry(ctx context.Context, fn func() error) error {
	return poll(ctx, 200*time.Millisecond, func() (bool, error) {
		err := fn()
		return err == nil, err
	})
}
