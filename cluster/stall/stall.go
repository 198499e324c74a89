// Package stall times a node's log-store writes, so that a node whose disk
// stalls or fails stops leading: Log wraps the store and Watch acts on a
// write that takes too long.
//
// A node whose disk stalls or fails must not keep leading. hashicorp/raft's
// leader writes its own log on its main loop before it replicates, while its
// heartbeats go out from goroutines of their own: a write that hangs stops
// every commit, yet the followers keep hearing from a leader and never elect
// another (hashicorp/raft issues 503, 612; see cluster/DESIGN.md). So the
// node times its own log writes and acts on what it sees:
//
//   - a write pending for longer than the stall timeout on the leader: it
//     tells the most up-to-date follower to stand for election now
//     (handOff), severs its Raft transport (no more heartbeats, so the
//     followers elect a leader within an election timeout or two even if
//     the hand-off failed) and reports a fatal error; `fencer serve` exits
//     non-zero for a supervisor to restart it. Raft's own leadership
//     transfer and shutdown both wait for the stuck main loop, so neither
//     can do it.
//   - a write that fails (EIO, ENOSPC), on any member: it reports a fatal
//     error and stops, handing leadership off first if it led. Raft has
//     already stepped a leader down and answered its proposals with the
//     error, so the entries were never replicated and no token was handed
//     out; retrying writes after a failed fsync is not safe, and a node left
//     running would fail again and again.
//
// A follower whose write hangs only falls behind (the leader needs a
// quorum, not every member); it logs it and waits.
package stall

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Log is the node's log store as Raft sees it below the cache: every write
// timed, the one in flight visible to Watch, and a failure reported.
type Log struct {
	raft.LogStore
	latency prometheus.Observer
	failed  func(error)

	mu       sync.Mutex
	inflight int       // writes in flight (Raft makes them one at a time)
	began    time.Time // when the oldest write in flight began
	err      error     // the first failed write's error
}

func (w *Log) StoreLog(l *raft.Log) error {
	return w.write(func() error { return w.LogStore.StoreLog(l) })
}

func (w *Log) StoreLogs(logs []*raft.Log) error {
	return w.write(func() error { return w.LogStore.StoreLogs(logs) })
}

func (w *Log) write(store func() error) error {
	start := time.Now()
	w.mu.Lock()
	if w.inflight == 0 {
		w.began = start
	}
	w.inflight++
	w.mu.Unlock()

	err := store()
	w.latency.Observe(time.Since(start).Seconds())

	w.mu.Lock()
	if w.inflight--; w.inflight == 0 {
		w.began = time.Time{}
	}
	first := err != nil && w.err == nil
	if first {
		w.err = err
	}
	w.mu.Unlock()
	if err != nil {
		w.failed(err)
	}
	return err
}

// IsMonotonic passes on whether the store below refuses gaps in the log
// (raft.MonotonicLogStore; wal does). Raft asks the log cache, which asks
// this: told yes, it clears the whole log after installing or restoring a
// snapshot; told no, it keeps the old entries and leaves a gap before the
// next one, and a wal store then refuses every entry after the snapshot.
func (w *Log) IsMonotonic() bool {
	m, ok := w.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// Pending returns how long the write in flight has taken by now, 0 if none.
func (w *Log) Pending(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight == 0 {
		return 0
	}
	return now.Sub(w.began)
}

// Failure returns the first failed write's error, if any.
func (w *Log) Failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// NewLog wraps store: latency observes every write's duration, and failed
// is called with the error of every failed write.
func NewLog(store raft.LogStore, latency prometheus.Observer, failed func(error)) *Log {
	return &Log{LogStore: store, latency: latency, failed: failed}
}

// Watch checks the write in flight every quarter of timeout until stop is
// closed. A write pending for timeout while leading() calls stalled, once,
// and ends the watch; on a follower it calls warn, once per stall (a
// follower only falls behind).
func Watch(w *Log, timeout time.Duration, stop <-chan struct{}, leading func() bool, stalled, warn func(pending time.Duration)) {
	interval := timeout / 4
	tick := time.NewTicker(interval)
	defer tick.Stop()
	warned := false
	clock := runClock{interval: interval, last: time.Now()}
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		pending := clock.judge(now, w.Pending(now))
		switch {
		case pending < timeout:
			warned = false
		case leading():
			stalled(pending)
			return
		case !warned:
			warn(pending)
			warned = true
		}
	}
}

// runClock tells a write that hangs from a process that did not run. A
// node that was stopped (SIGSTOP, a frozen VM) or starved of CPU finds, on
// waking, its write in flight as old as the pause, though the write had
// no more chance to complete than the node had to run; a leader paused past
// the stall timeout exited on resuming (the chaos soak's pause-leader did
// it to its witness twice). So a tick that comes more than twice its
// interval late restarts the count: a write is judged on the time the node
// has run since, and one that really hangs is still caught a stall timeout
// after the node resumed.
type runClock struct {
	interval time.Duration
	last     time.Time // the previous tick
	resumed  time.Time // the last tick that came late, zero if none yet
}

// judge returns how long the write in flight (pending by now) counts for.
func (c *runClock) judge(now time.Time, pending time.Duration) time.Duration {
	if now.Sub(c.last) > 2*c.interval {
		c.resumed = now
	}
	c.last = now
	if !c.resumed.IsZero() {
		pending = min(pending, now.Sub(c.resumed))
	}
	return pending
}
