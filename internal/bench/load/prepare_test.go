package load

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// Every prepared client is cleaned up: all of them after a run, and those
// prepared before one that fails, which are not left holding sessions.
func TestPrepareCleansUpEveryPreparedClient(t *testing.T) {
	var cleaned []int
	newClient := func(fail int) Client {
		return func(_ context.Context, i int) (Op, func(), error) {
			if i == fail {
				return nil, nil, errors.New("no session")
			}
			return func(context.Context) error { return nil }, func() { cleaned = append(cleaned, i) }, nil
		}
	}
	ops, cleanup, err := Prepare(context.Background(), 3, newClient(-1))
	if err != nil || len(ops) != 3 {
		t.Fatalf("Prepare: %d ops, %v", len(ops), err)
	}
	cleanup()
	if !slices.Equal(cleaned, []int{0, 1, 2}) {
		t.Fatalf("cleaned %v after a run, want every client", cleaned)
	}

	cleaned = nil
	_, cleanup, err = Prepare(context.Background(), 4, newClient(2))
	if err == nil {
		t.Fatal("a client that fails to prepare is not an error")
	}
	cleanup()
	if !slices.Equal(cleaned, []int{0, 1}) {
		t.Fatalf("cleaned %v after client 2 failed, want 0 and 1", cleaned)
	}
}
