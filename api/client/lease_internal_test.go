package client

import (
	"errors"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// A process that wakes up past its lease's deadline learns so on its first
// look at the lease, before any timer or goroutine has had a chance to run:
// here no watcher runs at all.
func TestErrChecksTheClockItself(t *testing.T) {
	c, err := New([]string{"127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	g := wire.Grant{Lock: "l", Token: 7, Lease: "00000000000000000000000000000000", TTLMillis: 1000}
	fresh := newLease(c, g, time.Now())
	if err := fresh.Err(); err != nil {
		t.Fatalf("fresh lease: %v", err)
	}
	// Confirmed 950ms ago: past TTL minus the 100ms margin.
	paused := newLease(c, g, time.Now().Add(-950*time.Millisecond))
	if err := paused.Err(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("lease past its local deadline: %v", err)
	}
	if !closed(paused.Done()) || paused.Context().Err() == nil {
		t.Fatal("Done and Context should be ended too")
	}
	// A late confirmation of a renewal sent before the pause cannot revive it.
	paused.k.confirm(time.Now())
	if paused.Err() == nil {
		t.Fatal("a lost lease came back")
	}
}

func TestMargin(t *testing.T) {
	for _, tt := range []struct{ ttl, want time.Duration }{
		{100 * time.Millisecond, 50 * time.Millisecond},
		{500 * time.Millisecond, 50 * time.Millisecond},
		{time.Second, 100 * time.Millisecond},
		{10 * time.Second, time.Second},
	} {
		if got := Margin(tt.ttl); got != tt.want {
			t.Errorf("Margin(%v) = %v, want %v", tt.ttl, got, tt.want)
		}
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
