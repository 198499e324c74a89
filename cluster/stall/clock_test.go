package stall

import (
	"testing"
	"time"
)

// A write is judged on the time the node has run: one found pending after
// the node itself was paused counts from the resumption, and one that goes
// on hanging is still caught a stall timeout later.
func TestStallClockExcusesAPause(t *testing.T) {
	const interval = 500 * time.Millisecond
	t0 := time.Now()
	c := runClock{interval: interval, last: t0}
	began := t0
	at := func(d time.Duration) time.Duration { return c.judge(t0.Add(d), d-began.Sub(t0)) }
	if got := at(interval); got != interval {
		t.Fatalf("a write pending while the node runs counts %v, want %v", got, interval)
	}
	// SIGSTOP for 3 s: the next tick comes late, the write still pending.
	if got := at(interval + 3*time.Second); got != 0 {
		t.Fatalf("a write found pending after a 3s pause counts %v, want 0", got)
	}
	var got time.Duration
	for d := interval + 3*time.Second; got < 2*time.Second; {
		d += interval
		got = at(d)
		if d > 10*time.Second {
			t.Fatal("a write that goes on hanging after the pause is never judged stalled")
		}
	}
}
