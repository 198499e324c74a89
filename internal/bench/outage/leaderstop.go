package outage

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"syscall"
	"time"
)

// StopSignal returns the signal a -signal flag names and the mode of the run
// it makes: TERM a graceful stop (a rolling restart), KILL a crash, STOP a
// leader frozen with its connections open (a hung host: nothing answers,
// nothing is refused; whoever runs it sends SIGCONT afterwards).
func StopSignal(name string) (syscall.Signal, string, error) {
	switch name {
	case "TERM":
		return syscall.SIGTERM, "graceful", nil
	case "KILL":
		return syscall.SIGKILL, "crash", nil
	case "STOP":
		return syscall.SIGSTOP, "frozen", nil
	}
	return 0, "", fmt.Errorf("-signal %q: want TERM, KILL or STOP", name)
}

// Timeline records when things were first seen after the leader was
// stopped, in milliseconds since the stop (Result.Timeline). Its zero value
// is ready; it is safe for concurrent use.
type Timeline struct {
	mu    sync.Mutex
	at    time.Time
	marks map[string]float64
}

// Start sets the moment of the stop that later marks are measured from.
func (t *Timeline) Start(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.at = at
}

// At returns the moment set by Start (zero before it).
func (t *Timeline) At() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.at
}

// Mark records name now, unless it was recorded before.
func (t *Timeline) Mark(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.marks == nil {
		t.marks = map[string]float64{}
	}
	if _, ok := t.marks[name]; !ok {
		t.marks[name] = float64(time.Since(t.at).Microseconds()) / 1000
	}
}

// Marks returns a copy of what was recorded.
func (t *Timeline) Marks() map[string]float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.marks)
}

// FollowExit marks "old_leader_exited" once process pid is gone, or ctx
// ends. It polls: the process is not this one's child, so it cannot be
// waited for.
func (t *Timeline) FollowExit(ctx context.Context, pid int) {
	for ctx.Err() == nil && syscall.Kill(pid, 0) == nil {
		time.Sleep(2 * time.Millisecond)
	}
	t.Mark("old_leader_exited")
}
