package harness

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A poll that runs out of time reports why its conditions last failed, not
// the deadline that cut its final attempt short.
func TestPollKeepsTheReason(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := poll(ctx, 5*time.Millisecond, func() (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, errors.New("n6 has not registered itself yet")
	})
	if err == nil || !strings.Contains(err.Error(), "n6 has not registered itself yet") {
		t.Fatalf("poll: %v, want the condition's reason", err)
	}
}
