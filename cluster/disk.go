package cluster

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// A node whose disk stalls or fails must not keep leading. hashicorp/raft's
// leader writes its own log on its main loop before it replicates, while its
// heartbeats go out from goroutines of their own: a write that hangs stops
// every commit, yet the followers keep hearing from a leader and never elect
// another (hashicorp/raft issues 503, 612; see cluster/DESIGN.md). So the
// node times its own log writes and acts on what it sees:
//
//   - a write pending for longer than Config.StallTimeout on the leader: it
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

// ErrDiskStalled: the log store did not complete a write within the stall
// timeout while this node led.
var ErrDiskStalled = errors.New("log store write stalled")

// ErrDiskFailed: the log store failed a write.
var ErrDiskFailed = errors.New("log store write failed")

// watchedLog is the node's log store as Raft sees it below the cache: every
// write timed, the one in flight visible to the stall watch, and a failure
// reported once.
type watchedLog struct {
	raft.LogStore
	latency prometheus.Observer
	failed  func(error)

	mu       sync.Mutex
	inflight int       // writes in flight (Raft makes them one at a time)
	began    time.Time // when the oldest write in flight began
	err      error     // the first failed write's error
}

func (w *watchedLog) StoreLog(l *raft.Log) error {
	return w.write(func() error { return w.LogStore.StoreLog(l) })
}

func (w *watchedLog) StoreLogs(logs []*raft.Log) error {
	return w.write(func() error { return w.LogStore.StoreLogs(logs) })
}

func (w *watchedLog) write(store func() error) error {
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

// pending returns how long the write in flight has taken by now, 0 if none.
func (w *watchedLog) pending(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight == 0 {
		return 0
	}
	return now.Sub(w.began)
}

// failure returns the first failed write's error, if any.
func (w *watchedLog) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// diskFailed is the log store's report of a failed write. Raft steps a
// leader down by itself when its write fails; this node also hands the
// leadership over, so that the others need not wait out a heartbeat
// timeout, and then stops.
func (n *Node) diskFailed(err error) {
	n.metrics.LogWriteErrors.Inc()
	leading := n.raft != nil && n.raft.State() == raft.Leader
	n.diskOnce.Do(func() {
		n.log.Error("the log store failed a write: stopping this node. No entry that failed was replicated or answered. "+
			"Fix the disk (free space, if it is full) and restart the node: it catches up from the leader", "err", err, "leader", leading)
		go func() {
			if leading {
				n.handOff()
			}
			n.die(fmt.Errorf("%w: %v", ErrDiskFailed, err))
		}()
	})
}

// watchDisk checks the log store's write in flight every quarter of the
// stall timeout, and stops a leader whose write has stalled.
func (n *Node) watchDisk() {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.StallTimeout / 4)
	defer tick.Stop()
	warned := false
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		pending := n.logWatch.pending(time.Now())
		switch {
		case pending < n.cfg.StallTimeout:
			warned = false
		case n.raft.State() == raft.Leader:
			n.stallStepDown(pending)
			return
		case !warned:
			n.log.Warn("the log store has not completed a write; as a follower this node only falls behind until it does",
				"pending", pending.Round(time.Millisecond), "stall_timeout", n.cfg.StallTimeout)
			warned = true
		}
	}
}

// stallStepDown gives up a leadership that cannot commit: the node hands
// it to the most up-to-date follower, severs its Raft transport so that
// the followers stop hearing heartbeats (and elect a leader even if the
// hand-off failed), and reports a fatal error so that the process exits.
func (n *Node) stallStepDown(pending time.Duration) {
	n.metrics.StallStepDowns.Inc()
	n.log.Error("stepping down: the log store has not completed a write within the stall timeout, so this leader cannot commit anything. "+
		"Handing leadership over and cutting this node's Raft connections; stopping the node. Restart it once the disk answers: it catches up from the leader",
		"pending", pending.Round(time.Millisecond), "stall_timeout", n.cfg.StallTimeout, "term", n.raft.CurrentTerm())
	n.handOff()
	n.trans.Sever()
	n.die(fmt.Errorf("%w: no write completed in %v while leading", ErrDiskStalled, pending.Round(time.Millisecond)))
}

// die delivers err on Fatal, the first time only: the process should exit.
func (n *Node) die(err error) {
	select {
	case n.fatal <- err:
	default: // one fatal error is enough
	}
}
